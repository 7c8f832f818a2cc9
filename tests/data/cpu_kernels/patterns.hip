// Correct kernels in the patterns of published HIP code that the CPU executor once reported falsely
// (tests/cpu/test_cpu_exec_patterns.py), written for the tests after rocm-examples and HIP-Examples.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

// __shared__ in a template (rocm-examples matrix_transpose, tiled matmul): a COMDAT static local
template <int TILE>
__device__ void transpose_tile(float* out, const float* in, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}
extern "C" __global__ void transpose8(float* out, const float* in, int n) { transpose_tile<8>(out, in, n); }
extern "C" __global__ void transpose16(float* out, const float* in, int n) { transpose_tile<16>(out, in, n); }

template <int N>
__device__ void overflow_tile(float* out) {
    __shared__ float tile[N];
    tile[threadIdx.x] = 1.0f;  // TEMPLATE-OOB: N elements, blockDim.x threads
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x];
}
extern "C" __global__ void template_overflow(float* out) { overflow_tile<32>(out); }

// __shared__ in an inline __device__ helper (rocm-examples moving average)
inline __device__ float block_window_sum(float v, int radius) {
    __shared__ float window[256];
    window[threadIdx.x] = v;
    __syncthreads();
    float s = 0.0f;
    for (int d = -radius; d <= radius; d++) {
        int j = (int)threadIdx.x + d;
        if (j >= 0 && j < (int)blockDim.x) s += window[j];
    }
    __syncthreads();
    return s;
}
extern "C" __global__ void moving_sum(float* out, const float* in, int radius) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = block_window_sum(in[i], radius) + block_window_sum(1.0f, 0);
}

// __shared__ at namespace scope
__shared__ int counts[64];
extern "C" __global__ void namespace_shared(int* out) {
    counts[threadIdx.x] = threadIdx.x * 2;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = counts[blockDim.x - 1 - threadIdx.x];
}

// one __syncthreads() the compiler duplicates at -O2 (rocm-examples reduction v7/v8/v9 unrolled steps)
template <unsigned B>
__device__ void unrolled_steps(float* s, unsigned tid) {
    if (B >= 256) { if (tid < 128) s[tid] += s[tid + 128]; __syncthreads(); }
    if (B >= 128) { if (tid < 64) s[tid] += s[tid + 64]; __syncthreads(); }
    if (B >= 64) { if (tid < 32) s[tid] += s[tid + 32]; __syncthreads(); }
    if (B >= 32) { if (tid < 16) s[tid] += s[tid + 16]; __syncthreads(); }
    if (B >= 16) { if (tid < 8) s[tid] += s[tid + 8]; __syncthreads(); }
    if (B >= 8) { if (tid < 4) s[tid] += s[tid + 4]; __syncthreads(); }
    if (B >= 4) { if (tid < 2) s[tid] += s[tid + 2]; __syncthreads(); }
    if (B >= 2) { if (tid < 1) s[tid] += s[tid + 1]; __syncthreads(); }
}
extern "C" __global__ void unrolled_reduce(float* out, const float* in) {
    __shared__ float s[256];
    unsigned tid = threadIdx.x;
    s[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    unrolled_steps<256>(s, tid);
    if (tid == 0) out[blockIdx.x] = s[0];
}

// per-thread bytes of shared memory (rocm-examples / HIP-Examples histogram: private 8-bit bins)
extern "C" __global__ void byte_bins(unsigned* out, const unsigned char* data, int per_thread) {
    __shared__ unsigned char bins[4][256];  // bins[b][t]: thread t's count of value b
    unsigned t = threadIdx.x;
    for (int b = 0; b < 4; b++) bins[b][t] = 0;
    const unsigned char* mine = data + (blockIdx.x * blockDim.x + t) * per_thread;
    for (int k = 0; k < per_thread; k++) bins[mine[k] & 3][t]++;
    __syncthreads();
    if (t < 4) {
        unsigned sum = 0;
        for (unsigned j = 0; j < blockDim.x; j++) sum += bins[t][j];
        atomicAdd(&out[t], sum);
    }
}

// per-thread short and __half counters, each updated by its own thread (HIP-Examples Histogram style)
extern "C" __global__ void narrow_bins(float* out, const unsigned char* data, int per_thread) {
    __shared__ short s16[2][256];
    __shared__ __half h16[2][256];
    unsigned t = threadIdx.x;
    for (int b = 0; b < 2; b++) {
        s16[b][t] = 0;
        h16[b][t] = __float2half(0.0f);
    }
    const unsigned char* mine = data + t * per_thread;
    for (int k = 0; k < per_thread; k++) {
        int b = mine[k] & 1;
        s16[b][t] += 1;
        h16[b][t] = __float2half(__half2float(h16[b][t]) + 0.5f);
    }
    __syncthreads();
    if (t < 2) {
        float n = 0.0f, h = 0.0f;
        for (unsigned j = 0; j < blockDim.x; j++) {
            n += s16[t][j];
            h += __half2float(h16[t][j]);
        }
        out[2 * t] = n;
        out[2 * t + 1] = h;
    }
}

// the last wave reduces through volatile shared memory without barriers (rocm-examples reduction v5):
// correct on AMD hardware, where a wavefront runs in lockstep
__device__ void warp_reduce(volatile float* s, unsigned tid) {
    s[tid] += s[tid + 32];  // LOCKSTEP
    s[tid] += s[tid + 16];
    s[tid] += s[tid + 8];
    s[tid] += s[tid + 4];
    s[tid] += s[tid + 2];
    s[tid] += s[tid + 1];
}
extern "C" __global__ void reduce_v5(float* out, const float* in) {
    __shared__ float s[256];
    unsigned tid = threadIdx.x;
    s[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 32; k >>= 1) {
        if (tid < k) s[tid] += s[tid + k];
        __syncthreads();
    }
    if (tid < 32) warp_reduce(s, tid);
    if (tid == 0) out[blockIdx.x] = s[0];
}
