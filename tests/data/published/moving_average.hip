// origin: ROCm/rocm-examples@7dfb7d402794c33031be2847eaa06ee6732f07cb:HIP-Basic/moving_average/main.hip (device code verbatim; host code removed; the example's host helper include "example_utils.hpp" removed)
// MIT License
//
// Copyright (c) 2022-2023 Advanced Micro Devices, Inc. All rights reserved.
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

#include <hip/hip_runtime.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <vector>

/// \brief Compute the moving average of \p input_size elements with a window size of \p WindowSize.
/// Shared memory is used to cache the values needed by all threads in the block.
/// Thread \p i computes the average of values <tt>[i, i + WindowSize)</tt>.
template<unsigned int BlockSize, unsigned int WindowSize>
__global__ void
    moving_average(const unsigned int* input, unsigned int* output, const unsigned int input_size)
{
    // The offset of this block from the start of the grid.
    const unsigned int block_offset = blockIdx.x * blockDim.x;
    // The index of this thread in the grid.
    const unsigned int thread_idx = block_offset + threadIdx.x;

    // The number of values needed to compute BlockSize averages.
    constexpr unsigned int  buffer_size = BlockSize + WindowSize - 1;
    __shared__ unsigned int buffer[buffer_size];

    // Load values into shared memory.
    // Note that threadIdx.x is the index in the block.
    for(unsigned int i = threadIdx.x; i < buffer_size; i += BlockSize)
    {
        // Index in the input array.
        const unsigned int index = block_offset + i;
        // Prevent reading outside the input array.
        if(index < input_size)
        {
            buffer[i] = input[index];
        }
    }

    // Wait for all threads to load into shared memory.
    __syncthreads();

    // Compute the average using the cached data.
    const unsigned int output_size = input_size - WindowSize + 1;
    if(thread_idx < output_size)
    {
        unsigned int sum = 0;
        for(unsigned int i = 0; i < WindowSize; i++)
        {
            sum += buffer[threadIdx.x + i];
        }

        sum /= WindowSize;

        output[thread_idx] = sum;
    }
}
