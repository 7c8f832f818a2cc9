// The __half / __half2 functions of ROCm's amd_detail/amd_hip_fp16.h that hip_fp16.h lacks, for the CPU
// executor (pytest-gpuenv); __gpuenv_HALF_API also gives __hip_bfloat16 / __hip_bfloat162 theirs
// (amd_hip_bf16.h). Arithmetic is done in float and rounded once to the 16-bit type, as the GPU's 16-bit
// instructions round their exact result. Comparisons: the plain ones are ordered (false with a NaN), the
// ...u ones unordered (true with a NaN); the ...2 ones give 1.0 or 0.0 per half, the __hb...2 ones whether
// both halves hold. __hmax/__hmin ignore a NaN operand (fmaxf), the _nan ones return it.
#pragma once

template <class H> inline bool __gpuenv_hnan(H a) { return isnan((float)a); }
template <class H> inline H __gpuenv_clamp01(H a) {
    float f = (float)a;
    return H(f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f);  // a NaN stays NaN (ROCm __clamp_01: fmin(fmax(x, 0), 1) gives 0)
}

#define __gpuenv_HALF_API(H, H2)                                                                                   \
    inline H2 __gpuenv_pair(H a, H b) { H2 r; r.x = a; r.y = b; return r; }                                          \
    inline H2 __gpuenv_pairf(H, float a, float b) { return __gpuenv_pair(H(a), H(b)); }                                   \
    inline H __gpuenv_one_if(bool c, H) { return H(c ? 1.0f : 0.0f); }                                               \
    /* arithmetic */                                                                                             \
    inline H __hadd_sat(H a, H b) { return __gpuenv_clamp01(H((float)a + (float)b)); }                               \
    inline H __hsub_sat(H a, H b) { return __gpuenv_clamp01(H((float)a - (float)b)); }                               \
    inline H __hmul_sat(H a, H b) { return __gpuenv_clamp01(H((float)a * (float)b)); }                               \
    inline H __hfma_sat(H a, H b, H c) { return __gpuenv_clamp01(H(fmaf((float)a, (float)b, (float)c))); }           \
    inline H __hfma_relu(H a, H b, H c) {                                                                          \
        float f = fmaf((float)a, (float)b, (float)c);                                                              \
        return H(f < 0.0f ? 0.0f : f);                                                                             \
    }                                                                                                            \
    inline H2 __hsub2(H2 a, H2 b) { return __gpuenv_pairf(H{}, (float)a.x - (float)b.x, (float)a.y - (float)b.y); }      \
    inline H2 __h2div(H2 a, H2 b) { return __gpuenv_pairf(H{}, (float)a.x / (float)b.x, (float)a.y / (float)b.y); }      \
    inline H2 __hfma2(H2 a, H2 b, H2 c) {                                                                          \
        return __gpuenv_pairf(H{}, fmaf((float)a.x, (float)b.x, (float)c.x), fmaf((float)a.y, (float)b.y, (float)c.y));   \
    }                                                                                                            \
    inline H2 __hadd2_sat(H2 a, H2 b) { return __gpuenv_pair(__hadd_sat(a.x, b.x), __hadd_sat(a.y, b.y)); }         \
    inline H2 __hsub2_sat(H2 a, H2 b) { return __gpuenv_pair(__hsub_sat(a.x, b.x), __hsub_sat(a.y, b.y)); }         \
    inline H2 __hmul2_sat(H2 a, H2 b) { return __gpuenv_pair(__hmul_sat(a.x, b.x), __hmul_sat(a.y, b.y)); }         \
    inline H2 __hfma2_sat(H2 a, H2 b, H2 c) { return __gpuenv_pair(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y)); } \
    inline H2 __hfma2_relu(H2 a, H2 b, H2 c) { return __gpuenv_pair(__hfma_relu(a.x, b.x, c.x), __hfma_relu(a.y, b.y, c.y)); } \
    inline H2 __hneg2(H2 a) { return __gpuenv_pair(__hneg(a.x), __hneg(a.y)); }                                      \
    inline H2 __habs2(H2 a) { return __gpuenv_pair(__habs(a.x), __habs(a.y)); }                                      \
    /* max and min */                                                                                            \
    inline H __hmax(H a, H b) { return H(fmaxf((float)a, (float)b)); }                                            \
    inline H __hmin(H a, H b) { return H(fminf((float)a, (float)b)); }                                            \
    inline H __hmax_nan(H a, H b) { return __gpuenv_hnan(a) ? a : __gpuenv_hnan(b) ? b : __hmax(a, b); }              \
    inline H __hmin_nan(H a, H b) { return __gpuenv_hnan(a) ? a : __gpuenv_hnan(b) ? b : __hmin(a, b); }              \
    inline H2 __hmax2(H2 a, H2 b) { return __gpuenv_pair(__hmax(a.x, b.x), __hmax(a.y, b.y)); }                      \
    inline H2 __hmin2(H2 a, H2 b) { return __gpuenv_pair(__hmin(a.x, b.x), __hmin(a.y, b.y)); }                      \
    inline H2 __hmax2_nan(H2 a, H2 b) { return __gpuenv_pair(__hmax_nan(a.x, b.x), __hmax_nan(a.y, b.y)); }          \
    inline H2 __hmin2_nan(H2 a, H2 b) { return __gpuenv_pair(__hmin_nan(a.x, b.x), __hmin_nan(a.y, b.y)); }          \
    /* comparisons */                                                                                            \
    inline bool __hequ(H a, H b) { return !((float)a < (float)b) && !((float)a > (float)b); }                     \
    inline bool __hneu(H a, H b) { return !((float)a == (float)b); }                                              \
    inline bool __hltu(H a, H b) { return !((float)a >= (float)b); }                                              \
    inline bool __hleu(H a, H b) { return !((float)a > (float)b); }                                               \
    inline bool __hgtu(H a, H b) { return !((float)a <= (float)b); }                                              \
    inline bool __hgeu(H a, H b) { return !((float)a < (float)b); }                                               \
    __gpuenv_HALF_CMP2(H, H2, eq)                                                                                  \
    __gpuenv_HALF_CMP2(H, H2, ne)                                                                                  \
    __gpuenv_HALF_CMP2(H, H2, lt)                                                                                  \
    __gpuenv_HALF_CMP2(H, H2, le)                                                                                  \
    __gpuenv_HALF_CMP2(H, H2, gt)                                                                                  \
    __gpuenv_HALF_CMP2(H, H2, ge)                                                                                  \
    __gpuenv_HALF_CMP2(H, H2, equ)                                                                                 \
    __gpuenv_HALF_CMP2(H, H2, neu)                                                                                 \
    __gpuenv_HALF_CMP2(H, H2, ltu)                                                                                 \
    __gpuenv_HALF_CMP2(H, H2, leu)                                                                                 \
    __gpuenv_HALF_CMP2(H, H2, gtu)                                                                                 \
    __gpuenv_HALF_CMP2(H, H2, geu)                                                                                 \
    inline H2 __hisnan2(H2 a) { return __gpuenv_pair(__gpuenv_one_if(__gpuenv_hnan(a.x), a.x), __gpuenv_one_if(__gpuenv_hnan(a.y), a.y)); } \
    inline H2 __hisinf2(H2 a) { return __gpuenv_pair(__gpuenv_one_if(isinf((float)a.x), a.x), __gpuenv_one_if(isinf((float)a.y), a.y)); } \
    /* pairs */                                                                                                  \
    inline H2 __lowhigh2highlow(H2 a) { return __gpuenv_pair(a.y, a.x); }                                            \
    /* math, each half through float */                                                                          \
    __gpuenv_HALF_MATH(H, H2, ceil, ceilf)                                                                         \
    __gpuenv_HALF_MATH(H, H2, floor, floorf)                                                                       \
    __gpuenv_HALF_MATH(H, H2, trunc, truncf)                                                                       \
    __gpuenv_HALF_MATH(H, H2, rint, rintf)                                                                         \
    __gpuenv_HALF_MATH(H, H2, sin, sinf)                                                                           \
    __gpuenv_HALF_MATH(H, H2, cos, cosf)                                                                           \
    __gpuenv_HALF_MATH(H, H2, exp, expf)                                                                           \
    __gpuenv_HALF_MATH(H, H2, exp2, exp2f)                                                                         \
    __gpuenv_HALF_MATH(H, H2, exp10, __gpuenv_exp10f)                                                                \
    __gpuenv_HALF_MATH(H, H2, log, logf)                                                                           \
    __gpuenv_HALF_MATH(H, H2, log2, log2f)                                                                         \
    __gpuenv_HALF_MATH(H, H2, log10, log10f)                                                                       \
    __gpuenv_HALF_MATH(H, H2, rcp, __gpuenv_rcpf)                                                                    \
    __gpuenv_HALF_MATH(H, H2, rsqrt, rsqrtf)                                                                       \
    inline H2 h2sqrt(H2 a) { return __gpuenv_pairf(H{}, sqrtf((float)a.x), sqrtf((float)a.y)); }
