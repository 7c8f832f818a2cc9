// The wave functions of ROCm's amd_detail/amd_warp_sync_functions.h that <hip/hip_runtime.h> lacks, for the
// CPU executor (pytest-gpuenv): __hip_readfirstlane, __match_any / __match_all and their _sync forms (the
// result ANDed with the mask, as ROCm's are; the mask's rules are hip_runtime.h's, as for __shfl_sync).
#pragma once

// the value of the lowest active lane, any type of 8 bytes or less (ROCm: two 32-bit readfirstlanes)
template <class T> inline __attribute__((__always_inline__)) T __hip_readfirstlane(T v, GPUENV_HERE) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "__hip_readfirstlane: at most 8 bytes");
    uint64_t bits = 0;
    __builtin_memcpy(&bits, &v, sizeof(T));
    uint64_t active = __gpuenv_active(GPUENV_AT);
    bits = gpuenv_warp_op(GPUENV_OP_SHFL, bits, __builtin_ctzll(active), warpSize, GPUENV_AT);
    T r;
    __builtin_memcpy(&r, &bits, sizeof(T));
    return r;
}
template <class T> struct __gpuenv_match_ok
    : std::integral_constant<bool, (std::is_integral<T>::value || std::is_floating_point<T>::value) &&
                                       (sizeof(T) == 4 || sizeof(T) == 8)> {};
// the active lanes whose value equals this lane's
template <class T> inline __attribute__((__always_inline__)) unsigned long long __match_any(T value, GPUENV_HERE) {
    static_assert(__gpuenv_match_ok<T>::value,
                  "T can be int, unsigned int, long, unsigned long, long long, unsigned long long, float or double.");
    uint64_t active = __gpuenv_active(GPUENV_AT), r = 0;
    for (int j = 0; j < warpSize; j++)
        if ((active >> j) & 1 && __gpuenv_lane_value(value, j, GPUENV_AT) == value) r |= 1ull << j;
    return r;
}
// the active lanes when every one holds the same value (*pred = 1), else 0 (*pred = 0)
template <class T> inline __attribute__((__always_inline__)) unsigned long long __match_all(T value, int* pred, GPUENV_HERE) {
    static_assert(__gpuenv_match_ok<T>::value,
                  "T can be int, unsigned int, long, unsigned long, long long, unsigned long long, float or double.");
    T first = __hip_readfirstlane(value, GPUENV_AT);
    if (__all(first == value, GPUENV_AT)) {
        *pred = 1;
        return __gpuenv_active(GPUENV_AT);
    }
    *pred = 0;
    return 0;
}
template <class M, class T> inline __attribute__((__always_inline__)) unsigned long long __match_any_sync(M mask, T value, GPUENV_HERE) {
    return __match_any(value, GPUENV_AT) & (unsigned long long)mask;
}
template <class M, class T>
inline __attribute__((__always_inline__)) unsigned long long __match_all_sync(M mask, T value, int* pred, GPUENV_HERE) {
    return __match_all(value, pred, GPUENV_AT) & (unsigned long long)mask;
}

// __reduce_<op>_sync (ROCm 7's amd_warp_sync_functions.h, CUDA's sm_80 functions): op over the values of the
// lanes in mask, every lane of the mask gets the result. and/or/xor are bitwise, as ROCm's wave-reduce path
// (__ockl_wfred_*) and CUDA compute them; add/min/max in lane order. long long, unsigned long long, float and
// double take HIP_ENABLE_EXTRA_WARP_SYNC_TYPES, as on ROCm.
template <class M, class T, class Op>
inline __attribute__((__always_inline__)) T __gpuenv_reduce(M mask, T v, Op op, const char* file, int where) {
    uint64_t lanes = __gpuenv_active(file, where) & (uint64_t)mask;
    bool first = true;
    T r = v;
    for (int j = 0; j < warpSize; j++) {
        if (!((lanes >> j) & 1)) continue;
        T x = __gpuenv_lane_value(v, j, file, where);
        r = first ? x : op(r, x);
        first = false;
    }
    return r;
}
#define __gpuenv_REDUCE(name, T, expr)                                                                  \
    template <class M> inline __attribute__((__always_inline__)) T name(M mask, T v, GPUENV_HERE) {          \
        return __gpuenv_reduce(mask, v, [](T a, T b) -> T { return (expr); }, GPUENV_AT);                 \
    }
#define __gpuenv_REDUCE_ARITH(T)                                    \
    __gpuenv_REDUCE(__reduce_add_sync, T, a + b)                    \
    __gpuenv_REDUCE(__reduce_min_sync, T, b < a ? b : a)            \
    __gpuenv_REDUCE(__reduce_max_sync, T, a < b ? b : a)
#define __gpuenv_REDUCE_BITS(T)                                     \
    __gpuenv_REDUCE(__reduce_and_sync, T, a & b)                    \
    __gpuenv_REDUCE(__reduce_or_sync, T, a | b)                     \
    __gpuenv_REDUCE(__reduce_xor_sync, T, a ^ b)
__gpuenv_REDUCE_ARITH(int)
__gpuenv_REDUCE_ARITH(unsigned int)
__gpuenv_REDUCE_BITS(unsigned int)
#ifdef HIP_ENABLE_EXTRA_WARP_SYNC_TYPES
__gpuenv_REDUCE_ARITH(long long)
__gpuenv_REDUCE_ARITH(unsigned long long)
__gpuenv_REDUCE_ARITH(float)
__gpuenv_REDUCE_ARITH(double)
__gpuenv_REDUCE_BITS(int)
__gpuenv_REDUCE_BITS(long long)
__gpuenv_REDUCE_BITS(unsigned long long)
#endif
#undef __gpuenv_REDUCE
#undef __gpuenv_REDUCE_ARITH
#undef __gpuenv_REDUCE_BITS
