/* <cuda_runtime_api.h> for CUDA-dialect kernels on AMD and the CPU executor (pytest-gpuenv): host API,
   absent; device code gets what cuda_runtime.h maps. */
#ifndef PYTEST_GPUENV_CUDA_RUNTIME_API_H
#define PYTEST_GPUENV_CUDA_RUNTIME_API_H
#include "cuda_runtime.h"
#endif
