// The math API of hipcc's __clang_hip_math.h that the C library lacks, for the CPU executor (pytest-gpuenv):
// the CUDA-style functions (sinpi, erfinv, normcdf, rnorm3d, ...), the directed-rounding arithmetic
// (__fadd_rd, __dmul_ru, ...: the operation under that rounding mode) and __ldg & co. (hip_ldg.h: a plain load).
// Results are the C library's, within the few ulps that ROCm's device library documents for each.
#pragma once
#include <fenv.h>

// ---------------------------------------------------------------- loads (hip_ldg.h, amd_hip_fp16.h __ldca & co.)
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }
// clang's builtins (g++ has none): a nontemporal access is an ordinary one here; an assumption is not checked
#if !(defined(__has_builtin) && __has_builtin(__builtin_nontemporal_load))
template <class T> inline T __builtin_nontemporal_load(const T* p) { return *p; }
template <class T> inline void __builtin_nontemporal_store(T v, T* p) { *p = v; }
#endif
#if !(defined(__has_builtin) && __has_builtin(__builtin_assume))
#define __builtin_assume(...) ((void)0)
#endif

// ---------------------------------------------------------------- directed rounding
// `expr` evaluated under rounding mode `mode` (the operands are volatile: nothing is folded at compile time)
#define __gpuenv_IN_MODE(T, mode, expr)                   \
    {                                                  \
        int __gpuenv_old = fegetround();                 \
        fesetround(mode);                              \
        volatile T __gpuenv_r = (expr);                  \
        fesetround(__gpuenv_old);                        \
        return __gpuenv_r;                               \
    }
#define __gpuenv_DIRECTED(T, name, expr)                                                                              \
    inline T name##_rd(T x_, T y_) { volatile T x = x_, y = y_; __gpuenv_IN_MODE(T, FE_DOWNWARD, expr) }                \
    inline T name##_ru(T x_, T y_) { volatile T x = x_, y = y_; __gpuenv_IN_MODE(T, FE_UPWARD, expr) }                  \
    inline T name##_rz(T x_, T y_) { volatile T x = x_, y = y_; __gpuenv_IN_MODE(T, FE_TOWARDZERO, expr) }
__gpuenv_DIRECTED(float, __fadd, x + y)
__gpuenv_DIRECTED(float, __fsub, x - y)
__gpuenv_DIRECTED(float, __fmul, x * y)
__gpuenv_DIRECTED(float, __fdiv, x / y)
__gpuenv_DIRECTED(double, __dadd, x + y)
__gpuenv_DIRECTED(double, __dsub, x - y)
__gpuenv_DIRECTED(double, __dmul, x * y)
__gpuenv_DIRECTED(double, __ddiv, x / y)
#undef __gpuenv_DIRECTED
#define __gpuenv_DIRECTED1(T, name, expr)                                                                   \
    inline T name##_rd(T x_) { volatile T x = x_; __gpuenv_IN_MODE(T, FE_DOWNWARD, expr) }                    \
    inline T name##_ru(T x_) { volatile T x = x_; __gpuenv_IN_MODE(T, FE_UPWARD, expr) }                      \
    inline T name##_rz(T x_) { volatile T x = x_; __gpuenv_IN_MODE(T, FE_TOWARDZERO, expr) }
__gpuenv_DIRECTED1(float, __fsqrt, sqrtf(x))
__gpuenv_DIRECTED1(float, __frcp, 1.0f / x)
__gpuenv_DIRECTED1(double, __dsqrt, sqrt(x))
__gpuenv_DIRECTED1(double, __drcp, 1.0 / x)
#undef __gpuenv_DIRECTED1
#define __gpuenv_DIRECTED3(T, name, f)                                                                              \
    inline T name##_rd(T a_, T b_, T c_) { volatile T a = a_, b = b_, c = c_; __gpuenv_IN_MODE(T, FE_DOWNWARD, f(a, b, c)) } \
    inline T name##_ru(T a_, T b_, T c_) { volatile T a = a_, b = b_, c = c_; __gpuenv_IN_MODE(T, FE_UPWARD, f(a, b, c)) }   \
    inline T name##_rz(T a_, T b_, T c_) { volatile T a = a_, b = b_, c = c_; __gpuenv_IN_MODE(T, FE_TOWARDZERO, f(a, b, c)) }
