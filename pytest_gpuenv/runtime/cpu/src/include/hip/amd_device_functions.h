// The integer, conversion, clock and lane-mask functions of ROCm's amd_detail/amd_device_functions.h, for the
// CPU executor (pytest-gpuenv): included at the end of <hip/hip_runtime.h>. Each follows the ROCm header's
// definition (clr hipamd/include/hip/amd_detail/amd_device_functions.h, f9f995c6); the comments name the
// cases where it is not what the CUDA function of the same name does.
#pragma once
#include <fenv.h>
#include <time.h>  // clock(): the C library's, a timer as on the GPU (ROCm's device clock() is __clock64())

// ---------------------------------------------------------------- bits
// __fns32/__fns64: the position of the offset-th set bit of mask counting up from bit base (offset > 0),
// down from it (offset < 0), or base itself when that bit is set (offset 0); -1 when there is none
inline int32_t __gpuenv_fns(uint64_t mask, unsigned bits, uint32_t base, int32_t offset) {
    int step = offset < 0 ? -1 : 1;
    int32_t want = offset == 0 ? 1 : (offset < 0 ? -offset : offset);
    for (int b = (int)base; b >= 0 && b < (int)bits; b += step) {
        if ((mask >> b) & 1) {
            if (--want == 0) return b;
        }
        if (offset == 0) break;
    }
    return -1;
}
inline int32_t __fns64(uint64_t mask, uint32_t base, int32_t offset) { return __gpuenv_fns(mask, 64, base, offset); }
inline int32_t __fns32(uint32_t mask, uint32_t base, int32_t offset) { return __gpuenv_fns(mask, 32, base, offset); }
inline int32_t __fns(unsigned int mask, unsigned int base, int offset) { return __fns32(mask, base, offset); }
inline unsigned long long int __brevll(unsigned long long int x) {
    return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
// ROCm: input == 0 ? -1 : count of trailing zeros
inline unsigned int __lastbit_u32_u64(uint64_t x) { return x == 0 ? ~0u : (unsigned)__builtin_ctzll(x); }
// v_alignbit_b32: the low 32 bits of ({hi, lo} >> (shift & 31))
inline unsigned __gpuenv_alignbit(unsigned hi, unsigned lo, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (shift & 31));
}
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned s = shift & 31;
    return s == 0 ? hi : __gpuenv_alignbit(hi, lo, 32 - s);
}
inline unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned s = shift >= 32 ? 32 : shift;
    return s == 0 ? hi : __gpuenv_alignbit(hi, lo, 32 - s);
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
    return __gpuenv_alignbit(hi, lo, shift);
}
inline unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
    return shift >= 32 ? hi : __gpuenv_alignbit(hi, lo, shift);
}
// ROCm's __byte_perm takes selector nibbles & 7 from the bytes of {y, x} (CUDA's sign-replicate mode, bit 3
// of a nibble, is not there)
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
inline int __hadd(int x, int y) { return (int)(((long long)x + (long long)y) >> 1); }
inline int __rhadd(int x, int y) { return (int)(((long long)x + (long long)y + 1) >> 1); }
inline unsigned int __uhadd(unsigned int x, unsigned int y) {
    return (unsigned)(((unsigned long long)x + (unsigned long long)y) >> 1);
}
inline unsigned int __urhadd(unsigned int x, unsigned int y) {
    return (unsigned)(((unsigned long long)x + (unsigned long long)y + 1) >> 1);
}
inline long long int __mul64hi(long long int x, long long int y) { return (long long)(((__int128)x * y) >> 64); }
// |x - y| + z, in unsigned arithmetic
inline unsigned int __sad(int x, int y, unsigned int z) { return x > y ? (unsigned)x - (unsigned)y + z : (unsigned)y - (unsigned)x + z; }
inline unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }

