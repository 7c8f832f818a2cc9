// <hip/hip_cooperative_groups.h> for the CPU executor (pytest-gpuenv), after ROCm's
// amd_detail/amd_hip_cooperative_groups.h: thread_block, thread_block_tile<N> / tiled_partition (tiles
// of at most a wavefront, with shfl, shfl_up/down/xor, any, all, ballot, sync), coalesced_threads(),
// this_grid(), whose sync() waits for every block of a cooperative launch (and stops any other launch with
// a report: coop.cpp), and the free functions group_size, thread_rank, is_valid and sync. Tile operations
// are warp operations of the executor, so inactive lanes and wave-width assumptions are checked as for __shfl.
#pragma once
#include "hip_runtime.h"

namespace cooperative_groups {

namespace gpuenv_detail {
enum kind { k_block, k_tile, k_coalesced, k_grid };
inline unsigned block_threads() { return __gpuenv_state.bdim.x * __gpuenv_state.bdim.y * __gpuenv_state.bdim.z; }
inline unsigned lane() { return __gpuenv_state.lin % warpSize; }
}  // namespace gpuenv_detail

class thread_group {
  protected:
    int kind_;
    unsigned size_, rank_;
    unsigned long long mask_;  // a coalesced group's lanes
    thread_group(int k, unsigned s, unsigned r, unsigned long long m = 0) : kind_(k), size_(s), rank_(r), mask_(m) {}

  public:
    unsigned size() const { return size_; }
    unsigned num_threads() const { return size_; }
    unsigned thread_rank() const { return rank_; }
    bool is_valid() const { return kind_ != gpuenv_detail::k_grid || gpuenv_grid_valid(); }
    // a tile wider than a wavefront syncs with a block barrier (every tile must reach the same sync)
    void sync(GPUENV_HERE) const {
        if (kind_ == gpuenv_detail::k_block || (kind_ == gpuenv_detail::k_tile && size_ > (unsigned)warpSize))
            gpuenv_sync(GPUENV_BAR_AT(GPUENV_BAR_PLAIN));
        else if (kind_ == gpuenv_detail::k_grid) {  // the block's threads, then (thread 0) every block, then the block's
            gpuenv_sync(GPUENV_BAR_AT(GPUENV_BAR_PLAIN));
            if (__gpuenv_state.lin == 0) gpuenv_grid_wait(GPUENV_AT);
            gpuenv_sync(gpuenv_file, (gpuenv_where + 1) * 4 + GPUENV_BAR_PLAIN);
        }
        else
            gpuenv_warp_op(GPUENV_OP_SYNCWARP, 0, 0, warpSize, GPUENV_AT);
    }
};

class thread_block : public thread_group {
    friend thread_block this_thread_block();
    thread_block() : thread_group(gpuenv_detail::k_block, gpuenv_detail::block_threads(), __gpuenv_state.lin) {}

  public:
    dim3 group_index() const { return dim3(blockIdx); }
    dim3 thread_index() const { return dim3(threadIdx); }
    dim3 group_dim() const { return dim3(blockDim); }
    dim3 dim_threads() const { return dim3(blockDim); }
};
inline thread_block this_thread_block() { return thread_block(); }

class grid_group : public thread_group {
    friend grid_group this_grid();
    grid_group()
        : thread_group(gpuenv_detail::k_grid,
                       gpuenv_detail::block_threads() * gridDim.x * gridDim.y * gridDim.z,
                       __gpuenv_state.lin + gpuenv_detail::block_threads() *
                           (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z))) {}

  public:
    dim3 group_dim() const { return dim3(gridDim); }
};
inline grid_group this_grid() { return grid_group(); }

template <unsigned N>
class thread_block_tile : public thread_group {
    static_assert(N && (N & (N - 1)) == 0 && N <= (unsigned)GPUENV_WARP_SIZE,
                  "thread_block_tile<N>: N must be a power of 2 of at most warpSize");
    unsigned base() const { return gpuenv_detail::lane() / N * N; }
    template <class T> T op(int o, T v, int arg, const char* f, int w) const { return gpuenv_shfl(o, v, arg, (int)N, f, w); }

