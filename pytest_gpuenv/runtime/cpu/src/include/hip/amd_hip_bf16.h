// The __hip_bfloat16 / __hip_bfloat162 functions of ROCm's amd_detail/amd_hip_bf16.h that hip_bf16.h lacks,
// for the CPU executor (pytest-gpuenv): included at the end of <hip/hip_bf16.h>. Arithmetic in float,
// rounded once to bfloat16 (round to nearest even), as ROCm's header does it.
#pragma once
#include "hip_runtime.h"

struct __hip_bfloat16_raw {
    unsigned short x;
    __hip_bfloat16_raw() = default;
    __hip_bfloat16_raw(unsigned short b) : x(b) {}
    __hip_bfloat16_raw(__hip_bfloat16 h) : x(h.data) {}
    operator __hip_bfloat16() const { return __ushort_as_bfloat16(x); }
};
struct __hip_bfloat162_raw {
    unsigned short x, y;
    __hip_bfloat162_raw() = default;
    __hip_bfloat162_raw(__hip_bfloat162 h) : x(h.x.data), y(h.y.data) {}
    operator __hip_bfloat162() const { return {__ushort_as_bfloat16(x), __ushort_as_bfloat16(y)}; }
};

// comparisons (amd_hip_bf16.h: in float; ordered, false with a NaN)
inline bool __heq(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a == (float)b; }
inline bool __hne(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a != (float)b; }
inline bool __hlt(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a < (float)b; }
inline bool __hle(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a <= (float)b; }
inline bool __hgt(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a > (float)b; }
inline bool __hge(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a >= (float)b; }
inline bool __hisnan(__hip_bfloat16 a) { return (a.data & 0x7fffu) > 0x7f80u; }
// amd_hip_bf16.h: `!(~x & 0x7f80) && !(x & 0x7f)`, 1 for either infinity
inline int __hisinf(__hip_bfloat16 a) { return (a.data & 0x7fffu) == 0x7f80u; }
inline __hip_bfloat16 __habs(__hip_bfloat16 a) { return __ushort_as_bfloat16((unsigned short)(a.data & 0x7fffu)); }
inline __hip_bfloat162 __hadd2(__hip_bfloat162 a, __hip_bfloat162 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
inline __hip_bfloat162 __hmul2(__hip_bfloat162 a, __hip_bfloat162 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }

__gpuenv_HALF_API(__hip_bfloat16, __hip_bfloat162)

// bits and pairs
inline short __bfloat16_as_short(__hip_bfloat16 b) { return (short)b.data; }
inline __hip_bfloat16 __short_as_bfloat16(short s) { return __ushort_as_bfloat16((unsigned short)s); }
inline __hip_bfloat162 __bfloat162bfloat162(__hip_bfloat16 a) { return {a, a}; }
inline __hip_bfloat162 __halves2bfloat162(__hip_bfloat16 a, __hip_bfloat16 b) { return {a, b}; }
inline __hip_bfloat162 __low2bfloat162(__hip_bfloat162 a) { return {a.x, a.x}; }
inline __hip_bfloat162 __high2bfloat162(__hip_bfloat162 a) { return {a.y, a.y}; }
inline __hip_bfloat162 __lows2bfloat162(__hip_bfloat162 a, __hip_bfloat162 b) { return {a.x, b.x}; }
inline __hip_bfloat162 __highs2bfloat162(__hip_bfloat162 a, __hip_bfloat162 b) { return {a.y, b.y}; }
inline __hip_bfloat162 __float22bfloat162_rn(float2 a) { return {__hip_bfloat16(a.x), __hip_bfloat16(a.y)}; }
inline float __low2float(__hip_bfloat162 a) { return (float)a.x; }
inline float __high2float(__hip_bfloat162 a) { return (float)a.y; }

// atomics (a compare-and-swap of the whole value, as hip_runtime.h's)
GPUENV_RT __hip_bfloat16 atomicAdd(__hip_bfloat16* p, __hip_bfloat16 v) { __gpuenv_RMW(__hip_bfloat16, p, __hadd(o, v)) }
GPUENV_RT __hip_bfloat162 atomicAdd(__hip_bfloat162* p, __hip_bfloat162 v) { __gpuenv_RMW(__hip_bfloat162, p, __hadd2(o, v)) }
GPUENV_RT __hip_bfloat162 unsafeAtomicAdd(__hip_bfloat162* p, __hip_bfloat162 v) { __gpuenv_RMW(__hip_bfloat162, p, __hadd2(o, v)) }

// ROCm's __hip_bfloat16 converts to float, so __shfl takes it (as a float); here it keeps its type
template <> struct __gpuenv_shfl_ok<__hip_bfloat16> : std::true_type {};
