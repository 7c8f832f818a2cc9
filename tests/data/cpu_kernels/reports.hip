// Kernels with bugs the CPU executor must report, with this file's line (tests/cpu/test_cpu_exec_reports.py).
#include <hip/hip_runtime.h>
#include <assert.h>

extern "C" __global__ void missing_barrier(float* out) {
    __shared__ float s[256];
    s[threadIdx.x] = threadIdx.x;
    out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];  // RACE: no __syncthreads before the read
}

#define TILE 16
extern "C" __global__ void matmul_no_second_barrier(float* C, const float* A, const float* B, int n) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        As[ty][tx] = A[row * n + t + tx];  // WAR: the next tile overwrites what others still read
        Bs[ty][tx] = B[(t + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    }
    C[row * n + col] = acc;
}

extern "C" __global__ void divergent_barrier(float* out) {
    if (threadIdx.x < 32) __syncthreads();  // DIVERGENT
    out[threadIdx.x] = 1.0f;
}

extern "C" __global__ void exited_at_barrier(float* out, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    s[threadIdx.x] = i;
    __syncthreads();  // EXITED
    out[i] = s[threadIdx.x];
}

extern "C" __global__ void if_else_barriers(float* out) {
    if (threadIdx.x % 2) {
        __syncthreads();  // IF
    } else {
        __syncthreads();  // ELSE
    }
    out[threadIdx.x] = 0.0f;
}

extern "C" __global__ void unguarded_write(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = 1.0f;  // OOB-WRITE
}

extern "C" __global__ void read_before_start(float* out, const float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i - 1];  // OOB-READ
}

// a wave64 assumption: 256 threads are 4 wavefronts of 64
extern "C" __global__ void wave64_partials(float* out, const float* in) {
    __shared__ float partial[256 / 64];
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down(v, o);
    if (threadIdx.x % warpSize == 0) partial[threadIdx.x / warpSize] = v;  // WAVE64-PARTIAL
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0] + partial[1] + partial[2] + partial[3];
}

// a wave64 assumption: the reduction starts at offset 32
extern "C" __global__ void wave64_offsets(float* out, const float* in) {
    float v = in[threadIdx.x];
    for (int o = 32; o > 0; o /= 2) v += __shfl_down(v, o);  // OFFSET32
    if (threadIdx.x == 0) out[0] = v;
}

// a wave32 assumption: a 32-bit ballot mask
extern "C" __global__ void wave32_ballot(int* count, const int* flags) {
    unsigned mask = __ballot(flags[threadIdx.x] != 0);
    if (threadIdx.x == 0) *count = __popc(mask);
}

// a wave32 assumption: only the first 32 lanes shuffle
extern "C" __global__ void wave32_lanes(float* out, const float* in) {
    float v = in[threadIdx.x];
    if (threadIdx.x % warpSize < 32) {
        for (int o = 16; o > 0; o /= 2) v += __shfl_down(v, o);  // SHFL32
    }
    if (threadIdx.x % warpSize == 0) out[threadIdx.x / warpSize] = v;
}

extern "C" __global__ void half_initialised(float* out) {
    __shared__ float s[256];
    if (threadIdx.x < 128) s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[255 - threadIdx.x];  // UNINIT
}

__device__ __noinline__ int recurse(int n) {
    volatile char pad[256];
    pad[0] = (char)n;
    return recurse(n + 1) + pad[0];  // RECURSE
}

extern "C" __global__ void unbounded_recursion(int* out) { out[0] = recurse(0); }

extern "C" __global__ void failing_assert(const int* v) {
    assert(v[threadIdx.x] >= 0);  // ASSERT
}

extern "C" __global__ void const_cast_write(const float* a) {
    ((float*)a)[threadIdx.x] = 0.0f;  // CONST-WRITE
}

extern "C" __global__ void spin_wait(int* flag) {
    if (blockIdx.x == 0) {
        while (atomicAdd(flag, 0) == 0) {  // SPIN
        }
    } else {
        atomicExch(flag, 1);
    }
}
