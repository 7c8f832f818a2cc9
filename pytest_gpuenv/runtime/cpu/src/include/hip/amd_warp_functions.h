// The wave functions of ROCm's amd_detail/amd_warp_functions.h that <hip/hip_runtime.h> lacks, and the
// __builtin_amdgcn_* wave builtins they are written with, for the CPU executor (pytest-gpuenv). Each is
// made of the executor's warp operations (src/warps.cpp), so an inactive source lane and a wave-width
// assumption are reported as for __shfl. Lane numbers and masks follow the AMD ISA: a wave is warpSize lanes,
// ds_bpermute/ds_permute address lanes by byte (lane * 4), ds_swizzle works within groups of 32 lanes.
#pragma once

// the value of lane `lane` of the wave (it must be active)
template <class T>
inline __attribute__((__always_inline__)) T __gpuenv_lane_value(T v, int lane, const char* file, int where) {
    return gpuenv_shfl(GPUENV_OP_SHFL, v, lane, warpSize, file, where);
}
inline __attribute__((__always_inline__)) uint64_t __gpuenv_active(const char* file, int where) {
    return gpuenv_warp_op(GPUENV_OP_BALLOT, 1, 0, warpSize, file, where);
}

inline __attribute__((__always_inline__)) unsigned long long int __ballot64(int p, GPUENV_HERE) { return __ballot(p, GPUENV_AT); }

// ds_bpermute (pull): each lane reads lane (index / 4) mod warpSize
inline __attribute__((__always_inline__)) int __gpuenv_ds_bpermute(int index, int src, const char* file, int where) {
    return __gpuenv_lane_value(src, (index >> 2) & (warpSize - 1), file, where);
}
// ds_permute (push): each active lane sends its value to lane (index / 4) mod warpSize; a lane that no lane
// sends to gets 0, and of two lanes sending to one the higher lane's value stays (the executor's order)
inline __attribute__((__always_inline__)) int __gpuenv_ds_permute(int index, int src, const char* file, int where) {
    uint64_t active = __gpuenv_active(file, where);
    int me = (int)__lane_id(), r = 0;
    for (int j = 0; j < warpSize; j++) {
        if (!((active >> j) & 1)) continue;
        int to = (__gpuenv_lane_value(index, j, file, where) >> 2) & (warpSize - 1);
        int v = __gpuenv_lane_value(src, j, file, where);
        if (to == me) r = v;
    }
    return r;
}
// ds_swizzle: offset bit 15 set: quad permute (2 bits a lane); else and/or/xor masks (bits 0-4, 5-9, 10-14)
// applied to the lane's number within its group of 32
inline int __gpuenv_swizzle_lane(int lane, int pattern) {
    if (pattern & 0x8000) return (lane & ~3) | ((pattern >> (2 * (lane & 3))) & 3);
    int and_mask = pattern & 0x1f, or_mask = (pattern >> 5) & 0x1f, xor_mask = (pattern >> 10) & 0x1f;
    return (lane & ~31) | ((((lane & 31) & and_mask) | or_mask) ^ xor_mask);
}
inline __attribute__((__always_inline__)) int __gpuenv_ds_swizzle(int src, int pattern, const char* file, int where) {
    return __gpuenv_lane_value(src, __gpuenv_swizzle_lane((int)__lane_id(), pattern) & (warpSize - 1), file, where);
}

template <class T> inline T __gpuenv_bits_as(int x) { T r; __builtin_memcpy(&r, &x, 4); return r; }
template <class T> inline int __gpuenv_as_bits(T x) { int r; __builtin_memcpy(&r, &x, 4); return r; }
inline unsigned __hip_ds_bpermute(int index, unsigned src, GPUENV_HERE) {
    return __gpuenv_bits_as<unsigned>(__gpuenv_ds_bpermute(index, __gpuenv_as_bits(src), GPUENV_AT));
}
inline float __hip_ds_bpermutef(int index, float src, GPUENV_HERE) {
    return __gpuenv_bits_as<float>(__gpuenv_ds_bpermute(index, __gpuenv_as_bits(src), GPUENV_AT));
}
inline unsigned __hip_ds_permute(int index, unsigned src, GPUENV_HERE) {
    return __gpuenv_bits_as<unsigned>(__gpuenv_ds_permute(index, __gpuenv_as_bits(src), GPUENV_AT));
}
inline float __hip_ds_permutef(int index, float src, GPUENV_HERE) {
    return __gpuenv_bits_as<float>(__gpuenv_ds_permute(index, __gpuenv_as_bits(src), GPUENV_AT));
}
template <int pattern> inline unsigned __hip_ds_swizzle_N(unsigned int src, GPUENV_HERE) {
    return __gpuenv_bits_as<unsigned>(__gpuenv_ds_swizzle(__gpuenv_as_bits(src), pattern, GPUENV_AT));
}
template <int pattern> inline float __hip_ds_swizzlef_N(float src, GPUENV_HERE) {
    return __gpuenv_bits_as<float>(__gpuenv_ds_swizzle(__gpuenv_as_bits(src), pattern, GPUENV_AT));
}
#define __hip_ds_swizzle(src, pattern) __hip_ds_swizzle_N<(pattern)>((src))
#define __hip_ds_swizzlef(src, pattern) __hip_ds_swizzlef_N<(pattern)>((src))

