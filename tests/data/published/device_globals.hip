// origin: ROCm/rocm-examples@7dfb7d402794c33031be2847eaa06ee6732f07cb:HIP-Basic/device_globals/main.hip (device code verbatim; host code removed; the example's host helper include "example_utils.hpp" removed)
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

#include <cassert>
#include <iostream>
#include <numeric>
#include <vector>

constexpr unsigned int device_array_size = 16;

/// A test global variable of a single element, that will later be set from the host.
__device__ float global;

/// A test global variable of \p device_array_size elements that will be set from the host.
__device__ float global_array[device_array_size];

/// \brief A simple test kernel, that reads from <tt>in</tt>, <tt>global</tt>, and
/// <tt>global_array</tt>. The result will be written to <tt>out</tt>.
__global__ void test_globals_kernel(float* out, const float* in, const size_t size)
{
    const unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    if(tid < size)
    {
        out[tid] = in[tid] + global + global_array[tid % device_array_size];
    }
}
