/* HIP's <hip/hip_bf16.h> on NVIDIA: CUDA's cuda_bf16.h, with HIP's names for its types (ROCm's
 * amd_hip_bf16.h functions have the same names as CUDA's: __hlt, __hmax, __float2bfloat16, ...). */
#ifndef PYTEST_GPUENV_HIP_BF16_H
#define PYTEST_GPUENV_HIP_BF16_H
#include <hip/hip_runtime.h>
#if defined(__has_include)
#if __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
#define PYTEST_GPUENV_HAVE_BF16 1
#endif
#endif
#ifndef PYTEST_GPUENV_HAVE_BF16
#error "hip/hip_bf16.h needs CUDA's cuda_bf16.h: install the CUDA toolkit headers or set CUDA_HOME"
#endif
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
#endif
