// The seed's shared-memory tiled matrix multiply: C (M x N) = A (M x K) @ B (K x N), row-major floats.
// Launch with block (TILE_SIZE, TILE_SIZE) and grid (ceil(N / TILE_SIZE), ceil(M / TILE_SIZE)).
// Correct for any M, N, K: out-of-range tile elements load as 0 and out-of-range outputs are not
// written; every thread reaches every __syncthreads().
#include <hip/hip_runtime.h>

#ifndef TILE_SIZE
#define TILE_SIZE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE_SIZE * TILE_SIZE)
matmul_tiled(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
             int M, int N, int K) {
    __shared__ float Asile[TILE_SIZE][TILE_SIZE];
    __shared__ float Bsile[TILE_SIZE][TILE_SIZE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_SIZE + ty;
    const int col = blockIdx.x * TILE_SIZE + tx;

    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE_SIZE) {
        const int a_col = t + tx;
        const int b_row = t + ty;
        Asile[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;
        Bsile[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_SIZE; ++k) {
            acc += Asile[ty][k] * Bsile[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = acc;
    }
}
