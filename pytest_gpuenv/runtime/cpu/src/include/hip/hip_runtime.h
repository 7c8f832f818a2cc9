// <hip/hip_runtime.h> for the CPU executor (pytest-gpuenv): device code compiled by g++/clang++.
// Each GPU thread is a fiber; threadIdx & co. read the executor's state; warpSize is GPUENV_WARP_SIZE (32 or
// 64), under the rule of the ROCm version the run stands for (below); with GPUENV_CHECK every load and store
// is checked. The target's macros (__gfx90a__, __GFX9__, __AMDGCN__, ...) come on the command line (rtc/target.py).
#pragma once
#ifndef GPUENV_WARP_SIZE
#error "compile with -DGPUENV_WARP_SIZE=32 or 64 (pytest_gpuenv.rtc.compile_kernel(arch='cpu') does)"
#endif
#include <assert.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../gpuenv_cpu.h"
#include "../gpuenv_globals.h"
#include "../gpuenv_libc.h"
#include "hip_fp16.h"
#include "hip_vector_types.h"

// what hipcc defines for AMD targets (also passed on the command line: code may test them before the include)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#ifndef __HIP_PLATFORM_HCC__
#define __HIP_PLATFORM_HCC__
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#ifndef __HIP__
#define __HIP__ 1
#endif
#ifndef __AMDGCN_WAVEFRONT_SIZE
#define __AMDGCN_WAVEFRONT_SIZE GPUENV_WARP_SIZE
#endif
#ifndef __AMDGCN_WAVEFRONT_SIZE__
#define __AMDGCN_WAVEFRONT_SIZE__ GPUENV_WARP_SIZE
#endif
#define __GPUENV_CPU__ 1
// used: a static kernel (or a name-expression marker naming one) is emitted even where nothing calls it
#define __global__ __attribute__((__used__))
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((__always_inline__))
// not __attribute__((__noinline__)): libstdc++ (<execution>) writes __attribute__((__noinline__)) itself
#define __noinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((__aligned__(n)))
#define GPUENV_CAT2(a, b) a##b
#define GPUENV_CAT(a, b) GPUENV_CAT2(a, b)
// Static storage wherever declared (kernels, templates, inline helpers, namespace scope). Each variable
// comes with two red zones declared just before it, __gpuenv_rza<N> (64 bytes) then __gpuenv_rzb<N> (32):
// compilers emit the three together, in declaration order or in reverse, so the variable is the symbol
// next to rzb on the side away from rza (rtc/_cpu.py: shared_symbols), whatever section it lands in
// (g++ puts template static locals in COMDAT .bss sections and ignores a section attribute there); an
// overflow lands in a red zone. The executor poisons the variables per block and shadows them.
#define GPUENV_SHARED2(n)                                                                           \
    static char __gpuenv_rza##n[64] __attribute__((__used__, __aligned__(16)));                             \
    static char __gpuenv_rzb##n[32] __attribute__((__used__, __aligned__(16)));                             \
    static __attribute__((__aligned__(16)))
#define GPUENV_SHARED1(n) GPUENV_SHARED2(n)
#define __shared__ GPUENV_SHARED1(__COUNTER__)
extern "C" __attribute__((__visibility__("hidden"))) gpuenv_state_t __gpuenv_state;  // this module's (GPUENV_ENTRY)
#define HIP_DYNAMIC_SHARED(type, var) type* var = (type*)__gpuenv_state.dyn_shared;
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

// objects, not macros: a kernel parameter or local named blockIdx is fine
static constexpr const gpuenv_u3& threadIdx = __gpuenv_state.tid;
static constexpr const gpuenv_u3& blockIdx = __gpuenv_state.bid;
static constexpr const gpuenv_u3& blockDim = __gpuenv_state.bdim;
static constexpr const gpuenv_u3& gridDim = __gpuenv_state.gdim;
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)
// warpSize: a constant expression before ROCm 7 (clr amd_warp_functions.h: static constexpr int warpSize =
// __AMDGCN_WAVEFRONT_SIZE); from ROCm 7 an object that converts to int and is no constant expression
// (static_assert(warpSize == 64) fails to compile there, as here). GPUENV_ROCM: major * 100 + minor (rtc/target.py)
#ifndef GPUENV_ROCM
#define GPUENV_ROCM 700
#endif
#if GPUENV_ROCM >= 700
inline const struct gpuenv_warp_size_t {
    __attribute__((__always_inline__, __const__)) operator int() const noexcept { return gpuenv_wave(); }
    static int gpuenv_wave() noexcept { return GPUENV_WARP_SIZE; }  // (not constexpr: as on ROCm 7)
} warpSize{};
#else
static constexpr int warpSize = GPUENV_WARP_SIZE;
#endif

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(const gpuenv_u3& u) : x(u.x), y(u.y), z(u.z) {}
};