__gpuenv_DIRECTED3(float, __fmaf, fmaf)
__gpuenv_DIRECTED3(double, __fma, fma)
#undef __gpuenv_DIRECTED3
#undef __gpuenv_IN_MODE
inline double __dsub_rn(double x, double y) { return x - y; }
inline double __ddiv_rn(double x, double y) { return x / y; }
inline double __dsqrt_rn(double x) { return sqrt(x); }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }

// ---------------------------------------------------------------- CUDA-style functions
inline float fdividef(float a, float b) { return a / b; }
inline float sinpif(float x) { return x == truncf(x) ? copysignf(0.0f, x) : (float)sin(M_PI * (double)x); }
inline double sinpi(double x) { return x == trunc(x) ? copysign(0.0, x) : sin(M_PI * x); }
inline float cospif(float x) { return fabsf(x - truncf(x)) == 0.5f ? 0.0f : (float)cos(M_PI * (double)x); }
inline double cospi(double x) { return fabs(x - trunc(x)) == 0.5 ? 0.0 : cos(M_PI * x); }
inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
inline float rhypotf(float x, float y) { return 1.0f / hypotf(x, y); }
inline double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
inline float norm3df(float a, float b, float c) { return (float)sqrt((double)a * a + (double)b * b + (double)c * c); }
inline double norm3d(double a, double b, double c) { return hypot(hypot(a, b), c); }
inline float norm4df(float a, float b, float c, float d) {
    return (float)sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d);
}
inline double norm4d(double a, double b, double c, double d) { return hypot(hypot(a, b), hypot(c, d)); }
inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
inline float normf(int n, const float* a) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * a[i];
    return (float)sqrt(s);
}
inline double norm(int n, const double* a) {
    double s = 0;
    for (int i = 0; i < n; i++) s = hypot(s, a[i]);
    return s;
}
inline float rnormf(int n, const float* a) { return 1.0f / normf(n, a); }
inline double rnorm(int n, const double* a) { return 1.0 / norm(n, a); }
inline float powif(float x, int n) { return (float)pow((double)x, n); }
inline double powi(double x, int n) { return pow(x, n); }
inline float normcdff(float x) { return (float)(0.5 * erfc(-(double)x / M_SQRT2)); }
inline double normcdf(double x) { return 0.5 * erfc(-x / M_SQRT2); }
inline float erfcxf(float x) { return (float)(exp((double)x * x) * erfc((double)x)); }
inline double erfcx(double x) {
    if (x < 25) return exp(x * x) * erfc(x);
    double r = 1 / (x * x);  // asymptotic series: exp(x^2) erfc(x) ~ 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) ...)
    return (1 - r / 2 + 3 * r * r / 4 - 15 * r * r * r / 8) / (x * 1.7724538509055160273);
}
// the inverse error function: an initial value, then Newton steps on erf
inline double erfinv(double y) {
    if (y <= -1) return y == -1 ? -HUGE_VAL : NAN;
    if (y >= 1) return y == 1 ? HUGE_VAL : NAN;
    if (y == 0) return y;
    double w = -log((1 - y) * (1 + y)), x;
    if (w < 5) {
        w -= 2.5;
        x = 2.81022636e-08;
        x = 3.43273939e-07 + x * w; x = -3.5233877e-06 + x * w; x = -4.39150654e-06 + x * w;
        x = 0.00021858087 + x * w; x = -0.00125372503 + x * w; x = -0.00417768164 + x * w;
        x = 0.246640727 + x * w; x = 1.50140941 + x * w;
    } else {
        w = sqrt(w) - 3;
        x = -0.000200214257;
        x = 0.000100950558 + x * w; x = 0.00134934322 + x * w; x = -0.00367342844 + x * w;
        x = 0.00573950773 + x * w; x = -0.0076224613 + x * w; x = 0.00943887047 + x * w;
        x = 1.00167406 + x * w; x = 2.83297682 + x * w;
    }
    x *= y;
    for (int i = 0; i < 3; i++) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
    return x;
}
inline float erfinvf(float y) { return (float)erfinv(y); }
inline double erfcinv(double y) {
    if (y > 0.0625 && y < 1.9375) return erfinv(1 - y);
    if (y <= 0 || y >= 2) return y == 0 ? HUGE_VAL : y == 2 ? -HUGE_VAL : NAN;
    double t = y < 1 ? y : 2 - y, x = erfinv(1 - t);  // a start, then Newton steps on erfc (accurate in the tail)
    for (int i = 0; i < 4; i++) x += (erfc(x) - t) / (1.1283791670955126 * exp(-x * x));
    return y < 1 ? x : -x;
}
inline float erfcinvf(float y) { return (float)erfcinv(y); }
inline double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2 * p); }
inline float normcdfinvf(float p) { return (float)normcdfinv(p); }
// modified Bessel functions of the first kind, orders 0 and 1 (power series; large |x| asymptotically)
inline double cyl_bessel_i0(double x) {
    double ax = fabs(x);
    if (ax > 30) return exp(ax) / sqrt(2 * M_PI * ax) * (1 + 1 / (8 * ax) + 9 / (128 * ax * ax));
    double s = 1, t = 1, q = x * x / 4;
    for (int k = 1; k < 200 && t > s * 1e-17; k++) { t *= q / ((double)k * k); s += t; }
    return s;
}
inline double cyl_bessel_i1(double x) {
    double ax = fabs(x);
    if (ax > 30) return copysign(exp(ax) / sqrt(2 * M_PI * ax) * (1 - 3 / (8 * ax) - 15 / (128 * ax * ax)), x);
    double t = x / 2, s = t, q = x * x / 4;
    for (int k = 1; k < 200 && fabs(t) > fabs(s) * 1e-17; k++) { t *= q / ((double)k * (k + 1)); s += t; }
    return s;
}
inline float cyl_bessel_i0f(float x) { return (float)cyl_bessel_i0(x); }
inline float cyl_bessel_i1f(float x) { return (float)cyl_bessel_i1(x); }

