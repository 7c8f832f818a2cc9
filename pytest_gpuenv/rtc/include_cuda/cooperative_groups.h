/* <cooperative_groups.h> for CUDA-dialect kernels on AMD and the CPU executor (pytest-gpuenv): HIP's
 * cooperative groups, which declare the same namespace and names for what both have (this_thread_block,
 * thread_block, sync, tiled_partition<N> and its tiles' shfl/shfl_up/down/xor, any, all, ballot,
 * coalesced_threads, this_grid with a cooperative launch); cooperative_groups/reduce.h is shipped beside it.
 * CUDA-only parts (memcpy_async, block_tile_memory, tiles wider than a wavefront with shuffles) are absent:
 * a compile error where they are used.
 * cuda_runtime.h's *_sync macros are lifted while HIP's header is read, so its own uses stay its own.
 */
#ifndef PYTEST_GPUENV_COOPERATIVE_GROUPS_H
#define PYTEST_GPUENV_COOPERATIVE_GROUPS_H
#include "cuda_runtime.h"
#pragma push_macro("__shfl_sync")
#pragma push_macro("__shfl_up_sync")
#pragma push_macro("__shfl_down_sync")
#pragma push_macro("__shfl_xor_sync")
#pragma push_macro("__ballot_sync")
#pragma push_macro("__any_sync")
#pragma push_macro("__all_sync")
#pragma push_macro("__activemask")
#pragma push_macro("__syncwarp")
#undef __shfl_sync
#undef __shfl_up_sync
#undef __shfl_down_sync
#undef __shfl_xor_sync
#undef __ballot_sync
#undef __any_sync
#undef __all_sync
#undef __activemask
#undef __syncwarp
#include <hip/hip_cooperative_groups.h>
#pragma pop_macro("__shfl_sync")
#pragma pop_macro("__shfl_up_sync")
#pragma pop_macro("__shfl_down_sync")
#pragma pop_macro("__shfl_xor_sync")
#pragma pop_macro("__ballot_sync")
#pragma pop_macro("__any_sync")
#pragma pop_macro("__all_sync")
#pragma pop_macro("__activemask")
#pragma pop_macro("__syncwarp")

namespace cooperative_groups {
/* CUDA 11's scratch space for tiles wider than 32 threads: declared only, so a source that has a kernel
   using it compiles as long as that kernel is not instantiated (HIP has no such tiles to back it) */
template <unsigned int MaxBlockSize = 1024> struct block_tile_memory;
}  // namespace cooperative_groups
#endif
