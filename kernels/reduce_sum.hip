// Sum of n floats: each block reduces its part with warp shuffles and adds it to *out atomically.
// Set *out to 0 before the launch. Any block size that is a multiple of warpSize, up to 1024, works;
// pass shared_mem = (blockDim.x / warpSize) * sizeof(float) bytes of dynamic shared memory
// ((blockDim.x / 32) * sizeof(float) is enough on every GPU, since warpSize is 32 or 64).
//
// Correct with warpSize 64 (AMD CDNA: gfx90a, gfx942) and 32 (NVIDIA, AMD RDNA): nothing assumes 32.
// The shuffle offsets start at warpSize / 2, and the per-warp partial sums live in dynamic shared
// memory sized by the launch, so the number of warps per block is never a compile-time constant.
#include <hip/hip_runtime.h>

__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
        v += __shfl_down(v, offset);
    }
    return v;
}

extern "C" __global__ void reduce_sum(float* __restrict__ out, const float* __restrict__ in, size_t n) {
    extern __shared__ float partial[];  // dynamic: one float per warp of this block

    const unsigned int lane = threadIdx.x % warpSize;
    const unsigned int warp = threadIdx.x / warpSize;
    const unsigned int warps = (blockDim.x + warpSize - 1) / warpSize;

    // grid-stride loop: any grid size covers any n
    float v = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        v += in[i];
    }

    v = warp_reduce_sum(v);
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();

    if (warp == 0) {
        v = (lane < warps) ? partial[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) {
            atomicAdd(out, v);
        }
    }
}
