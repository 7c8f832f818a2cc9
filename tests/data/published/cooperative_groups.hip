// origin: ROCm/rocm-examples@7dfb7d402794c33031be2847eaa06ee6732f07cb:HIP-Basic/cooperative_groups/main.hip (device code verbatim; host code removed; the example's host helper include "example_utils.hpp" removed)
// MIT License
//
// Copyright (c) 2022 Advanced Micro Devices, Inc. All rights reserved.
//
// Permission is hereby granted, free of charge, to any person obtaining a copy
// of this software and associated documentation files (the "Software"), to deal
// in the Software without restriction, including without limitation the rights
// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
// copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions:
//
// The above copyright notice and this permission notice shall be included in all
// copies or substantial portions of the Software.
//
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
// IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
// FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
// AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
// LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
// OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
// SOFTWARE.

#include <hip/hip_cooperative_groups.h>
#include <hip/hip_runtime.h>

#include <iostream>
#include <vector>

#include <cstddef>
#include <cstdlib>

using namespace cooperative_groups;

/// \brief Summation of `unsigned int val`'s in `thread_group g` using shared memory `x`
__device__ unsigned int reduce_sum(thread_group g, unsigned int* x, unsigned int val)
{
    // Rank of this thread in the group
    const unsigned int group_thread_id = g.thread_rank();

    // We start with half the group size as active threads
    // Every iteration the number of active threads halves, until we processed all values
    for(unsigned int i = g.size() / 2; i > 0; i /= 2)
    {
        // Store value for this thread in a shared, temporary array
        x[group_thread_id] = val;

        // Synchronize all threads in the group
        g.sync();

        // If our thread is still active, sum with its counterpart in the other half
        if(group_thread_id < i)
        {
            val += x[group_thread_id + i];
        }

        // Synchronize all threads in the group
        g.sync();
    }

    // Only the first thread returns a valid value
    if(g.thread_rank() == 0)
        return val;
    else
        return 0;
}

/// \brief A vector reduction kernel showcasing the use of cooperative groups.
/// - First we showcase the use of threadBlockGroup.
/// - Second we showcase the use of `tiled_partition<>()`.
/// \param partition_size The number of elements in a cooperative group's tiled_partition.
template<unsigned int PartitionSize>
__global__ void vector_reduce_kernel(const unsigned int* d_vector,
                                     unsigned int*       d_block_reduced_vector,
                                     unsigned int*       d_partition_reduced_vector)
{
    // threadBlockGroup consists of all threads in the block
    thread_block thread_block_group = this_thread_block();

    // Workspace array in shared memory required for reduction
    __shared__ unsigned int workspace[2048];

    unsigned int output;

    // Input to reduce
    const unsigned int input = d_vector[thread_block_group.thread_rank()];

    // Perform reduction
    output = reduce_sum(thread_block_group, workspace, input);

    // Only the first thread returns a valid value
    if(thread_block_group.thread_rank() == 0)
    {
        d_block_reduced_vector[0] = output;
    }

    // Every custom_partition group consists of 16 threads
    thread_block_tile<PartitionSize> custom_partition
        = tiled_partition<PartitionSize>(thread_block_group);

    // To make sure every partition has its own piece of shared memory it can work with
    const unsigned int group_offset
        = thread_block_group.thread_rank() - custom_partition.thread_rank();

    // Perform reduction
    output = reduce_sum(custom_partition, &workspace[group_offset], input);

    // Only the first thread in each partition returns a valid value
    if(custom_partition.thread_rank() == 0)
    {
        const unsigned int partition_id          = thread_block_group.thread_rank() / PartitionSize;
        d_partition_reduced_vector[partition_id] = output;
    }
    return;
}
