/* HIP's <hip/hip_cooperative_groups.h> on NVIDIA: CUDA's cooperative_groups.h (see hip_runtime.h). HIP
 * declares the same namespace, cooperative_groups, with the same names for what both have: this_thread_block,
 * thread_block (sync, thread_rank, size, group_index, thread_index), tiled_partition<N> and its tiles' shfl,
 * shfl_up/down/xor, any, all, ballot, sync, coalesced_threads, this_grid (grid sync needs a cooperative launch).
 * HIP-only extensions (a dynamic tiled_partition(group, n) whose tiles shuffle) have no CUDA counterpart.
 * hip_runtime.h's function-like macros (__any, __all, __ballot, __shfl*) would rewrite CUDA's own uses of
 * those names (libcu++'s `struct __any { __any(...); }`): they are undefined while CUDA's header is read.
 */
#ifndef PYTEST_GPUENV_HIP_COOPERATIVE_GROUPS_H
#define PYTEST_GPUENV_HIP_COOPERATIVE_GROUPS_H
#include <hip/hip_runtime.h>
#undef __any
#undef __all
#undef __ballot
#undef __shfl
#undef __shfl_up
#undef __shfl_down
#undef __shfl_xor
#include <cooperative_groups.h>
/* as hip_runtime.h defines them (NVRTC has no push_macro/pop_macro) */
#define __shfl(...) pytest_gpuenv_shfl(__VA_ARGS__)
#define __shfl_up(...) pytest_gpuenv_shfl_up(__VA_ARGS__)
#define __shfl_down(...) pytest_gpuenv_shfl_down(__VA_ARGS__)
#define __shfl_xor(...) pytest_gpuenv_shfl_xor(__VA_ARGS__)
#define __ballot(p) pytest_gpuenv_ballot(p)
#define __any(p) pytest_gpuenv_any(p)
#define __all(p) pytest_gpuenv_all(p)
#endif
