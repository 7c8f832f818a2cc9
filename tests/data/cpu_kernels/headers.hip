// What hipcc compiles for AMD, on the CPU executor (tests/cpu/test_cpu_exec_headers.py): its macros, the
// HIP headers published code includes (each must be the executor's, not the system ROCm's), vector
// types, bfloat16, cooperative groups, __syncthreads_count/_and/_or and builtins that are not macros.
#if !defined(__HIP_PLATFORM_AMD__) || !defined(__HIPCC__) || !defined(__HIP__) || !defined(__AMDGCN_WAVEFRONT_SIZE)
#error "hipcc's macros are missing"
#endif
#define __HIP_PLATFORM_AMD__  // as code written for hipcc may: the same (empty) definition, no warning
#include <hip/hip_runtime.h>
#include <hip/hip_runtime_api.h>
#include <hip/device_functions.h>
#include <hip/hip_vector_types.h>
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_cooperative_groups.h>

namespace cg = cooperative_groups;

extern "C" __global__ void macros(int* out) {
    out[0] = __AMDGCN_WAVEFRONT_SIZE;
    out[1] = warpSize;
#ifdef __HIP_PLATFORM_AMD__
    out[2] = 1;
#endif
#ifdef __HIP_PLATFORM_NVIDIA__
    out[2] = 2;
#endif
}

extern "C" __global__ void vector_types(float* f, int* i) {
    float4 a = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    float4 b(2.0f);  // broadcast
    a = a * b + 1.0f;
    a -= make_float4(0.5f, 0.5f, 0.5f, 0.5f);
    float3 c = make_float3(a.x, a.y, a.z);
    c += c;
    float2 d = make_float2(c.z, -c.x);
    f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w; f[4] = c.x; f[5] = d.x; f[6] = d.y;
    int2 p = make_int2(7, 9);
    p = p % 4 + int2(1);
    uint4 u = make_uint4(1u, 2u, 4u, 8u);
    u = (u << 1u) | 1u;
    uchar4 q = make_uchar4(250, 1, 2, 3);
    q += uchar4(10);  // wraps as unsigned char
    i[0] = p.x; i[1] = p.y; i[2] = (int)u.w; i[3] = q.x; i[4] = q.w;
    i[5] = (int)sizeof(float3); i[6] = (int)alignof(float3); i[7] = (int)sizeof(float4); i[8] = (int)alignof(float4);
    i[9] = (int)sizeof(double4); i[10] = (int)alignof(double4); i[11] = (int)sizeof(char3); i[12] = (int)alignof(short2);
    i[13] = a == a && !(a != a) && (make_int2(1, 2) != make_int2(1, 3));
    float4* as4 = reinterpret_cast<float4*>(f + 8);  // a float4* view of a float buffer
    as4[0] = make_float4(9.0f, 8.0f, 7.0f, 6.0f);
}

extern "C" __global__ void builtins_are_objects(int* out, int blockIdx) {
    int threadIdx = 5;  // a local named like a builtin
    out[::threadIdx.x] = blockIdx + threadIdx + (int)::blockIdx.x + (int)gridDim.x * 100;
    dim3 t = ::threadIdx;
    (void)t;
}

extern "C" __global__ void sync_reductions(int* out, const int* pred) {
    int p = pred[threadIdx.x];
    int n = __syncthreads_count(p);
    int all = __syncthreads_and(p);
    int any = __syncthreads_or(p);
    if (threadIdx.x == 0) {
        out[0] = n;
        out[1] = all;
        out[2] = any;
    }
}

extern "C" __global__ void bf16_round_trip(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __hip_bfloat16 b = __float2bfloat16(in[i]);
    out[i] = __bfloat162float(b);
    out[n + i] = __bfloat162float(__hmul(b, __float2bfloat16(2.0f)));
}

// a block sum: 16-lane tiles reduce with shfl_down, tile leaders meet in shared memory
extern "C" __global__ void cg_block_sum(float* out, const float* in) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    __shared__ float partial[64];
    float v = in[block.group_index().x * block.size() + block.thread_rank()];
    for (unsigned off = tile.size() / 2; off > 0; off /= 2) v += tile.shfl_down(v, off);
    if (tile.thread_rank() == 0) partial[tile.meta_group_rank()] = v;
    block.sync();
    if (block.thread_rank() == 0) {
        float s = 0.0f;
        for (unsigned t = 0; t < tile.meta_group_size(); t++) s += partial[t];
        out[block.group_index().x] = s;
    }
}

extern "C" __global__ void cg_tile_votes(unsigned long long* ballots, int* votes, int* misc) {
    cg::thread_block block = cg::this_thread_block();
    auto tile = cg::tiled_partition<8>(block);
    unsigned r = block.thread_rank();
    unsigned long long b = tile.ballot(r % 3 == 0);
    int any = tile.any(r == 5);
    int all = tile.all(r < 60);
    int x = tile.shfl_xor((int)r, 1);
    int src = tile.shfl((int)r, 7);
    if (tile.thread_rank() == 0) {
        ballots[tile.meta_group_rank()] = b;
        votes[2 * tile.meta_group_rank()] = any;
        votes[2 * tile.meta_group_rank() + 1] = all;
    }
    misc[2 * r] = x;
    misc[2 * r + 1] = src;
    cg::thread_group dyn = cg::tiled_partition(block, 4);
    dyn.sync();
    if (r == 0) misc[128] = (int)dyn.size();
}

extern "C" __global__ void cg_coalesced(int* out) {
    unsigned r = threadIdx.x;
    if (r % 2 == 1) {  // the odd lanes
        cg::coalesced_group odd = cg::coalesced_threads();
        int prev = odd.shfl_up((int)r, 1);
        out[r] = (int)(odd.size() * 1000 + odd.thread_rank() * 10) + (prev != (int)r);
    }
}

extern "C" __global__ void cg_grid(int* out) {
    cg::grid_group grid = cg::this_grid();
    out[grid.thread_rank()] = (int)grid.size() + 1000 * grid.is_valid();
}

extern "C" __global__ void cg_grid_sync(int* out) {
    cg::grid_group grid = cg::this_grid();
    out[grid.thread_rank()] = 1;
    grid.sync();  // GRID-SYNC
}

#include <hip/hip_complex.h>
extern "C" __global__ void complex_ops(float* out) {
    hipFloatComplex a = make_hipFloatComplex(1.0f, 2.0f), b = make_hipFloatComplex(3.0f, -1.0f);
    hipFloatComplex m = hipCmulf(a, b), d = hipCdivf(m, b), s = hipCaddf(a, hipConjf(b));
    out[0] = hipCrealf(m); out[1] = hipCimagf(m); out[2] = hipCrealf(d); out[3] = hipCimagf(d);
    out[4] = s.x; out[5] = s.y; out[6] = hipCabsf(make_hipFloatComplex(3.0f, 4.0f));
    hipDoubleComplex z = hipComplexFloatToDouble(a);
    out[7] = (float)hipCreal(hipCmul(z, z));
}
