/* HIP's <hip/hip_fp16.h> on NVIDIA: CUDA's cuda_fp16.h (see hip_runtime.h). */
#ifndef PYTEST_GPUENV_HIP_FP16_H
#define PYTEST_GPUENV_HIP_FP16_H
#include <hip/hip_runtime.h>
#ifndef PYTEST_GPUENV_HAVE_HALF
#error "hip/hip_fp16.h needs CUDA's cuda_fp16.h: install the CUDA toolkit headers or set CUDA_HOME"
#endif
#endif
