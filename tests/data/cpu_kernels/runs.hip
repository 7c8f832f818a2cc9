// Kernels the CPU executor must run correctly at warpSize 32 and 64 (tests/cpu/test_cpu_exec.py).
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

extern "C" __global__ void grid3d(float* out, int nx, int ny, int nz) {
    for (int z = blockIdx.z * blockDim.z + threadIdx.z; z < nz; z += gridDim.z * blockDim.z)
        for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < ny; y += gridDim.y * blockDim.y)
            for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < nx; x += gridDim.x * blockDim.x)
                out[(z * ny + y) * nx + x] = x + 100.0f * y + 10000.0f * z;
}

extern "C" __global__ void block_reduce_extern(float* out, const float* in, int n) {
    extern __shared__ float sdata[];
    unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern "C" __global__ void block_reduce_macro(float* out, const float* in, int n) {
    HIP_DYNAMIC_SHARED(float, sdata)
    unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// warpSize-generic: one partial per warp, then warp 0 reduces them
extern "C" __global__ void shfl_reduce(float* out, const float* in, int n) {
    __shared__ float partial[1024 / 32];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % warpSize, w = threadIdx.x / warpSize;
    float v = i < n ? in[i] : 0.0f;
    for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down(v, o);
    if (lane == 0) partial[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < (blockDim.x + warpSize - 1) / warpSize ? partial[lane] : 0.0f;
        for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_xor(v, o);
        if (lane == 0) atomicAdd(out, v);
    }
}

extern "C" __global__ void shuffles(int* out, int width) {
    int t = threadIdx.x;
    out[4 * t + 0] = __shfl(t * 10, 3, width);
    out[4 * t + 1] = __shfl_xor(t * 10, 1, width);
    out[4 * t + 2] = __shfl_up(t * 10, 2, width);
    out[4 * t + 3] = __shfl_down(t * 10, 2, width);
}

extern "C" __global__ void votes(unsigned long long* ballots, int* anys, int* alls) {
    int t = threadIdx.x;
    unsigned long long b = __ballot(t % 3 == 0);
    int a = __any(t == 5), l = __all(t >= 0), l2 = __all(t != 7);
    if (t % warpSize == 0) {
        ballots[t / warpSize] = b;
        anys[t / warpSize] = a;
        alls[2 * (t / warpSize)] = l;
        alls[2 * (t / warpSize) + 1] = l2;
    }
}

extern "C" __global__ void histogram(int* hist, float* fhist, const int* data, int n) {
    __shared__ int local[16];
    if (threadIdx.x < 16) local[threadIdx.x] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&local[data[i] & 15], 1);
        atomicAdd(&fhist[data[i] & 15], 0.5f);
    }
    __syncthreads();
    if (threadIdx.x < 16) atomicAdd(&hist[threadIdx.x], local[threadIdx.x]);
}

__device__ float atomic_max_float(float* addr, float v) {
    int* a = (int*)addr;
    int old = *a, assumed;
    do {
        assumed = old;
        old = atomicCAS(a, assumed, __float_as_int(fmaxf(v, __int_as_float(assumed))));
    } while (assumed != old);
    return __int_as_float(old);
}

extern "C" __global__ void atomics_misc(float* fmax_out, int* imax, int* exch, unsigned* bits, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomic_max_float(fmax_out, x[i]);
        atomicMax(imax, (int)(x[i] * 1000));
        atomicExch(exch, 7);
        atomicOr(bits, 1u << (i % 32));
    }
}

extern "C" __global__ void half_scale(__half* out, const __half* in, __half s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __hmul(in[i], s) + __float2half(1.0f);
}

extern "C" __global__ void mathfns(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[6 * i + 0] = sinf(v);
        out[6 * i + 1] = expf(v);
        out[6 * i + 2] = sqrtf(v);
        out[6 * i + 3] = rsqrtf(v);
        out[6 * i + 4] = logf(v);
        out[6 * i + 5] = powf(v, 1.5f);
    }
}

__device__ int counter;
__constant__ float table[4] = {1.0f, 2.0f, 4.0f, 8.0f};

extern "C" __global__ void device_vars(float* out, int* count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = table[i % 4];
    atomicAdd(&counter, 1);
    __syncthreads();
    if (i == 0) *count = counter;
}

extern "C" __global__ void printer(int n) {
    if (threadIdx.x < n) printf("block %d thread %d\n", (int)blockIdx.x, (int)threadIdx.x);
}

extern "C" __global__ void early_return(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = 2.0f * i;
}

extern "C" __global__ void uniform_barrier(float* out, int flag) {
    __shared__ float s[256];
    s[threadIdx.x] = threadIdx.x;
    if (flag) {
        __syncthreads();
        out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
    } else {
        out[threadIdx.x] = -1.0f;
    }
}

__device__ void helper_sync() { __syncthreads(); }

extern "C" __global__ void helper_barrier(float* out) {
    __shared__ float s[256];
    s[threadIdx.x] = threadIdx.x * 2.0f;
    helper_sync();
    out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

extern "C" __global__ void odd_block(int* out) {
    __shared__ int s[48];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[47 - threadIdx.x] + 1000 * (threadIdx.x / warpSize);
}

extern "C" __global__ void big_locals(float* out) {
    float local[1024];  // 4 KiB per thread
    for (int k = 0; k < 1024; k++) local[k] = threadIdx.x + k;
    __syncthreads();
    float acc = 0.0f;
    for (int k = 0; k < 1024; k += 97) acc += local[k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void warp_size_out(int* out) { out[0] = warpSize; }
