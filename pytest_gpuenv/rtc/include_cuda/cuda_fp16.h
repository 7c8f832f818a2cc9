/* <cuda_fp16.h> for CUDA-dialect kernels on AMD and the CPU executor (pytest-gpuenv): HIP's __half,
   __half2 and their intrinsics (hip_fp16.h spells them as CUDA does). */
#ifndef PYTEST_GPUENV_CUDA_FP16_H
#define PYTEST_GPUENV_CUDA_FP16_H
#include "cuda_runtime.h"
#include <hip/hip_fp16.h>
#endif