// DPP moves (v_mov_b32_dpp): dpp_ctrl picks the source lane within a row of 16 lanes (quad_perm 0x00-0xff,
// row_shl 0x101-0x10f, row_shr 0x111-0x11f, row_ror 0x121-0x12f, row_mirror 0x140, row_half_mirror 0x141)
// or across the wave (wave_shl1 0x130, wave_rol1 0x134, wave_shr1 0x138, wave_ror1 0x13c, row_bcast15
// 0x142, row_bcast31 0x143); a lane whose row is off in row_mask or bank (lane / 4 mod 4) off in bank_mask
// keeps `old`; a lane whose source is out of range or inactive gets 0 with bound_ctrl, else `old`
inline int __gpuenv_dpp_source(int lane, int ctrl) {
    int row = lane & ~15, r = lane & 15;
    if (ctrl <= 0xff) return (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3);
    if (ctrl >= 0x101 && ctrl <= 0x10f) return r + (ctrl & 15) < 16 ? lane + (ctrl & 15) : -1;
    if (ctrl >= 0x111 && ctrl <= 0x11f) return r - (ctrl & 15) >= 0 ? lane - (ctrl & 15) : -1;
    if (ctrl >= 0x121 && ctrl <= 0x12f) return row | ((r + (ctrl & 15)) & 15);
    if (ctrl == 0x130) return lane + 1 < warpSize ? lane + 1 : -1;
    if (ctrl == 0x134) return (lane + 1) & (warpSize - 1);
    if (ctrl == 0x138) return lane - 1;
    if (ctrl == 0x13c) return (lane - 1) & (warpSize - 1);
    if (ctrl == 0x140) return row | (15 - r);
    if (ctrl == 0x141) return (lane & ~7) | (7 - (lane & 7));
    if (ctrl == 0x142) return row ? row - 1 : -1;  // lane 15 of the row before
    if (ctrl == 0x143) return lane >= 32 ? 31 : -1;
    return -1;
}
inline __attribute__((__always_inline__)) int __gpuenv_update_dpp(int old, int src, int ctrl, int row_mask, int bank_mask,
                                                            bool bound_ctrl, const char* file, int where) {
    int lane = (int)__lane_id();
    uint64_t active = __gpuenv_active(file, where);
    // every lane takes part in the same moves: all lanes' values are gathered, each picks its own
    int from = __gpuenv_dpp_source(lane, ctrl);
    int got = 0;
    for (int j = 0; j < warpSize; j++) {
        if (!((active >> j) & 1)) continue;
        int v = __gpuenv_lane_value(src, j, file, where);
        if (j == from) got = v;
    }
    bool on = ((row_mask >> ((lane >> 4) & 3)) & 1) && ((bank_mask >> ((lane >> 2) & 3)) & 1);
    if (!on) return old;
    if (from < 0 || from >= warpSize || !((active >> from) & 1)) return bound_ctrl ? 0 : old;
    return got;
}
template <int dpp_ctrl, int row_mask, int bank_mask, bool bound_ctrl>
inline int __hip_move_dpp_N(int src, GPUENV_HERE) {
    return __gpuenv_update_dpp(src, src, dpp_ctrl, row_mask, bank_mask, bound_ctrl, GPUENV_AT);
}
#define __hip_move_dpp(src, dpp_ctrl, row_mask, bank_mask, bound_ctrl) \
    __hip_move_dpp_N<(dpp_ctrl), (row_mask), (bank_mask), (bound_ctrl)>((src))