#if GPUENV_CHECK
#define GPUENV_RT __attribute__((__noinline__, __no_sanitize__("thread")))
#define GPUENV_ACHECK(p) gpuenv_atomic_check((void*)(p), sizeof(*(p)), __builtin_return_address(0))
#else
#define GPUENV_RT inline __attribute__((__always_inline__))
#define GPUENV_ACHECK(p) ((void)0)
#endif

// ---------------------------------------------------------------- barriers, warps
// GPUENV_HERE: the caller's source position, a barrier's or warp operation's identity (gpuenv_cpu.h)
#if defined(__has_builtin) && __has_builtin(__builtin_COLUMN)
#define GPUENV_COLUMN (__builtin_COLUMN() & 1023)
#else
#define GPUENV_COLUMN 0  // g++ before 13: the line alone
#endif
#define GPUENV_HERE const char* gpuenv_file = __builtin_FILE(), int gpuenv_where = __builtin_LINE() * 1024 + GPUENV_COLUMN
#define GPUENV_AT gpuenv_file, gpuenv_where
#define GPUENV_BAR_AT(kind) gpuenv_file, gpuenv_where * 4 + (kind)  // a barrier's site (gpuenv_cpu.h)
inline __attribute__((__always_inline__)) void __syncthreads(GPUENV_HERE) { gpuenv_sync(GPUENV_BAR_AT(GPUENV_BAR_PLAIN)); }
inline __attribute__((__always_inline__)) int __syncthreads_count(int p, GPUENV_HERE) {
    return gpuenv_barrier(GPUENV_BAR_AT(GPUENV_BAR_COUNT), p != 0);
}
inline __attribute__((__always_inline__)) int __syncthreads_and(int p, GPUENV_HERE) {
    return gpuenv_barrier(GPUENV_BAR_AT(GPUENV_BAR_AND), p != 0);
}
inline __attribute__((__always_inline__)) int __syncthreads_or(int p, GPUENV_HERE) {
    return gpuenv_barrier(GPUENV_BAR_AT(GPUENV_BAR_OR), p != 0);
}
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_block() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define __threadfence_system() __atomic_thread_fence(__ATOMIC_SEQ_CST)
inline __attribute__((__always_inline__)) unsigned __lane_id() { return __gpuenv_state.lin % warpSize; }

