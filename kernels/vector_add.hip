// The seed's kernel: out[i] = a[i] + b[i], launched with 256-thread blocks.
#include <hip/hip_runtime.h>

extern "C" __global__ void vector_add(float* __restrict__ out, const float* __restrict__ a,
                                      const float* __restrict__ b, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        out[idx] = a[idx] + b[idx];
    }
}
