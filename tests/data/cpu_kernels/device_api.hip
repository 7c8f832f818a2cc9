// One kernel per family of ROCm's device API (tests/cpu/test_device_api_families.py, and on an NVIDIA GPU
// tests/kernels/test_gpu_device_api.py): half, bf16, integer intrinsics, warp, atomics, math. Each writes
// field f of element i to out[f * n + i]. The fields under __HIP_PLATFORM_AMD__ use functions CUDA has no
// counterpart for: on NVIDIA they keep the value the test filled in.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>

#define OUT(f) out[(f) * n + i]

extern "C" __global__ void half_family(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half h = __float2half(a[i]), g = __float2half(b[i]);
    __half2 p = __floats2half2_rn(a[i], b[i]), q = __halves2half2(g, h);
    OUT(0) = __half2float(__hmax(h, g));
    OUT(1) = __half2float(__hmin(h, g));
    OUT(2) = __low2float(__hsub2(p, q));
    OUT(3) = __high2float(__hfma2(p, q, p));
    OUT(4) = __low2float(h2exp(__floats2half2_rn(a[i] / 8, b[i] / 8)));
    OUT(5) = __hisinf(h) ? 1.0f : 0.0f;
    OUT(6) = __half22float2(p).y;
    OUT(7) = __low2float(__float22half2_rn(make_float2(a[i] * 3, b[i])));
    OUT(8) = __hgt(h, g) ? 1.0f : 0.0f;
    OUT(9) = __high2float(__hmul2(p, q));
}

extern "C" __global__ void bf16_family(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __hip_bfloat16 h = __float2bfloat16(a[i]), g = __float2bfloat16(b[i]);
    __hip_bfloat162 p = __floats2bfloat162_rn(a[i], b[i]), q = __halves2bfloat162(g, h);
    OUT(0) = __hlt(h, g);
    OUT(1) = __hgt(h, g);
    OUT(2) = __heq(h, g);
    OUT(3) = __hge(h, g);
    OUT(4) = __hle(h, g);
    OUT(5) = __hne(h, g);
    OUT(6) = __hisinf(h) ? 1.0f : 0.0f;
    OUT(7) = __bfloat162float(__hmax(h, g));
    OUT(8) = __low2float(__hsub2(p, q));
    OUT(9) = __high2float(__hfma2(p, q, p));
}

extern "C" __global__ void int_family(unsigned long long* out, const unsigned long long* a, const unsigned long long* b,
                                      int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = (unsigned)a[i], y = (unsigned)b[i];
    OUT(0) = __byte_perm(x, y, (unsigned)(b[i] >> 32) & 0x7777u);
    OUT(1) = __brevll(a[i]);
    OUT(2) = __funnelshift_l(x, y, (unsigned)(a[i] >> 40));
    OUT(3) = __funnelshift_r(x, y, (unsigned)(a[i] >> 40));
    OUT(4) = (unsigned long long)__mul64hi((long long)a[i], (long long)b[i]);
    OUT(5) = __sad((int)x, (int)y, 7u);
    OUT(6) = (unsigned)__double2hiint((double)(long long)a[i]);
    OUT(7) = (unsigned)__double2loint((double)(long long)a[i]);
    OUT(8) = __uhadd(x, y);
    OUT(9) = (unsigned)__rhadd((int)x, (int)y);
    OUT(10) = __usad(x, y, 3u);
    OUT(11) = (unsigned)__double2int_rd((double)(int)x / 3.0);
    OUT(12) = (unsigned long long)__double2ll_ru((double)(int)y / 7.0);
#ifdef __HIP_PLATFORM_AMD__
    OUT(13) = (unsigned)__fns32(x, (unsigned)(b[i] & 31), (int)((a[i] >> 8) & 7) - 3);
    OUT(14) = __lastbit_u32_u64(a[i] & b[i]);
    OUT(15) = (unsigned)__fns64(a[i], (unsigned)(b[i] & 63), 2);
#endif
}

// a warp of values: ballots, lane masks and the exchanges, per lane
extern "C" __global__ void warp_family(unsigned long long* out, const int* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = v[i];
    OUT(0) = __match_any_sync(~0ull, x % 3);
    int pred = -1;
    OUT(1) = __match_all_sync(~0ull, x / 1000, &pred);
    OUT(2) = (unsigned)pred;
    OUT(3) = __ballot(x & 1);
    OUT(13) = (unsigned)__reduce_add_sync(~0ull, x - 2000);
    OUT(14) = __reduce_or_sync(~0ull, (unsigned)x);
    OUT(15) = __reduce_max_sync(~0ull, (unsigned)x);
#ifdef __HIP_PLATFORM_AMD__
    OUT(4) = __ballot64(x & 2);
    OUT(5) = __mbcnt_hi(~0u, __mbcnt_lo(~0u, 0));
    OUT(6) = (unsigned)__hip_ds_bpermute(((int)__lane_id() ^ 1) * 4, (unsigned)x);
    OUT(7) = (unsigned)__hip_ds_swizzle((unsigned)x, 0x041f);  // xor 1 within groups of 32
    OUT(8) = (unsigned)__builtin_amdgcn_readfirstlane(x);
    OUT(9) = (unsigned)__builtin_amdgcn_ds_swizzle(x, 0x8000 | 0x1b);  // quad permute 3,2,1,0
    OUT(10) = __lanemask_lt();
    OUT(11) = (unsigned)__hip_ds_permute(((int)__lane_id() + 1) % warpSize * 4, (unsigned)x);
    OUT(12) = (unsigned)__builtin_amdgcn_mov_dpp(x, 0x111, 0xf, 0xf, true);  // row_shr:1, 0 at a row's start
#endif
}

// atomics on one cell per 16 elements
extern "C" __global__ void atomic_family(unsigned* h2bits, float* fmin, float* fmax, unsigned* u, const float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half2* h2 = (__half2*)h2bits;
    atomicAdd(&h2[i / 16], __floats2half2_rn(1.0f, 0.5f));
#ifdef __HIP_PLATFORM_AMD__
    atomicMin(&fmin[i / 16], a[i]);
    atomicMax(&fmax[i / 16], a[i]);
    unsafeAtomicAdd(&fmin[n / 16 + i / 16], 1.0f);
    __hip_atomic_fetch_add(&u[i / 16], 2u, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

extern "C" __global__ void math_family(double* out, const double* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i];            // in (-1, 1)
    float f = (float)x;
    OUT(0) = sinpi(x);
    OUT(1) = cospif(f);
    OUT(2) = erfinv(x);
    OUT(3) = erfcinvf(f + 1.0f);
    OUT(4) = normcdf(3 * x);
    OUT(5) = normcdfinv(0.5 + x / 2.1);
    OUT(6) = rnorm3d(x, 2.0, 3.0);
    OUT(7) = rhypotf(f, 2.0f);
    OUT(8) = rcbrt(x + 2);
    OUT(9) = erfcx(4 * x);
    OUT(10) = cyl_bessel_i0(5 * x);
    OUT(11) = __fadd_rd(f, 1e-9f);
    OUT(12) = __fadd_ru(f, 1e-9f);
    OUT(13) = __dmul_rz(x, 3.0);
    OUT(14) = __double2float_ru(x / 3);
    OUT(15) = __ldg(&a[i]);
}
