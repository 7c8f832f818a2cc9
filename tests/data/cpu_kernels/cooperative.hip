// Cooperative launches (tests/cpu/test_cpu_cooperative.py): grid.sync() waits for every block of the grid.
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>
namespace cg = cooperative_groups;

// each block writes its index, waits for the grid, then reads its neighbour's
extern "C" __global__ void neighbours(int* slot, int* got, int* valid) {
    __shared__ int mine[64];
    cg::grid_group grid = cg::this_grid();
    mine[threadIdx.x] = blockIdx.x * 1000 + threadIdx.x;
    if (threadIdx.x == 0) slot[blockIdx.x] = blockIdx.x + 1;
    grid.sync();
    __syncthreads();
    int n = (blockIdx.x + 1) % gridDim.x;
    got[blockIdx.x * blockDim.x + threadIdx.x] = slot[n] * 100000 + mine[(threadIdx.x + 1) % blockDim.x];
    if (threadIdx.x == 0) valid[blockIdx.x] = grid.is_valid() + 10 * cg::group_size(grid);
}

__device__ int total;

// phases: a grid-wide sum through a __device__ variable, dynamic shared memory kept across grid.sync
extern "C" __global__ void phases(int* out, int rounds) {
    extern __shared__ int dyn[];
    cg::grid_group grid = cg::this_grid();
    for (int r = 0; r < rounds; r++) {
        dyn[threadIdx.x] = blockIdx.x + r;
        if (blockIdx.x == 0 && threadIdx.x == 0) total = 0;
        grid.sync();
        atomicAdd(&total, 1);
        grid.sync();
        out[(r * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x] = total * 1000 + dyn[threadIdx.x];
        grid.sync();
    }
}

extern "C" __global__ void early(int* out) {
    if (blockIdx.x == 2) return;
    cg::this_grid().sync();
    out[blockIdx.x] = 1;
}

extern "C" __global__ void late(int* out) {
    if (blockIdx.x == 0) return;
    cg::this_grid().sync();
    out[blockIdx.x] = 1;
}

extern "C" __global__ void faulty(int* out) {
    cg::this_grid().sync();
    if (blockIdx.x == 3 && threadIdx.x == 5) out[1 << 30] = 1;
    cg::this_grid().sync();
    out[blockIdx.x] = 1;
}

extern "C" __global__ void spins(volatile int* out) {
    cg::this_grid().sync();
    if (blockIdx.x == 2) while (out[0] == 0) {}
    cg::this_grid().sync();
}

extern "C" __global__ void prints(int* out) {
    printf("block %d before\n", blockIdx.x);
    cg::this_grid().sync();
    if (threadIdx.x == 0) printf("block %d after\n", blockIdx.x);
}

extern "C" __global__ void faulty_prints(int* out) {
    if (threadIdx.x == 0) printf("block %d before\n", blockIdx.x);
    cg::this_grid().sync();
    if (blockIdx.x == 1) out[1 << 30] = 1;
    cg::this_grid().sync();
}