  public:
    thread_block_tile() : thread_group(gpuenv_detail::k_tile, N, __gpuenv_state.lin % N) {}
    unsigned meta_group_rank() const { return __gpuenv_state.lin / N; }
    unsigned meta_group_size() const { return (gpuenv_detail::block_threads() + N - 1) / N; }
    template <class T> T shfl(T v, int src, GPUENV_HERE) const { return op(GPUENV_OP_SHFL, v, src, GPUENV_AT); }
    template <class T> T shfl_up(T v, unsigned d, GPUENV_HERE) const { return op(GPUENV_OP_UP, v, (int)d, GPUENV_AT); }
    template <class T> T shfl_down(T v, unsigned d, GPUENV_HERE) const { return op(GPUENV_OP_DOWN, v, (int)d, GPUENV_AT); }
    template <class T> T shfl_xor(T v, unsigned m, GPUENV_HERE) const { return op(GPUENV_OP_XOR, v, (int)m, GPUENV_AT); }
    unsigned long long ballot(int p, GPUENV_HERE) const {
        unsigned long long b = gpuenv_warp_op(GPUENV_OP_BALLOT, p != 0, 0, warpSize, GPUENV_AT);
        return (b >> base()) & (N == 64 ? ~0ull : (1ull << N) - 1);
    }
    int any(int p, GPUENV_HERE) const { return ballot(p, GPUENV_AT) != 0; }
    int all(int p, GPUENV_HERE) const {
        unsigned long long b = gpuenv_warp_op(GPUENV_OP_BALLOT, p != 0, 0, warpSize, GPUENV_AT);
        unsigned long long a = gpuenv_warp_op(GPUENV_OP_BALLOT, 1, 0, warpSize, gpuenv_file, gpuenv_where + 1);
        unsigned long long m = (N == 64 ? ~0ull : (1ull << N) - 1) << base();
        return (b & m) == (a & m);
    }
};

template <unsigned N, class Parent> thread_block_tile<N> tiled_partition(const Parent&) { return thread_block_tile<N>(); }

// a tile whose size is known at run time: size, thread_rank and sync
class tiled_group : public thread_group {
  public:
    explicit tiled_group(unsigned n) : thread_group(gpuenv_detail::k_tile, n, __gpuenv_state.lin % n) {}
    unsigned meta_group_rank() const { return __gpuenv_state.lin / size_; }
    unsigned meta_group_size() const { return (gpuenv_detail::block_threads() + size_ - 1) / size_; }
};
inline tiled_group tiled_partition(const thread_group&, unsigned n) { return tiled_group(n); }

// the lanes of the wave active at the call
class coalesced_group : public thread_group {
    friend coalesced_group coalesced_threads(const char*, int);
    coalesced_group(unsigned long long m)
        : thread_group(gpuenv_detail::k_coalesced, (unsigned)__builtin_popcountll(m),
                       (unsigned)__builtin_popcountll(m & ((1ull << gpuenv_detail::lane()) - 1)), m) {}
    int lane_of(unsigned rank) const {  // the rank-th lane of the group, -1 past the end
        unsigned long long m = mask_;
        for (unsigned i = 0; m; i++, m &= m - 1)
            if (i == rank) return __builtin_ctzll(m);
        return -1;
    }
    template <class T> T from(T v, long rank, const char* f, int w) const {
        int l = rank < 0 ? -1 : lane_of((unsigned)rank);
        return gpuenv_shfl(GPUENV_OP_SHFL, v, l < 0 ? (int)gpuenv_detail::lane() : l, warpSize, f, w);
    }

  public:
    template <class T> T shfl(T v, int rank, GPUENV_HERE) const { return from(v, rank, GPUENV_AT); }
    template <class T> T shfl_down(T v, unsigned d, GPUENV_HERE) const {
        return from(v, rank_ + d < size_ ? (long)(rank_ + d) : (long)rank_, GPUENV_AT);
    }
    template <class T> T shfl_up(T v, unsigned d, GPUENV_HERE) const {
        return from(v, rank_ >= d ? (long)(rank_ - d) : (long)rank_, GPUENV_AT);
    }
    unsigned long long ballot(int p, GPUENV_HERE) const {  // bit i: the group's rank i
        unsigned long long b = gpuenv_warp_op(GPUENV_OP_BALLOT, p != 0, 0, warpSize, GPUENV_AT), r = 0;
        unsigned i = 0;
        for (unsigned long long m = mask_; m; m &= m - 1, i++)
            if (b >> __builtin_ctzll(m) & 1) r |= 1ull << i;
        return r;
    }
    int any(int p, GPUENV_HERE) const { return ballot(p, GPUENV_AT) != 0; }
    int all(int p, GPUENV_HERE) const { return __builtin_popcountll(ballot(p, GPUENV_AT)) == (int)size_; }
};
inline coalesced_group coalesced_threads(GPUENV_HERE) {
    return coalesced_group(gpuenv_warp_op(GPUENV_OP_BALLOT, 1, 0, warpSize, GPUENV_AT));
}

inline void sync(const thread_group& g, GPUENV_HERE) { g.sync(GPUENV_AT); }
// as amd_hip_cooperative_groups.h's free functions (ROCm/clr hipamd/include/hip/amd_detail)
template <class CGTy> unsigned group_size(const CGTy& g) { return g.size(); }
template <class CGTy> unsigned thread_rank(const CGTy& g) { return g.thread_rank(); }
template <class CGTy> bool is_valid(const CGTy& g) { return g.is_valid(); }

}  // namespace cooperative_groups
