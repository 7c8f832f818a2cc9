// Kernels whose reports must name the right things: both accesses of a race, an argument's elements in its
// declared type, the line of an access in a loop (tests/cpu/test_cpu_exec_report_details.py).
#include <hip/hip_runtime.h>

// hip-tests' pattern: every thread writes the same value, then a barrier (no race: the same bytes whatever the order)
extern "C" __global__ void same_value(int* out) {
    __shared__ int count;
    count = 0;
    __syncthreads();
    atomicAdd(&count, 1);
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) out[blockIdx.x] = count;
}

// the same, then one thread writes another value in the same interval: a race with the last writer
extern "C" __global__ void same_then_other(int* out, int odd) {
    __shared__ int flag;
    flag = 7;  // SEVEN
    if (threadIdx.x == odd) flag = 8;  // OTHER-VALUE
    __syncthreads();
    out[threadIdx.x] = flag;
}

extern "C" __global__ void thread_ids(int* out) {
    __shared__ int flag;
    flag = threadIdx.x;  // OWN-ID
    __syncthreads();
    out[threadIdx.x] = flag;
}

// a 16x8 block: thread (x, y) reads what thread (x, y - 1) wrote, with no barrier between
extern "C" __global__ void read_after_write(float* out) {
    __shared__ float s[8][16];
    s[threadIdx.y][threadIdx.x] = threadIdx.x;  // RAW-WRITE
    out[threadIdx.y * 16 + threadIdx.x] = s[(threadIdx.y + 7) % 8][threadIdx.x];  // RAW-READ
}

// thread t writes what thread t + 1 read before, with no barrier between
extern "C" __global__ void write_after_read(float* out) {
    __shared__ float s[256];
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    float v = s[(threadIdx.x + 1) % blockDim.x];  // WAR-READ
    s[threadIdx.x] = v + 1.0f;  // WAR-WRITE
    out[threadIdx.x] = v;
}

struct Params { float a, b; };

__device__ inline float transform(Params p, float w, float4 v) {
    return p.a * (v.x + v.y + v.z + v.w) * w + p.b;
}

// issue 41's kernel: a float4 argument read through an inlined helper, with no bounds check
extern "C" __global__ void float4_helper(float* out, const float4* in, Params p, float w) {
    __shared__ float tile[256];
    int tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
    tile[tid] = transform(p, w, in[i]);  // FLOAT4-READ
    __syncthreads();
    out[i] = tile[(tid + 1) % blockDim.x];
}

// the helper inside a loop, its result stored at the same place on every pass (out of bounds past n), its
// argument from shared memory (which the store cannot change: g++ may move the store out of the loop)
extern "C" __global__ void helper_in_loop(float* out, const float4* in, Params p, float w, int m) {
    __shared__ float4 row[4];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < 4) row[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    for (int k = 0; k < m; k++) {
        out[i] = transform(p, w, row[k % 4]);  // LOOP-STORE
    }
    for (int k = 0; k < m; k++) {  // LOOP-NEXT
        out[i] += 1.0f;
    }
}