// ---------------------------------------------------------------- dot products (amd_math_functions.h,
// amd_hip_fp16.h: __ockl_{s,u,f}dot{2,4,8}): c plus the products of the pairs; with saturate, an integer
// result is clamped to its type's range, a float one is not changed
template <class R> inline R __gpuenv_dot_sat(long long s, bool saturate) {
    if (saturate) {
        if (s > (long long)std::numeric_limits<R>::max()) return std::numeric_limits<R>::max();
        if (s < (long long)std::numeric_limits<R>::min()) return std::numeric_limits<R>::min();
    }
    return (R)s;
}
inline int amd_mixed_dot(short2 a, short2 b, int c, bool saturate) {
    return __gpuenv_dot_sat<int>((long long)a.x * b.x + (long long)a.y * b.y + c, saturate);
}
inline unsigned amd_mixed_dot(ushort2 a, ushort2 b, unsigned c, bool saturate) {
    return __gpuenv_dot_sat<unsigned>((long long)a.x * b.x + (long long)a.y * b.y + c, saturate);
}
inline int amd_mixed_dot(char4 a, char4 b, int c, bool saturate) {
    long long s = c;
    for (int i = 0; i < 4; i++) s += (long long)(signed char)a.data[i] * (signed char)b.data[i];
    return __gpuenv_dot_sat<int>(s, saturate);
}
inline unsigned amd_mixed_dot(uchar4 a, uchar4 b, unsigned c, bool saturate) {
    long long s = c;
    for (int i = 0; i < 4; i++) s += (long long)a.data[i] * b.data[i];
    return __gpuenv_dot_sat<unsigned>(s, saturate);
}
// eight 4-bit lanes of a and b (signed for int, unsigned for uint)
inline int amd_mixed_dot(int a, int b, int c, bool saturate) {
    long long s = c;
    for (int i = 0; i < 8; i++) s += (long long)((int)((unsigned)a << (28 - 4 * i)) >> 28) * ((int)((unsigned)b << (28 - 4 * i)) >> 28);
    return __gpuenv_dot_sat<int>(s, saturate);
}
inline unsigned amd_mixed_dot(unsigned a, unsigned b, unsigned c, bool saturate) {
    long long s = c;
    for (int i = 0; i < 8; i++) s += (long long)((a >> (4 * i)) & 15) * ((b >> (4 * i)) & 15);
    return __gpuenv_dot_sat<unsigned>(s, saturate);
}
