// <hip/hip_bf16.h> for the CPU executor (pytest-gpuenv): __hip_bfloat16 (bfloat16 bits, arithmetic in
// float) with HIP's conversions: __float2bfloat16 rounds to nearest even (NaN stays NaN),
// __bfloat162float is exact; __hip_bfloat162 holds two.
#pragma once
#include <stdint.h>

#include "hip_vector_types.h"

inline unsigned short gpuenv_f2bf(float f) {
    uint32_t x;
    __builtin_memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}
inline float gpuenv_bf2f(unsigned short b) {
    uint32_t x = (uint32_t)b << 16;
    float f;
    __builtin_memcpy(&f, &x, 4);
    return f;
}

struct __hip_bfloat16 {
    unsigned short data;
    __hip_bfloat16() = default;
    __hip_bfloat16(float f) : data(gpuenv_f2bf(f)) {}
    __hip_bfloat16(double f) : data(gpuenv_f2bf((float)f)) {}
    __hip_bfloat16(int i) : data(gpuenv_f2bf((float)i)) {}
    operator float() const { return gpuenv_bf2f(data); }
    __hip_bfloat16& operator+=(__hip_bfloat16 o) { return *this = (float)*this + (float)o; }
    __hip_bfloat16& operator-=(__hip_bfloat16 o) { return *this = (float)*this - (float)o; }
    __hip_bfloat16& operator*=(__hip_bfloat16 o) { return *this = (float)*this * (float)o; }
    __hip_bfloat16& operator/=(__hip_bfloat16 o) { return *this = (float)*this / (float)o; }
};
struct alignas(4) __hip_bfloat162 {  // 4-aligned as ROCm's
    __hip_bfloat16 x, y;
};
typedef __hip_bfloat16 hip_bfloat16_t;

inline __hip_bfloat16 __float2bfloat16(float f) { return __hip_bfloat16(f); }
inline __hip_bfloat16 __float2bfloat16_rn(float f) { return __hip_bfloat16(f); }
inline __hip_bfloat16 __double2bfloat16(double d) { return __hip_bfloat16((float)d); }
inline float __bfloat162float(__hip_bfloat16 b) { return gpuenv_bf2f(b.data); }
inline __hip_bfloat16 __ushort_as_bfloat16(unsigned short u) { __hip_bfloat16 b; b.data = u; return b; }
inline unsigned short __bfloat16_as_ushort(__hip_bfloat16 b) { return b.data; }
inline __hip_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__hip_bfloat16(a), __hip_bfloat16(b)}; }
inline __hip_bfloat162 __float2bfloat162_rn(float a) { return {__hip_bfloat16(a), __hip_bfloat16(a)}; }
inline float2 __bfloat1622float2(__hip_bfloat162 v) { return float2{(float)v.x, (float)v.y}; }
inline __hip_bfloat16 __low2bfloat16(__hip_bfloat162 v) { return v.x; }
inline __hip_bfloat16 __high2bfloat16(__hip_bfloat162 v) { return v.y; }
inline __hip_bfloat16 __hadd(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a + (float)b; }
inline __hip_bfloat16 __hsub(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a - (float)b; }
inline __hip_bfloat16 __hmul(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a * (float)b; }
inline __hip_bfloat16 __hdiv(__hip_bfloat16 a, __hip_bfloat16 b) { return (float)a / (float)b; }
inline __hip_bfloat16 __hfma(__hip_bfloat16 a, __hip_bfloat16 b, __hip_bfloat16 c) { return (float)a * (float)b + (float)c; }
inline __hip_bfloat16 __hneg(__hip_bfloat16 a) { return -(float)a; }

#include "amd_hip_bf16.h"  // the rest of amd_hip_bf16.h