// __h<op>2: 1.0 or 0.0 per half; __hb<op>2: both halves
#define __gpuenv_HALF_CMP2(H, H2, op)                                                                          \
    inline H2 __h##op##2(H2 a, H2 b) {                                                                        \
        return __gpuenv_pair(__gpuenv_one_if(__h##op(a.x, b.x), a.x), __gpuenv_one_if(__h##op(a.y, b.y), a.y));       \
    }                                                                                                        \
    inline bool __hb##op##2(H2 a, H2 b) { return __h##op(a.x, b.x) && __h##op(a.y, b.y); }
#define __gpuenv_HALF_MATH(H, H2, name, f)                                    \
    inline H h##name(H a) { return H(f((float)a)); }                        \
    inline H2 h2##name(H2 a) { return __gpuenv_pairf(H{}, f((float)a.x), f((float)a.y)); }
inline float __gpuenv_exp10f(float x) { return exp10f(x); }
inline float __gpuenv_rcpf(float x) { return 1.0f / x; }

__gpuenv_HALF_API(__half, __half2)
// amd_hip_fp16.h: __ocml_isinf_f16, true for either infinity
inline bool __hisinf(__half a) { return isinf((float)a); }

// ---------------------------------------------------------------- __half: raw types, bits, pairs
struct __half_raw {
    unsigned short x;
    operator __half() const { __half h; h.__x = x; return h; }
    __half_raw() = default;
    __half_raw(unsigned short b) : x(b) {}
    __half_raw(__half h) : x(h.__x) {}
};
struct __half2_raw {
    unsigned short x, y;
    operator __half2() const { return __half2{__half_raw(x), __half_raw(y)}; }
    __half2_raw() = default;
    __half2_raw(__half2 h) : x(h.x.__x), y(h.y.__x) {}
};
inline short __half_as_short(__half h) { return (short)h.__x; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __short_as_half(short s) { __half h; h.__x = (unsigned short)s; return h; }
inline __half __ushort_as_half(unsigned short s) { __half h; h.__x = s; return h; }
inline __half2 __half2half2(__half a) { return __half2{a, a}; }
inline __half2 __low2half2(__half2 a) { return __half2{a.x, a.x}; }
inline __half2 __high2half2(__half2 a) { return __half2{a.y, a.y}; }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2{a.x, b.x}; }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2{a.y, b.y}; }
inline __half2 make_half2(__half x, __half y) { return __half2{x, y}; }
inline float2 __half22float2(__half2 a) { return float2{(float)a.x, (float)a.y}; }
inline __half2 __float22half2_rn(float2 a) { return __half2{__half(a.x), __half(a.y)}; }

