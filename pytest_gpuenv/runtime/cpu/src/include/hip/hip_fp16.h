// __half for the CPU executor: IEEE binary16 bits with float arithmetic (round to nearest even).
#pragma once
#include <stdint.h>

inline unsigned short gpuenv_f2h(float f) {
    uint32_t x;
    __builtin_memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int e = (int)((x >> 23) & 0xff);
    if (e == 0xff) return (unsigned short)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int exp = e - 127 + 15;
    if (exp >= 31) return (unsigned short)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (unsigned short)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp), h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (unsigned short)(sign | h);
    }
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (unsigned short)(sign | h);
}

inline float gpuenv_h2f(unsigned short h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (!mant) {
            bits = sign;
        } else {
            int e = 127 - 15 + 1;
            while (!(mant & 0x400u)) { mant <<= 1; e--; }
            bits = sign | ((uint32_t)e << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

struct __half {
    unsigned short __x;
    __half() = default;
    __half(float f) : __x(gpuenv_f2h(f)) {}
    __half(double d) : __x(gpuenv_f2h((float)d)) {}
    __half(int i) : __x(gpuenv_f2h((float)i)) {}
    operator float() const { return gpuenv_h2f(__x); }
    __half& operator+=(__half o) { return *this = __half(float(*this) + float(o)); }
    __half& operator-=(__half o) { return *this = __half(float(*this) - float(o)); }
    __half& operator*=(__half o) { return *this = __half(float(*this) * float(o)); }
    __half& operator/=(__half o) { return *this = __half(float(*this) / float(o)); }
};
typedef __half half;
struct alignas(4) __half2 {  // 4-aligned as ROCm's (a 2-wide _Float16 vector): its atomics are lock-free
    __half x, y;
};
typedef __half2 half2;

inline __half operator+(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half operator-(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half operator*(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half operator/(__half a, __half b) { return __half(float(a) / float(b)); }
inline __half operator-(__half a) { __half r; r.__x = (unsigned short)(a.__x ^ 0x8000u); return r; }
inline bool operator==(__half a, __half b) { return float(a) == float(b); }
inline bool operator!=(__half a, __half b) { return float(a) != float(b); }
inline bool operator<(__half a, __half b) { return float(a) < float(b); }
inline bool operator>(__half a, __half b) { return float(a) > float(b); }
inline bool operator<=(__half a, __half b) { return float(a) <= float(b); }
inline bool operator>=(__half a, __half b) { return float(a) >= float(b); }

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half __int2half_rn(int i) { return __half((float)i); }
inline int __half2int_rz(__half h) { return (int)float(h); }
inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hdiv(__half a, __half b) { return a / b; }
inline __half __hneg(__half a) { return -a; }
inline __half __habs(__half a) { __half r; r.__x = (unsigned short)(a.__x & 0x7fffu); return r; }
inline __half __hfma(__half a, __half b, __half c) { return __half(float(a) * float(b) + float(c)); }
inline __half hsqrt(__half a) { return __half(__builtin_sqrtf(float(a))); }
inline bool __heq(__half a, __half b) { return a == b; }
inline bool __hne(__half a, __half b) { return a != b; }
inline bool __hlt(__half a, __half b) { return a < b; }
inline bool __hle(__half a, __half b) { return a <= b; }
inline bool __hgt(__half a, __half b) { return a > b; }
inline bool __hge(__half a, __half b) { return a >= b; }
inline bool __hisnan(__half a) { return (a.__x & 0x7c00u) == 0x7c00u && (a.__x & 0x3ffu); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline float __low2float(__half2 h) { return float(h.x); }
inline float __high2float(__half2 h) { return float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{a.x + b.x, a.y + b.y}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{a.x * b.x, a.y * b.y}; }