// The *_sync functions' mask, as ROCm's amd_warp_sync_functions.h takes it from ROCm 6.2: a 64-bit integer (a
// static_assert; 32 or 64 bits on gfx1250), its upper half ignored at wave32, and, unless NDEBUG is defined, a
// trap when the lanes that pass a mask value are not exactly that mask (lanes may pass disjoint masks that
// together cover the active lanes): the executor checks that in checked mode (warps.cpp). Before ROCm 6.2, and
// in the CUDA dialect (GPUENV_CUDA_MASKS: CUDA's rule, a 32-bit mask), the mask is not checked.
#if GPUENV_ROCM >= 602 && !defined(GPUENV_CUDA_MASKS)
#define GPUENV_ROCM_MASKS 1
#if defined(__gfx1250__)
#define GPUENV_MASK_TYPE_OK(M) (std::is_integral<M>::value && (sizeof(M) == 4 || sizeof(M) == 8))
#else
#define GPUENV_MASK_TYPE_OK(M) (std::is_integral<M>::value && sizeof(M) == 8)
#endif
#else
#define GPUENV_ROCM_MASKS 0
#define GPUENV_MASK_TYPE_OK(M) true
#endif
#if defined(NDEBUG) || !GPUENV_ROCM_MASKS
#define GPUENV_MASK_TRAPS 0  // (ROCm's __hip_assert is empty under NDEBUG)
#else
#define GPUENV_MASK_TRAPS 1
#endif
template <class M> inline __attribute__((__always_inline__)) unsigned long long gpuenv_mask(M m) {
    static_assert(GPUENV_MASK_TYPE_OK(M), "The mask must be a 64-bit integer. "
                                          "Implicitly promoting a smaller integer is almost always an error.");
    unsigned long long m64 = sizeof(M) == 4 ? (unsigned long long)(unsigned)m : (unsigned long long)m;
    return GPUENV_WARP_SIZE == 32 ? m64 & 0xFFFFFFFFull : m64;
}
inline __attribute__((__always_inline__)) uint64_t gpuenv_sync_op(int op, uint64_t v, int arg, int width, unsigned long long m,
                                                              const char* file, int where) {
    return GPUENV_MASK_TRAPS ? gpuenv_warp_op_mask(op, v, arg, width, m, file, where)
                             : gpuenv_warp_op(op, v, arg, width, file, where);
}
#if GPUENV_ROCM >= 700 && !defined(GPUENV_CUDA_MASKS)
inline __attribute__((__always_inline__)) void __syncwarp(GPUENV_HERE) {
    gpuenv_warp_op(GPUENV_OP_SYNCWARP, 0, 0, warpSize, GPUENV_AT);
}
template <class M> inline __attribute__((__always_inline__)) void __syncwarp(M m, GPUENV_HERE) {
    gpuenv_sync_op(GPUENV_OP_SYNCWARP, 0, 0, warpSize, gpuenv_mask(m), GPUENV_AT);
}
#else
inline __attribute__((__always_inline__)) void __syncwarp(unsigned long long = ~0ull, GPUENV_HERE) {
    gpuenv_warp_op(GPUENV_OP_SYNCWARP, 0, 0, warpSize, GPUENV_AT);
}
#endif

// the types ROCm's __shfl* take: its overloads (amd_warp_functions.h) are for arithmetic types, and what
// converts to them; amd_hip_fp16.h adds __half and __half2. Others (float2, a pointer) are a compile error there.
template <class T> struct __gpuenv_shfl_ok : std::integral_constant<bool, std::is_arithmetic<T>::value || std::is_enum<T>::value> {};
template <class T>
inline __attribute__((__always_inline__)) T gpuenv_shfl(int op, T v, int arg, int width, const char* file, int where,
                                                    unsigned long long mask = 0, bool masked = false) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "__shfl: a type of at most 8 bytes");
    static_assert(__gpuenv_shfl_ok<T>::value, "__shfl: ROCm has no overload for this type");
    uint64_t bits = 0;
    __builtin_memcpy(&bits, &v, sizeof(T));
    bits = masked ? gpuenv_sync_op(op, bits, arg, width, mask, file, where) : gpuenv_warp_op(op, bits, arg, width, file, where);
    T r;
    __builtin_memcpy(&r, &bits, sizeof(T));
    return r;
}
#define GPUENV_SHFL(name, op, argt)                                                                       \
    template <class T>                                                                                     \
    inline __attribute__((__always_inline__)) T name(T v, argt a, int width = warpSize, GPUENV_HERE) {          \
        return gpuenv_shfl(op, v, (int)a, width, GPUENV_AT);                                               \
    }                                                                                                      \
    template <class M, class T>                                                                            \
    inline __attribute__((__always_inline__)) T name##_sync(M m, T v, argt a, int width = warpSize, GPUENV_HERE) { \
        return gpuenv_shfl(op, v, (int)a, width, GPUENV_AT, gpuenv_mask(m), true);                        \
    }