// ---------------------------------------------------------------- lanes
// v_mbcnt_lo/hi: acc + the set bits of mask's low (high) 32 bits that belong to lanes below this one
inline unsigned int __mbcnt_lo(unsigned int mask, unsigned int acc) {
    unsigned lane = __lane_id();
    unsigned below = lane >= 32 ? ~0u : (1u << lane) - 1;
    return acc + (unsigned)__builtin_popcount(mask & below);
}
inline unsigned int __mbcnt_hi(unsigned int mask, unsigned int acc) {
    unsigned lane = __lane_id();
    unsigned below = lane < 32 ? 0u : (1u << (lane - 32)) - 1;
    return acc + (unsigned)__builtin_popcount(mask & below);
}
inline uint64_t __lanemask_eq() { return (uint64_t)1 << __lane_id(); }
inline uint64_t __lanemask_lt(GPUENV_HERE) {
    uint64_t active = gpuenv_warp_op(GPUENV_OP_BALLOT, 1, 0, warpSize, GPUENV_AT);
    return active & (((uint64_t)1 << __lane_id()) - 1);
}
inline uint64_t __lanemask_gt(GPUENV_HERE) {
    uint64_t active = gpuenv_warp_op(GPUENV_OP_BALLOT, 1, 0, warpSize, GPUENV_AT);
    unsigned lane = __lane_id();
    return lane == 63 ? 0 : active & (~(uint64_t)0 << (lane + 1));
}

// ---------------------------------------------------------------- conversions
// the directed roundings: the conversion under that rounding mode (ROCm: __ocml_cvtrt{n,p,z}_f32_f64)
#define __gpuenv_ROUNDED(T, mode, expr)                                        \
    ([&]() -> T {                                                              \
        int __gpuenv_old = fegetround();                                         \
        fesetround(mode);                                                      \
        volatile T __gpuenv_r = (expr);                                          \
        fesetround(__gpuenv_old);                                                \
        return __gpuenv_r;                                                       \
    }())
inline float __double2float_rn(double x) { return (float)x; }
inline float __double2float_rd(double x) { volatile double v = x; return __gpuenv_ROUNDED(float, FE_DOWNWARD, (float)v); }
inline float __double2float_ru(double x) { volatile double v = x; return __gpuenv_ROUNDED(float, FE_UPWARD, (float)v); }
inline float __double2float_rz(double x) { volatile double v = x; return __gpuenv_ROUNDED(float, FE_TOWARDZERO, (float)v); }
inline int __double2hiint(double x) { int t[2]; __builtin_memcpy(t, &x, 8); return t[1]; }
inline int __double2loint(double x) { int t[2]; __builtin_memcpy(t, &x, 8); return t[0]; }
inline double __hiloint2double(int hi, int lo) {
    unsigned long long b = ((unsigned long long)(unsigned)hi << 32) | (unsigned)lo;
    double d;
    __builtin_memcpy(&d, &b, 8);
    return d;
}
#define __gpuenv_D2I(T, name)                                                     \
    inline T __double2##name##_rd(double x) { return (T)floor(x); }               \
    inline T __double2##name##_rn(double x) { return (T)rint(x); }                \
    inline T __double2##name##_ru(double x) { return (T)ceil(x); }                \
    inline T __double2##name##_rz(double x) { return (T)x; }
#define __gpuenv_F2I(T, name)                                                     \
    inline T __float2##name##_rd(float x) { return (T)floorf(x); }                \
    inline T __float2##name##_ru(float x) { return (T)ceilf(x); }                 \
    inline T __float2##name##_rz(float x) { return (T)x; }
__gpuenv_D2I(int, int)
__gpuenv_D2I(long long int, ll)
__gpuenv_D2I(unsigned int, uint)
__gpuenv_D2I(unsigned long long int, ull)
__gpuenv_F2I(long long int, ll)
__gpuenv_F2I(unsigned int, uint)
__gpuenv_F2I(unsigned long long int, ull)
#undef __gpuenv_D2I
#undef __gpuenv_F2I
inline long long int __float2ll_rn(float x) { return (long long)rintf(x); }
inline unsigned long long int __float2ull_rn(float x) { return (unsigned long long)rintf(x); }
#define __gpuenv_I2F(T, name)                                                                                     \
    inline float __##name##2float_rn(T x) { return (float)x; }                                                   \
    inline float __##name##2float_rd(T x) { volatile T v = x; return __gpuenv_ROUNDED(float, FE_DOWNWARD, (float)v); } \
    inline float __##name##2float_ru(T x) { volatile T v = x; return __gpuenv_ROUNDED(float, FE_UPWARD, (float)v); }   \
    inline float __##name##2float_rz(T x) { volatile T v = x; return __gpuenv_ROUNDED(float, FE_TOWARDZERO, (float)v); }
