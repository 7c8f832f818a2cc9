// origin: ROCm/hip-tests@87c8a0417c6f4ef2c7d905b71eb42e02a0c4ef4a:catch/unit/cooperativeGrps/hipCGThreadBlockTileTypeShfl_old.cc (device code verbatim; host code removed; the Catch2 harness include <hip_test_common.hh> replaced by the HIP header it includes, the harness's "hip_cg_common.hh" removed)
/*
Copyright (c) 2020 - 2022 Advanced Micro Devices, Inc. All rights reserved.

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT.  IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
THE SOFTWARE.
*/
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>

namespace cg = cooperative_groups;

enum class TiledGroupShflTests { shflDown, shflXor, shflUp };

template <unsigned int tileSz>
__device__ int reduction_kernel_shfl_down(cg::thread_block_tile<tileSz> const& g,
                                          volatile int val) {
  int sz = g.size();

  for (int i = sz / 2; i > 0; i >>= 1) {
    val += g.shfl_down(val, i);
  }

  // Choose the 0'th indexed thread that holds the reduction value to return
  if (g.thread_rank() == 0) {
    return val;
  }
  // Rest of the threads return no useful values
  else {
    return -1;
  }
}

template <unsigned int tileSz>
__device__ int reduction_kernel_shfl_xor(cg::thread_block_tile<tileSz> const& g, int val) {
  int sz = g.size();

  for (int i = sz / 2; i > 0; i >>= 1) {
    val += g.shfl_xor(val, i);
  }

  // Choose the 0'th indexed thread that holds the reduction value to return
  if (g.thread_rank() == 0) {
    return val;
  }
  // Rest of the threads return no useful values
  else {
    return -1;
  }
}

template <unsigned int tileSz>
__device__ int prefix_sum_kernel(cg::thread_block_tile<tileSz> const& g, volatile int val) {
  int sz = g.size();
#pragma unroll
  for (int i = 1; i < sz; i <<= 1) {
    int temp = g.shfl_up(val, i);

    if (g.thread_rank() >= i) {
      val += temp;
    }
  }
  return val;
}

template <unsigned int tile_size>
static __global__ void kernel_cg_group_partition_static(int* result,
                                                        TiledGroupShflTests shfl_test) {
  cg::thread_block thread_block_CG_ty = cg::this_thread_block();
  int input, output_sum;

  // Choose a leader thread to print the results
  if (thread_block_CG_ty.thread_rank() == 0) {
    printf(" Creating %d groups, of tile size %d threads:\n\n",
           (int)thread_block_CG_ty.size() / tile_size, tile_size);
  }

  thread_block_CG_ty.sync();

  cg::thread_block_tile<tile_size> tiled_part = cg::tiled_partition<tile_size>(thread_block_CG_ty);

  input = tiled_part.thread_rank();

  switch (shfl_test) {
    case (TiledGroupShflTests::shflDown):
      output_sum = reduction_kernel_shfl_down(tiled_part, input);
      break;
    case (TiledGroupShflTests::shflXor):
      output_sum = reduction_kernel_shfl_xor(tiled_part, input);
      break;
    case (TiledGroupShflTests::shflUp):
      output_sum = prefix_sum_kernel(tiled_part, input);
      result[thread_block_CG_ty.thread_rank()] = output_sum;
  }

  if (tiled_part.thread_rank() == 0 && shfl_test != TiledGroupShflTests::shflUp) {
    printf("   Sum of all ranks 0..%d in this tiled_part group is %d\n", tiled_part.size() - 1,
           output_sum);
    result[thread_block_CG_ty.thread_rank() / (tile_size)] = output_sum;
  }
}
