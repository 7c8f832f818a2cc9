// <hip/hip_complex.h> for the CPU executor (pytest-gpuenv), after ROCm's amd_detail/amd_hip_complex.h:
// hipFloatComplex / hipDoubleComplex are float2 / double2 with HIP's functions (hipCaddf, hipCmulf, ...).
#pragma once
#include <math.h>

#include "hip_vector_types.h"

typedef float2 hipFloatComplex;
typedef double2 hipDoubleComplex;
typedef float2 hipComplex;

#define GPUENV_COMPLEX(T, C, s)                                                                             \
    inline C make_##C(T a, T b) { return C{a, b}; }                                                        \
    inline T hipCreal##s(C z) { return z.x; }                                                              \
    inline T hipCimag##s(C z) { return z.y; }                                                              \
    inline C hipConj##s(C z) { return C{z.x, -z.y}; }                                                      \
    inline T hipCsqabs##s(C z) { return z.x * z.x + z.y * z.y; }                                           \
    inline C hipCadd##s(C p, C q) { return C{p.x + q.x, p.y + q.y}; }                                      \
    inline C hipCsub##s(C p, C q) { return C{p.x - q.x, p.y - q.y}; }                                      \
    inline C hipCmul##s(C p, C q) { return C{p.x * q.x - p.y * q.y, p.y * q.x + p.x * q.y}; }              \
    inline C hipCdiv##s(C p, C q) {                                                                        \
        T d = hipCsqabs##s(q);                                                                             \
        return C{(p.x * q.x + p.y * q.y) / d, (p.y * q.x - p.x * q.y) / d};                                \
    }                                                                                                      \
    inline T hipCabs##s(C z) { return sqrt(hipCsqabs##s(z)); }                                             \
    inline C hipCfma##s(C p, C q, C r) {                                                                   \
        return C{p.x * q.x - p.y * q.y + r.x, p.y * q.x + p.x * q.y + r.y};                                \
    }
GPUENV_COMPLEX(float, hipFloatComplex, f)
GPUENV_COMPLEX(double, hipDoubleComplex, )
#undef GPUENV_COMPLEX

inline hipComplex make_hipComplex(float a, float b) { return hipComplex{a, b}; }
inline hipDoubleComplex hipComplexFloatToDouble(hipFloatComplex z) { return hipDoubleComplex{(double)z.x, (double)z.y}; }
inline hipFloatComplex hipComplexDoubleToFloat(hipDoubleComplex z) { return hipFloatComplex{(float)z.x, (float)z.y}; }
