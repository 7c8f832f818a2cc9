// origin: ROCm/rocm-examples@7dfb7d402794c33031be2847eaa06ee6732f07cb:Applications/histogram/main.hip (device code verbatim; host code removed; the example's host helper include "example_utils.hpp" removed)
// MIT License
//
// Copyright (c) 2023 Advanced Micro Devices, Inc. All rights reserved.
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
#include <random>
#include <vector>

/// \brief Calculates the 256-sized bin histogram for a block.
__global__ void
    histogram256_block(unsigned char* data, unsigned int* block_bins, const int items_per_thread)
{
    const int thread_id  = threadIdx.x;
    const int block_id   = blockIdx.x;
    const int block_size = blockDim.x;
    const int bin_size   = 256;

    // If thread_bins was an array of unsigned int, thread_bins could be
    // clustered by thread to reduce banking conflicts:
    // | t0 ... t128 | t0 ... t128 | ... | t0 ... t128 |
    // |    bin0     |    bin1     | ... |    bin255   |
    // Thread bins is of size: bin_size * block_size.
    extern __shared__ unsigned char thread_bins[];

    // However, we need to use unsigned char to save space, which is smaller
    // than 32-bit word unit stored per bank.  We can shuffle thread_id such
    // that  a wave  front  iterates through  thread_bins  with  a stride of
    // 4 elements (32-bits total). Example with 128 threads per block:
    //   0b0000_0000_0AAB_BBBBB into (   thread_id)
    //   0b0000_0000_0BBB_BBBAA      (sh_thread_id)
    // sh_thread_id is in the range [0; block_size)

    // If we assume that block_size is a power of two, then we can get the
    // length of B by finding the first '1' bit with '__ffs'.
    const int b_bits_length = __ffs(block_size) - 3;
    const int sh_thread_id
        = (thread_id & (1 << b_bits_length) - 1) << 2 | (thread_id >> b_bits_length);

    // Initialize 'thread_bins' to 0
    for(int i = 0; i < bin_size; ++i)
    {
        thread_bins[i + bin_size * sh_thread_id] = 0;
    }
    __syncthreads();

    for(int i = 0; i < items_per_thread; i++)
    {
        const unsigned int value = data[(block_id * block_size + thread_id) * items_per_thread + i];
        thread_bins[value * block_size + sh_thread_id]++;
    }
    __syncthreads();

    // Join the generated 256 bins from 128 threads by letting each thread sum 256 elements from 2 bins.
    const int bins_per_thread = bin_size / block_size;
    for(int i = 0; i < bins_per_thread; ++i)
    {
        // bin_sh_id is in the range [0; bin_size)
        const int bin_sh_id = i * block_size + sh_thread_id;

        // Accumulate bins.
        unsigned int bin_acc = 0;
        for(int j = 0; j < block_size; ++j)
        {
            // Sum the result from the j-th thread from the 'block_size'-sized 'bin_id'th bin.
            bin_acc += thread_bins[bin_sh_id * block_size + j];
        }

        block_bins[block_id * bin_size + bin_sh_id] = bin_acc;
    }
}