// ---------------------------------------------------------------- __half: conversions with a rounding mode
// the half next to h towards +inf (up) or -inf
inline __half __gpuenv_hstep(__half h, bool up) {
    unsigned short b = h.__x;
    if ((b & 0x7fffu) == 0) b = up ? 0x0001u : 0x8001u;
    else if (!(b & 0x8000u) == up) b = (unsigned short)(b + 1);
    else b = (unsigned short)(b - 1);
    return __ushort_as_half(b);
}
// x rounded to a half under `mode` (FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO): the nearest half,
// moved one step where it lies on the wrong side of x
inline __half __gpuenv_d2h(double x, int mode) {
    __half h = __half((float)x);
    if (isnan(x) || mode == FE_TONEAREST) return h;
    double back = (double)(float)h;
    bool down = mode == FE_DOWNWARD || (mode == FE_TOWARDZERO && x > 0);
    if (down && back > x) return __gpuenv_hstep(h, false);
    if (!down && back < x) return __gpuenv_hstep(h, true);
    return h;
}
inline __half __float2half_rd(float f) { return __gpuenv_d2h(f, FE_DOWNWARD); }
inline __half __float2half_ru(float f) { return __gpuenv_d2h(f, FE_UPWARD); }
inline __half __float2half_rz(float f) { return __gpuenv_d2h(f, FE_TOWARDZERO); }
#define __gpuenv_TO_HALF(T, name)                                                          \
    inline __half __##name##2half_rn(T i) { return __gpuenv_d2h((double)i, FE_TONEAREST); } \
    inline __half __##name##2half_rd(T i) { return __gpuenv_d2h((double)i, FE_DOWNWARD); }  \
    inline __half __##name##2half_ru(T i) { return __gpuenv_d2h((double)i, FE_UPWARD); }    \
    inline __half __##name##2half_rz(T i) { return __gpuenv_d2h((double)i, FE_TOWARDZERO); }
