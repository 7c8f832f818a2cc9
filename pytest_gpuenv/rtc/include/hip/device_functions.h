/* HIP's <hip/device_functions.h> on NVIDIA: the device intrinsics live in this directory's hip_runtime.h. */
#ifndef PYTEST_GPUENV_HIP_DEVICE_FUNCTIONS_H
#define PYTEST_GPUENV_HIP_DEVICE_FUNCTIONS_H
#include <hip/hip_runtime.h>
#endif
