/* <hip/hip_runtime.h> for hiprtc, shipped by pytest-gpuenv (pytest_gpuenv/rtc/include_hiprtc).
 *
 * hiprtc pre-includes the HIP device runtime, so a kernel source needs no header; but sources written
 * for hipcc say `#include <hip/hip_runtime.h>`, and hiprtc installs without the ROCm headers (pip
 * wheels, minimal containers) cannot find it. This file takes the real header when there is one and
 * otherwise stands in for it, adding the HIP spellings some hiprtc versions lack.
 */
#ifndef PYTEST_GPUENV_HIPRTC_RUNTIME_H
#define PYTEST_GPUENV_HIPRTC_RUNTIME_H

#if defined(__has_include_next)
#if __has_include_next(<hip/hip_runtime.h>)
#include_next <hip/hip_runtime.h>
#endif
#endif

/* hiprtc before ROCm 7 declares int32_t, uint32_t, int64_t and uint64_t at global scope and in std
 * (clr hipamd/include/hip/amd_detail/amd_hip_runtime.h, under __HIPCC_RTC__); ROCm 7 keeps them in namespace
 * __hip_internal only, and published kernels use them. Repeating a typedef of the same type is allowed, so
 * these are ROCm 6's own declarations, the same types __hip_internal holds (host_defines.h). */
#if defined(__HIPCC_RTC__)
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed int int32_t;
typedef signed long long int64_t;
namespace std {
using ::uint32_t;
using ::uint64_t;
using ::int32_t;
using ::int64_t;
}
#endif

#ifndef HIP_DYNAMIC_SHARED
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#endif
#ifndef HIP_DYNAMIC_SHARED_ATTRIBUTE
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#endif
#ifndef hipThreadIdx_x
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
#endif

#endif /* PYTEST_GPUENV_HIPRTC_RUNTIME_H */
