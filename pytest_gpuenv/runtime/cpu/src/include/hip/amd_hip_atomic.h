// The atomics of ROCm's amd_detail/amd_hip_atomic.h and amd_hip_unsafe_atomics.h that <hip/hip_runtime.h>
// lacks, for the CPU executor (pytest-gpuenv): floating-point atomicMin/atomicMax with ROCm's order of zeros,
// the unsafe/safe floating-point atomics, atomicAdd on __half/__half2, and clang's __hip_atomic_* builtins
// (with __HIP_MEMORY_SCOPE_*), which published code calls directly. As in hip_runtime.h each is a
// compare-and-swap loop in the uninstrumented runtime: bounds-checked, exempt from race reports.
#pragma once

// the body of a read-modify-write: *p becomes `expr` of its old value o (and v), the old value is returned
#define __gpuenv_RMW(T, p, expr)                                                                  \
    GPUENV_ACHECK(p);                                                                           \
    T o, n;                                                                                     \
    __atomic_load(p, &o, __ATOMIC_RELAXED);                                                     \
    do n = (expr);                                                                              \
    while (!__atomic_compare_exchange(p, &o, &n, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));    \
    return o;
template <class T> inline bool __gpuenv_is_neg_zero(T x) { return x == 0 && signbit(x); }
// amd_hip_atomic.h atomicMin(float*): stores val while `value > val || (val is -0.0 && value == 0)`, so -0.0
// is below +0.0 and a NaN on either side stores nothing; atomicMax: `value < val || (value is -0.0 && val == 0)`
template <class T> inline T __gpuenv_fmin_rocm(T o, T v) { return (o > v || (__gpuenv_is_neg_zero(v) && o == 0)) ? v : o; }
template <class T> inline T __gpuenv_fmax_rocm(T o, T v) { return (o < v || (__gpuenv_is_neg_zero(o) && v == 0)) ? v : o; }
#define __gpuenv_FP_ATOMICS(T, pre, op, expr) \
    GPUENV_RT T pre##op(T* p, T v) { __gpuenv_RMW(T, p, expr) }
#define __gpuenv_FP_MINMAX(T)                                           \
    __gpuenv_FP_ATOMICS(T, atomic, Min, __gpuenv_fmin_rocm(o, v))         \
    __gpuenv_FP_ATOMICS(T, atomic, Max, __gpuenv_fmax_rocm(o, v))         \
    __gpuenv_FP_ATOMICS(T, atomic, Min_system, __gpuenv_fmin_rocm(o, v))  \
    __gpuenv_FP_ATOMICS(T, atomic, Max_system, __gpuenv_fmax_rocm(o, v))  \
    __gpuenv_FP_ATOMICS(T, unsafeAtomic, Add, o + v)                    \
    __gpuenv_FP_ATOMICS(T, unsafeAtomic, Min, __gpuenv_fmin_rocm(o, v))   \
    __gpuenv_FP_ATOMICS(T, unsafeAtomic, Max, __gpuenv_fmax_rocm(o, v))   \
    __gpuenv_FP_ATOMICS(T, safeAtomic, Add, o + v)                      \
    __gpuenv_FP_ATOMICS(T, safeAtomic, Min, __gpuenv_fmin_rocm(o, v))     \
    __gpuenv_FP_ATOMICS(T, safeAtomic, Max, __gpuenv_fmax_rocm(o, v))
__gpuenv_FP_MINMAX(float)
__gpuenv_FP_MINMAX(double)
#undef __gpuenv_FP_MINMAX
#undef __gpuenv_FP_ATOMICS

// __half / __half2 (each half rounded on its own, as the packed add does)
GPUENV_RT __half atomicAdd(__half* p, __half v) { __gpuenv_RMW(__half, p, o + v) }
GPUENV_RT __half2 atomicAdd(__half2* p, __half2 v) { __gpuenv_RMW(__half2, p, (__half2{o.x + v.x, o.y + v.y})) }
GPUENV_RT __half2 unsafeAtomicAdd(__half2* p, __half2 v) { __gpuenv_RMW(__half2, p, (__half2{o.x + v.x, o.y + v.y})) }

// clang's HIP atomic builtins: __hip_atomic_<op>(ptr, value, order, scope); the scope changes nothing here
#ifndef __HIP_MEMORY_SCOPE_SINGLETHREAD
#define __HIP_MEMORY_SCOPE_SINGLETHREAD 1
#define __HIP_MEMORY_SCOPE_WAVEFRONT 2
#define __HIP_MEMORY_SCOPE_WORKGROUP 3
#define __HIP_MEMORY_SCOPE_AGENT 4
#define __HIP_MEMORY_SCOPE_SYSTEM 5
#endif
#if !(defined(__has_builtin) && __has_builtin(__hip_atomic_load))
template <class T> GPUENV_RT T __hip_atomic_load(T* p, int, int) {
    GPUENV_ACHECK(p);
    T r;
    __atomic_load(p, &r, __ATOMIC_SEQ_CST);
    return r;
}
template <class T> GPUENV_RT void __hip_atomic_store(T* p, typename __gpuenv_id<T>::type v, int, int) {
    GPUENV_ACHECK(p);
    __atomic_store(p, &v, __ATOMIC_SEQ_CST);
}
#define __gpuenv_HIP_ATOMIC(name, expr)                                                                  \
    template <class T> GPUENV_RT T __hip_atomic_##name(T* p, typename __gpuenv_id<T>::type v, int, int) { \
        __gpuenv_RMW(T, p, expr)                                                                            \
    }
__gpuenv_HIP_ATOMIC(fetch_add, o + v)
__gpuenv_HIP_ATOMIC(fetch_sub, o - v)
__gpuenv_HIP_ATOMIC(fetch_and, o & v)
__gpuenv_HIP_ATOMIC(fetch_or, o | v)
__gpuenv_HIP_ATOMIC(fetch_xor, o ^ v)
__gpuenv_HIP_ATOMIC(fetch_min, v < o ? v : o)
__gpuenv_HIP_ATOMIC(fetch_max, v > o ? v : o)
__gpuenv_HIP_ATOMIC(exchange, v)
#undef __gpuenv_HIP_ATOMIC
template <class T>
GPUENV_RT bool __hip_atomic_compare_exchange_strong(T* p, T* expected, typename __gpuenv_id<T>::type v, int, int, int) {
    GPUENV_ACHECK(p);
    return __atomic_compare_exchange(p, expected, &v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
template <class T>
GPUENV_RT bool __hip_atomic_compare_exchange_weak(T* p, T* expected, typename __gpuenv_id<T>::type v, int, int, int) {
    GPUENV_ACHECK(p);
    return __atomic_compare_exchange(p, expected, &v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
#endif