#define __gpuenv_FROM_HALF(T, name)                                                            \
    inline T __half2##name##_rn(__half h) { return (T)rintf((float)h); }                      \
    inline T __half2##name##_rd(__half h) { return (T)floorf((float)h); }                     \
    inline T __half2##name##_ru(__half h) { return (T)ceilf((float)h); }
__gpuenv_FROM_HALF(int, int)
__gpuenv_TO_HALF(short, short)
__gpuenv_FROM_HALF(short, short)
__gpuenv_TO_HALF(unsigned short, ushort)
__gpuenv_FROM_HALF(unsigned short, ushort)
__gpuenv_TO_HALF(unsigned int, uint)
__gpuenv_FROM_HALF(unsigned int, uint)
__gpuenv_TO_HALF(long long, ll)
__gpuenv_FROM_HALF(long long, ll)
__gpuenv_TO_HALF(unsigned long long, ull)
__gpuenv_FROM_HALF(unsigned long long, ull)
#undef __gpuenv_TO_HALF
#undef __gpuenv_FROM_HALF
inline __half __int2half_rd(int i) { return __gpuenv_d2h((double)i, FE_DOWNWARD); }
inline __half __int2half_ru(int i) { return __gpuenv_d2h((double)i, FE_UPWARD); }
inline __half __int2half_rz(int i) { return __gpuenv_d2h((double)i, FE_TOWARDZERO); }
inline short __half2short_rz(__half h) { return (short)(float)h; }
inline unsigned short __half2ushort_rz(__half h) { return (unsigned short)(float)h; }
inline unsigned int __half2uint_rz(__half h) { return (unsigned)(float)h; }
inline long long __half2ll_rz(__half h) { return (long long)(float)h; }
inline unsigned long long __half2ull_rz(__half h) { return (unsigned long long)(float)h; }

inline float amd_mixed_dot(__half2 a, __half2 b, float c, bool) {
    return (float)a.x * (float)b.x + (float)a.y * (float)b.y + c;
}

// ---------------------------------------------------------------- __half in wave operations
// ROCm has __shfl* overloads for __half and __half2 (amd_hip_fp16.h); the executor's templates take them
template <> struct __gpuenv_shfl_ok<__half> : std::true_type {};
template <> struct __gpuenv_shfl_ok<__half2> : std::true_type {};