GPUENV_SHFL(__shfl, GPUENV_OP_SHFL, int)
GPUENV_SHFL(__shfl_up, GPUENV_OP_UP, unsigned)
GPUENV_SHFL(__shfl_down, GPUENV_OP_DOWN, unsigned)
GPUENV_SHFL(__shfl_xor, GPUENV_OP_XOR, int)
inline __attribute__((__always_inline__)) unsigned long long __ballot(int p, GPUENV_HERE) {
    return gpuenv_warp_op(GPUENV_OP_BALLOT, p != 0, 0, warpSize, GPUENV_AT);
}
inline __attribute__((__always_inline__)) int __any(int p, GPUENV_HERE) {
    return (int)gpuenv_warp_op(GPUENV_OP_ANY, p != 0, 0, warpSize, GPUENV_AT);
}
inline __attribute__((__always_inline__)) int __all(int p, GPUENV_HERE) {
    return (int)gpuenv_warp_op(GPUENV_OP_ALL, p != 0, 0, warpSize, GPUENV_AT);
}
inline __attribute__((__always_inline__)) unsigned long long __activemask(GPUENV_HERE) {
    return gpuenv_warp_op(GPUENV_OP_BALLOT, 1, 0, warpSize, GPUENV_AT);
}
#if GPUENV_ROCM_MASKS  // the lanes of the mask: __ballot(p) & mask, and __all/__any over it (amd_warp_sync_functions.h)
template <class M> inline __attribute__((__always_inline__)) unsigned long long __ballot_sync(M m, int p, GPUENV_HERE) {
    unsigned long long m64 = gpuenv_mask(m);
    return gpuenv_sync_op(GPUENV_OP_BALLOT, p != 0, 0, warpSize, m64, GPUENV_AT) & m64;
}
template <class M> inline __attribute__((__always_inline__)) int __any_sync(M m, int p, GPUENV_HERE) {
    return __ballot_sync(m, p, GPUENV_AT) != 0;
}
template <class M> inline __attribute__((__always_inline__)) int __all_sync(M m, int p, GPUENV_HERE) {
    return __ballot_sync(m, p, GPUENV_AT) == gpuenv_mask(m);
}
#else  // the whole wavefront, as hipify maps CUDA's
template <class M> inline __attribute__((__always_inline__)) unsigned long long __ballot_sync(M, int p, GPUENV_HERE) {
    return __ballot(p, GPUENV_AT);
}
template <class M> inline __attribute__((__always_inline__)) int __any_sync(M, int p, GPUENV_HERE) { return __any(p, GPUENV_AT); }
template <class M> inline __attribute__((__always_inline__)) int __all_sync(M, int p, GPUENV_HERE) { return __all(p, GPUENV_AT); }
#endif

