/* <device_launch_parameters.h> for CUDA-dialect kernels on AMD and the CPU executor (pytest-gpuenv):
   threadIdx, blockIdx, blockDim, gridDim and warpSize come with HIP's runtime header. */
#ifndef PYTEST_GPUENV_DEVICE_LAUNCH_PARAMETERS_H
#define PYTEST_GPUENV_DEVICE_LAUNCH_PARAMETERS_H
#include "cuda_runtime.h"
#endif
