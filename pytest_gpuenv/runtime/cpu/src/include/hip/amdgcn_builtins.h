// The __builtin_amdgcn_* that ROCm's headers and published HIP code call, for the CPU executor
// (pytest-gpuenv): clang provides them when it compiles for an AMD GPU; here each is a function with the
// builtin's signature (clang's BuiltinsAMDGPU.def) made of the executor's warp operations and the functions
// of <hip/hip_runtime.h>. Wave builtins report an inactive source lane as __shfl does.
#pragma once

inline __attribute__((__always_inline__)) int __builtin_amdgcn_readfirstlane(int v, GPUENV_HERE) {
    uint64_t active = __gpuenv_active(GPUENV_AT);
    return __gpuenv_lane_value(v, __builtin_ctzll(active), GPUENV_AT);
}
inline __attribute__((__always_inline__)) int __builtin_amdgcn_readlane(int v, int lane, GPUENV_HERE) {
    return __gpuenv_lane_value(v, lane & (warpSize - 1), GPUENV_AT);
}
inline unsigned int __builtin_amdgcn_mbcnt_lo(unsigned int mask, unsigned int acc) { return __mbcnt_lo(mask, acc); }
inline unsigned int __builtin_amdgcn_mbcnt_hi(unsigned int mask, unsigned int acc) { return __mbcnt_hi(mask, acc); }
inline __attribute__((__always_inline__)) int __builtin_amdgcn_ds_bpermute(int index, int src, GPUENV_HERE) {
    return __gpuenv_ds_bpermute(index, src, GPUENV_AT);
}
inline __attribute__((__always_inline__)) int __builtin_amdgcn_ds_permute(int index, int src, GPUENV_HERE) {
    return __gpuenv_ds_permute(index, src, GPUENV_AT);
}
inline __attribute__((__always_inline__)) int __builtin_amdgcn_ds_swizzle(int src, int pattern, GPUENV_HERE) {
    return __gpuenv_ds_swizzle(src, pattern, GPUENV_AT);
}
inline __attribute__((__always_inline__)) int __builtin_amdgcn_update_dpp(int old, int src, int ctrl, int row_mask, int bank_mask,
                                                                      bool bound_ctrl, GPUENV_HERE) {
    return __gpuenv_update_dpp(old, src, ctrl, row_mask, bank_mask, bound_ctrl, GPUENV_AT);
}
inline __attribute__((__always_inline__)) int __builtin_amdgcn_mov_dpp(int src, int ctrl, int row_mask, int bank_mask,
                                                                   bool bound_ctrl, GPUENV_HERE) {
    return __gpuenv_update_dpp(src, src, ctrl, row_mask, bank_mask, bound_ctrl, GPUENV_AT);
}
// the active lanes (the exec mask)
inline __attribute__((__always_inline__)) uint64_t __builtin_amdgcn_read_exec(GPUENV_HERE) { return __gpuenv_active(GPUENV_AT); }
inline __attribute__((__always_inline__)) unsigned __builtin_amdgcn_read_exec_lo(GPUENV_HERE) {
    return (unsigned)__gpuenv_active(GPUENV_AT);
}
inline __attribute__((__always_inline__)) unsigned __builtin_amdgcn_read_exec_hi(GPUENV_HERE) {
    return (unsigned)(__gpuenv_active(GPUENV_AT) >> 32);
}
inline __attribute__((__always_inline__)) uint64_t __builtin_amdgcn_ballot_w64(bool p, GPUENV_HERE) { return __ballot(p, GPUENV_AT); }
inline __attribute__((__always_inline__)) unsigned __builtin_amdgcn_ballot_w32(bool p, GPUENV_HERE) {
    return (unsigned)__ballot(p, GPUENV_AT);
}
// the ballot of an integer comparison; cmp is LLVM's ICmp predicate (32 eq, 33 ne, 34 ugt, 35 uge, 36 ult,
// 37 ule, 38 sgt, 39 sge, 40 slt, 41 sle), as amd_warp_functions.h passes it (__ballot: ICMP_NE)
template <class U, class S>
inline bool __gpuenv_icmp(U a, U b, int cmp) {
    switch (cmp) {
        case 32: return a == b;
        case 33: return a != b;
        case 34: return a > b;
        case 35: return a >= b;
        case 36: return a < b;
        case 37: return a <= b;
        case 38: return (S)a > (S)b;
        case 39: return (S)a >= (S)b;
        case 40: return (S)a < (S)b;
        case 41: return (S)a <= (S)b;
    }
    return false;
}
inline __attribute__((__always_inline__)) uint64_t __builtin_amdgcn_uicmp(unsigned a, unsigned b, int cmp, GPUENV_HERE) {
    return __ballot(__gpuenv_icmp<unsigned, int>(a, b, cmp), GPUENV_AT);
}
inline __attribute__((__always_inline__)) uint64_t __builtin_amdgcn_uicmpl(uint64_t a, uint64_t b, int cmp, GPUENV_HERE) {
    return __ballot(__gpuenv_icmp<uint64_t, int64_t>(a, b, cmp), GPUENV_AT);
}
inline __attribute__((__always_inline__)) void __builtin_amdgcn_s_barrier(GPUENV_HERE) { gpuenv_sync(GPUENV_BAR_AT(GPUENV_BAR_PLAIN)); }
// a wave's lanes meet (the executor's __syncwarp)
inline __attribute__((__always_inline__)) void __builtin_amdgcn_wave_barrier(GPUENV_HERE) {
    gpuenv_warp_op(GPUENV_OP_SYNCWARP, 0, 0, warpSize, GPUENV_AT);
}
inline void __builtin_amdgcn_fence(int, const char*, ...) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __builtin_amdgcn_s_sleep(int) {}
inline void __builtin_amdgcn_s_setprio(short) {}
inline void __builtin_amdgcn_s_waitcnt(int) {}
inline void __builtin_amdgcn_sched_barrier(int) {}
inline uint64_t __builtin_amdgcn_s_memtime() { return (uint64_t)__clock64(); }
inline uint64_t __builtin_amdgcn_s_memrealtime() { return (uint64_t)wall_clock64(); }
inline unsigned __builtin_amdgcn_workitem_id_x() { return threadIdx.x; }
inline unsigned __builtin_amdgcn_workitem_id_y() { return threadIdx.y; }
inline unsigned __builtin_amdgcn_workitem_id_z() { return threadIdx.z; }
inline unsigned __builtin_amdgcn_workgroup_id_x() { return blockIdx.x; }
inline unsigned __builtin_amdgcn_workgroup_id_y() { return blockIdx.y; }
inline unsigned __builtin_amdgcn_workgroup_id_z() { return blockIdx.z; }
inline int __builtin_amdgcn_wavefrontsize() { return warpSize; }
inline unsigned __builtin_amdgcn_alignbit(unsigned hi, unsigned lo, unsigned shift) { return __gpuenv_alignbit(hi, lo, shift); }
inline unsigned __builtin_amdgcn_alignbyte(unsigned hi, unsigned lo, unsigned shift) {
    return __gpuenv_alignbit(hi, lo, (shift & 3) * 8);
}
inline unsigned __builtin_amdgcn_ubfe(unsigned x, unsigned offset, unsigned width) { return __bitextract_u32(x, offset, width); }
inline int __builtin_amdgcn_sbfe(int x, unsigned offset, unsigned width) {
    unsigned o = offset & 31, w = width & 31;
    if (w == 0) return 0;
    return o + w < 32 ? (int)((unsigned)x << (32 - o - w)) >> (32 - w) : x >> o;
}
// the median of three (v_med3_f32: NaN handling as fminf/fmaxf)
inline float __builtin_amdgcn_fmed3f(float a, float b, float c) { return fmaxf(fminf(a, b), fminf(fmaxf(a, b), c)); }
inline float __builtin_amdgcn_rcpf(float x) { return 1.0f / x; }
inline double __builtin_amdgcn_rcp(double x) { return 1.0 / x; }
inline float __builtin_amdgcn_rsqf(float x) { return 1.0f / sqrtf(x); }
inline double __builtin_amdgcn_rsq(double x) { return 1.0 / sqrt(x); }
inline float __builtin_amdgcn_sqrtf(float x) { return sqrtf(x); }
inline double __builtin_amdgcn_sqrt(double x) { return sqrt(x); }
inline float __builtin_amdgcn_exp2f(float x) { return exp2f(x); }
inline float __builtin_amdgcn_logf(float x) { return log2f(x); }  // v_log_f32 is log2
// v_sin_f32 / v_cos_f32 take the angle in revolutions
inline float __builtin_amdgcn_sinf(float x) { return sinf(x * 6.28318530717958647692f); }
inline float __builtin_amdgcn_cosf(float x) { return cosf(x * 6.28318530717958647692f); }
inline float __builtin_amdgcn_fractf(float x) { return fminf(x - floorf(x), 0x1.fffffep-1f); }
inline double __builtin_amdgcn_fract(double x) { return fmin(x - floor(x), 0x1.fffffffffffffp-1); }
inline float __builtin_amdgcn_ldexpf(float x, int e) { return ldexpf(x, e); }
inline double __builtin_amdgcn_ldexp(double x, int e) { return ldexp(x, e); }
inline float __builtin_amdgcn_frexp_mantf(float x) { int e; return frexpf(x, &e); }
inline int __builtin_amdgcn_frexp_expf(float x) { int e; frexpf(x, &e); return e; }
inline unsigned __builtin_amdgcn_atomic_inc32(volatile unsigned* p, unsigned v, int, const char*) {
    return atomicInc((unsigned*)p, v);
}
inline unsigned __builtin_amdgcn_atomic_dec32(volatile unsigned* p, unsigned v, int, const char*) {
    return atomicDec((unsigned*)p, v);
}
inline float __builtin_amdgcn_global_atomic_fadd_f32(float* p, float v) { return atomicAdd(p, v); }
inline float __builtin_amdgcn_ds_atomic_fadd_f32(float* p, float v) { return atomicAdd(p, v); }
inline double __builtin_amdgcn_flat_atomic_fadd_f64(double* p, double v) { return atomicAdd(p, v); }
inline double __builtin_amdgcn_global_atomic_fadd_f64(double* p, double v) { return atomicAdd(p, v); }
inline double __builtin_amdgcn_flat_atomic_fmin_f64(double* p, double v) { return atomicMin(p, v); }
inline double __builtin_amdgcn_flat_atomic_fmax_f64(double* p, double v) { return atomicMax(p, v); }
