/* <cuda.h> for CUDA-dialect kernels on AMD and the CPU executor (pytest-gpuenv): the driver API is host
   code, absent here; device code gets what cuda_runtime.h maps. */
#ifndef PYTEST_GPUENV_CUDA_H
#define PYTEST_GPUENV_CUDA_H
#include "cuda_runtime.h"
#endif
