// origin: ROCm/rocm-examples@7dfb7d402794c33031be2847eaa06ee6732f07cb:HIP-Basic/shared_memory/main.hip (device code verbatim; host code removed; the example's host helper include "example_utils.hpp" removed)
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

/// \brief Transposes the matrix \p in and stores the result in \p out using static shared memory.
template<const unsigned int Width = 64>
__global__ void matrix_transpose_kernel(float* out, const float* in)
{
    // Allocate the necessary amount of shared memory to store the transpose of the matrix.
    constexpr unsigned int size = Width * Width;
    __shared__ float       shared_matrix_memory[size];

    // Compute the row and column indexes of the matrix element that each thread is going
    // to process.
    const unsigned int x = blockDim.x * blockIdx.x + threadIdx.x;
    const unsigned int y = blockDim.y * blockIdx.y + threadIdx.y;

    // If not out of bounds, transpose element (x,y).
    if(x < Width && y < Width)
    {
        // Store transposed element in shared memory.
        shared_matrix_memory[y * Width + x] = in[x * Width + y];
    }

    // Syncronize threads so all writes are done before accessing shared memory again.
    __syncthreads();

    // If not out of bounds, transpose element (x,y).
    if(x < Width && y < Width)
    {
        // Copy transposed element from shared memory to global memory.
        out[y * Width + x] = shared_matrix_memory[y * Width + x];
    }
}