// ---------------------------------------------------------------- integer intrinsics
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(unsigned long long x) { return __builtin_ffsll((long long)x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
// AMD's bit-field extract/insert (amd_device_functions.h: v_bfe_u32 semantics, offset and width mod 32/64)
inline unsigned __bitextract_u32(unsigned src0, unsigned src1, unsigned src2) {
    unsigned offset = src1 & 31, width = src2 & 31;
    if (width == 0) return 0;
    return offset + width < 32 ? (src0 << (32 - offset - width)) >> (32 - width) : src0 >> offset;
}
inline unsigned long long __bitextract_u64(unsigned long long src0, unsigned src1, unsigned src2) {
    unsigned long long offset = src1 & 63, width = src2 & 63;
    if (width == 0) return 0;
    return offset + width < 64 ? (src0 << (64 - offset - width)) >> (64 - width) : src0 >> offset;
}
inline unsigned __bitinsert_u32(unsigned src0, unsigned src1, unsigned src2, unsigned src3) {
    unsigned offset = src2 & 31, width = src3 & 31, mask = (1u << width) - 1;
    return (src0 & ~(mask << offset)) | ((src1 & mask) << offset);
}
inline unsigned long long __bitinsert_u64(unsigned long long src0, unsigned long long src1, unsigned src2,
                                          unsigned src3) {
    unsigned long long offset = src2 & 63, width = src3 & 63, mask = (1ull << width) - 1;
    return (src0 & ~(mask << offset)) | ((src1 & mask) << offset);
}
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

// ---------------------------------------------------------------- math
#define GPUENV_MINMAX(T)                                  \
    inline T min(T a, T b) { return a < b ? a : b; }      \
    inline T max(T a, T b) { return a > b ? a : b; }
GPUENV_MINMAX(int)
GPUENV_MINMAX(unsigned)
GPUENV_MINMAX(long long)
GPUENV_MINMAX(unsigned long long)
GPUENV_MINMAX(float)
GPUENV_MINMAX(double)
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __int_as_float(int x) { float f; __builtin_memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float f) { int x; __builtin_memcpy(&x, &f, 4); return x; }
inline float __uint_as_float(unsigned x) { float f; __builtin_memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned x; __builtin_memcpy(&x, &f, 4); return x; }
inline double __longlong_as_double(long long x) { double f; __builtin_memcpy(&f, &x, 8); return f; }
inline long long __double_as_longlong(double f) { long long x; __builtin_memcpy(&x, &f, 8); return x; }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
inline float __uint2float_rn(unsigned x) { return (float)x; }

// ---------------------------------------------------------------- atomics (done in the uninstrumented
// runtime: checked for bounds, exempt from race reports; compare-and-swap, as blocks may run on several OS threads)
template <class T> struct __gpuenv_id { using type = T; };
#define GPUENV_ATOMIC_RMW(name, expr)                                                             \
    template <class T> GPUENV_RT T name(T* p, typename __gpuenv_id<T>::type v) {                     \
        GPUENV_ACHECK(p);                                                                          \
        T o, n;                                                                                    \
        __atomic_load(p, &o, __ATOMIC_RELAXED); /* not hoisted out of a spin loop */               \
        do n = (expr); /* blocks may run on several OS threads: a real read-modify-write */        \
        while (!__atomic_compare_exchange(p, &o, &n, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));   \
        return o;                                                                                  \
    }                                                                                              \
    template <class T> GPUENV_RT T name##_system(T* p, typename __gpuenv_id<T>::type v) { return name(p, v); }
GPUENV_ATOMIC_RMW(atomicAdd, o + v)
GPUENV_ATOMIC_RMW(atomicSub, o - v)
GPUENV_ATOMIC_RMW(atomicExch, v)
GPUENV_ATOMIC_RMW(atomicMin, v < o ? v : o)
GPUENV_ATOMIC_RMW(atomicMax, v > o ? v : o)
GPUENV_ATOMIC_RMW(atomicAnd, o & v)
GPUENV_ATOMIC_RMW(atomicOr, o | v)
GPUENV_ATOMIC_RMW(atomicXor, o ^ v)
GPUENV_ATOMIC_RMW(atomicInc, o >= v ? 0 : o + 1)
GPUENV_ATOMIC_RMW(atomicDec, (o == 0 || o > v) ? v : o - 1)
template <class T>
GPUENV_RT T atomicCAS(T* p, typename __gpuenv_id<T>::type cmp, typename __gpuenv_id<T>::type v) {
    GPUENV_ACHECK(p);
    T o = cmp, n = v;
    __atomic_compare_exchange(p, &o, &n, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return o;
}
template <class T>
GPUENV_RT T atomicCAS_system(T* p, typename __gpuenv_id<T>::type cmp, typename __gpuenv_id<T>::type v) {
    return atomicCAS(p, cmp, v);
}

// ---------------------------------------------------------------- printf, assert, trap
#undef printf
#define printf gpuenv_printf
#define __trap() gpuenv_trap()
// glibc's assert() calls __assert_fail: the kernel module binds it here (-Wl,-Bsymbolic), so a failing
// device assert stops the launch instead of aborting the process
extern "C" inline __attribute__((__always_inline__)) void __assert_fail(const char* e, const char* f, unsigned int l, const char* fn) noexcept {
    gpuenv_assert_fail(e, f, l, fn);
}

// Names here and in the macros that expand in a kernel's file are reserved (_Call, __used__): the file's own
// macros (HeCBench romberg's #define A 0) cannot reach them.
namespace __gpuenv {
template <class... _A, size_t... _I>
__attribute__((__no_sanitize__("thread"))) inline void _Call(void (*_F)(_A...), void** _Ap, std::index_sequence<_I...>) {
    _F(*static_cast<typename std::remove_reference<_A>::type*>(_Ap[_I])...);
}
template <class... _A>
__attribute__((__no_sanitize__("thread"))) inline void _Call(void (*_F)(_A...), void** _Ap) {
    _Call(_F, _Ap, std::index_sequence_for<_A...>{});
}
// A kernel's arguments, read from the launch once per fiber rather than once per thread (each call still
// gets its own copies: parameters are by value); _Call(kernel, args) calls the kernel with them. A dispatch
// over several kernels (rtc/names.py) has no arguments of its own: its _Call() reads them. Checked and
// lockstep builds read them per thread as before (g++ inlines no instrumented kernel into the entry).
#if !GPUENV_CHECK
template <class... _A, size_t... _I>
__attribute__((__no_sanitize__("thread"))) inline auto _Args(void (*)(_A...), void** _Ap, std::index_sequence<_I...>) {
    return std::tuple<typename std::remove_cv<typename std::remove_reference<_A>::type>::type...>(
        *static_cast<typename std::remove_reference<_A>::type*>(_Ap[_I])...);
}
template <class... _A>
__attribute__((__no_sanitize__("thread"))) inline auto _Args(void (*_F)(_A...), void** _Ap) {
    return _Args(_F, _Ap, std::index_sequence_for<_A...>{});
}
#endif
template <class _D>
__attribute__((__no_sanitize__("thread"))) inline void** _Args(_D, void** _Ap) { return _Ap; }
template <class... _A, class... _V, size_t... _I>
__attribute__((__always_inline__, __no_sanitize__("thread"))) inline void _Call(void (*_F)(_A...), std::tuple<_V...>& _Vals, std::index_sequence<_I...>) {
    _F(std::get<_I>(_Vals)...);
}
template <class... _A, class... _V>
__attribute__((__always_inline__, __no_sanitize__("thread"))) inline void _Call(void (*_F)(_A...), std::tuple<_V...>& _Vals) {
    _Call(_F, _Vals, std::index_sequence_for<_A...>{});
}
// The thread after the current one starts on this fiber without a call into the executor when the current
// one is the newest thread of the block and the executor allows it (__gpuenv_state.end: unchecked launches).
// The executor counts the threads started here when it next needs its count of them (fibers.h:
// catch_up).
inline __attribute__((__always_inline__, __no_sanitize__("thread"))) bool _Next_inline() {
#if GPUENV_CHECK
    return false;
#endif
    gpuenv_state_t& _S = __gpuenv_state;
    unsigned _N = _S.lin + 1;
    if (_N >= _S.end) return false;
    _S.lin = _N;
    if (++_S.tid.x == _S.bdim.x) {
        _S.tid.x = 0;
        if (++_S.tid.y == _S.bdim.y) {
            _S.tid.y = 0;
            ++_S.tid.z;
        }
    }
    return true;
}
}  // namespace __gpuenv
#define GPUENV_ENTRY(name)                                                                                   \
    extern "C" __attribute__((__visibility__("default"), __no_sanitize__("thread"))) void __gpuenv_entry(void** __gpuenv_a) { \
        /* every thread the executor starts on this fiber, one after another (no barrier: one loop) */       \
        auto __gpuenv_v = __gpuenv::_Args(name, __gpuenv_a);                                                  \
        for (;;) {                                                                                           \
            __gpuenv::_Call(name, __gpuenv_v);                                                                \
            if (!__gpuenv::_Next_inline()) gpuenv_next_thread();                                              \
        }                                                                                                    \
    }                                                                                                        \
    extern "C" { __attribute__((__visibility__("hidden"))) gpuenv_state_t __gpuenv_state = {}; }                 \
    extern "C" __attribute__((__visibility__("default"))) gpuenv_state_t* __gpuenv_state_ptr() {                 \
        return &__gpuenv_state;                                                                              \
    }                                                                                                        \
    /* kept for loaders that call it; shared variables come from the symbol table (gpuenv_launch_t.vars) */  \
    extern "C" __attribute__((__visibility__("default"))) void __gpuenv_shared_range(char** __gpuenv_lo, char** __gpuenv_hi) {     \
        *__gpuenv_lo = *__gpuenv_hi = nullptr;                                                                                 \
    }

// the rest of ROCm's device API, each file after the amd_detail header it mirrors
#include "amd_device_functions.h"
#include "amd_warp_functions.h"
#include "amd_warp_sync_functions.h"
#include "amd_hip_atomic.h"
#include "amdgcn_builtins.h"
#include "amd_math_functions.h"
#include "amd_hip_fp16.h"
// the host runtime API, declared so that a file's host code compiles (never run: hip_runtime_api.h)
#include "hip_runtime_api.h"