__gpuenv_I2F(long long int, ll)
__gpuenv_I2F(unsigned long long int, ull)
#undef __gpuenv_I2F
// __int2float_rn and __uint2float_rn are in hip_runtime.h
inline float __int2float_rd(int x) { volatile int v = x; return __gpuenv_ROUNDED(float, FE_DOWNWARD, (float)v); }
inline float __int2float_ru(int x) { volatile int v = x; return __gpuenv_ROUNDED(float, FE_UPWARD, (float)v); }
inline float __int2float_rz(int x) { volatile int v = x; return __gpuenv_ROUNDED(float, FE_TOWARDZERO, (float)v); }
inline float __uint2float_rd(unsigned x) { volatile unsigned v = x; return __gpuenv_ROUNDED(float, FE_DOWNWARD, (float)v); }
inline float __uint2float_ru(unsigned x) { volatile unsigned v = x; return __gpuenv_ROUNDED(float, FE_UPWARD, (float)v); }
inline float __uint2float_rz(unsigned x) { volatile unsigned v = x; return __gpuenv_ROUNDED(float, FE_TOWARDZERO, (float)v); }
inline double __int2double_rn(int x) { return (double)x; }
inline double __uint2double_rn(unsigned int x) { return (double)x; }
#define __gpuenv_L2D(T, name)                                                                                      \
    inline double __##name##2double_rn(T x) { return (double)x; }                                                 \
    inline double __##name##2double_rd(T x) { volatile T v = x; return __gpuenv_ROUNDED(double, FE_DOWNWARD, (double)v); } \
    inline double __##name##2double_ru(T x) { volatile T v = x; return __gpuenv_ROUNDED(double, FE_UPWARD, (double)v); }   \
    inline double __##name##2double_rz(T x) { volatile T v = x; return __gpuenv_ROUNDED(double, FE_TOWARDZERO, (double)v); }
__gpuenv_L2D(long long int, ll)
__gpuenv_L2D(unsigned long long int, ull)
#undef __gpuenv_L2D

// packed byte arithmetic of the old HC API: bytes 0 and 2, then 1 and 3, each pair in one 32-bit operation
// (ROCm applies it to char4's .w, which is the fourth byte alone: the result keeps ROCm's behaviour)
#define __gpuenv_HC8(name, op)                                                              \
    inline char4 __hip_hc_##name##8pk(char4 a, char4 b) {                                  \
        char4 r;                                                                           \
        unsigned x = (unsigned char)a.w, y = (unsigned char)b.w;                           \
        r = a;                                                                             \
        r.w = (char)((((x & 0x00ff00ffu) op (y & 0x00ff00ffu)) & 0x00ff00ffu) |            \
                     (((x & 0xff00ff00u) op (y & 0xff00ff00u)) & 0xff00ff00u));            \
        return r;                                                                          \
    }
__gpuenv_HC8(add, +)
__gpuenv_HC8(sub, -)
__gpuenv_HC8(mul, *)
#undef __gpuenv_HC8

// ---------------------------------------------------------------- clocks
// __clock64: a cycle counter (the time-stamp counter on x86-64); wall_clock64: a constant 100 MHz clock, the
// rate hipDeviceAttributeWallClockRate reports on CDNA (100000 kHz)
inline long long int __clock64() {
#if defined(__x86_64__) || defined(__i386__)
    return (long long)__builtin_ia32_rdtsc();
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
#endif
}
inline long long int __clock() { return __clock64(); }
inline long long int clock64() { return __clock64(); }
inline long long int wall_clock64() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return ((long long)t.tv_sec * 1000000000LL + t.tv_nsec) / 10;
}
// the compute unit a wave runs on: the executor is one
inline unsigned __smid(void) { return 0; }

// ---------------------------------------------------------------- barriers (hip.amdgcn.bc: s_barrier)
inline __attribute__((__always_inline__)) void __named_sync(GPUENV_HERE) { gpuenv_sync(GPUENV_BAR_AT(GPUENV_BAR_PLAIN)); }
inline __attribute__((__always_inline__)) void __barrier(int, GPUENV_HERE) { gpuenv_sync(GPUENV_BAR_AT(GPUENV_BAR_PLAIN)); }

// ---------------------------------------------------------------- memory
inline void* __local_to_generic(void* p) { return p; }
inline void* __get_dynamicgroupbaseptr() { return __gpuenv_state.dyn_shared; }
inline void* __amdgcn_get_dynamicgroupbaseptr() { return __get_dynamicgroupbaseptr(); }
inline void* __hip_hc_memcpy(void* dst, const void* src, size_t size) { return memcpy(dst, src, size); }
inline void* __hip_hc_memset(void* dst, unsigned char val, size_t size) { return memset(dst, val, size); }
