// <hip/hip_runtime_api.h> for the CPU executor (pytest-gpuenv): everything is in <hip/hip_runtime.h>.
#pragma once
#include "hip_runtime.h"
