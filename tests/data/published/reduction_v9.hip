// origin: ROCm/rocm-examples@7dfb7d402794c33031be2847eaa06ee6732f07cb:Tutorials/reduction/example/v9.hip (device code verbatim; host code removed; <hip_utils.hpp>, <tmp_utils.hpp> are in include/)
// MIT License
//
// Copyright (c) 2024 Advanced Micro Devices, Inc. All rights reserved.
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

// Configuration constants
#define HIP_TEMPLATE_KERNEL_LAUNCH

// Reduction
#include <hip_utils.hpp> // HIP_CHECK
#include <tmp_utils.hpp> // tmp::static_for

// HIP API
#include <hip/hip_runtime.h>

// STL
#include <algorithm>
#include <cstddef>
#include <execution>
#include <iostream>
#include <iterator>
#include <numeric>
#include <random>
#include <stdlib.h>
#include <utility>
#include <vector>

template<uint32_t BlockSize, uint32_t WarpSize, uint32_t ItemsPerThread, typename T, typename F>
__global__ __launch_bounds__(BlockSize) void kernel(
    T* front, T* back, F op, T zero_elem, uint32_t front_size)
{
    static constexpr uint32_t WarpCount = BlockSize / WarpSize;

    __shared__ T shared[WarpCount];

    // Overindex-safe read of input and shared
    auto read_global_safe = [&](const uint32_t i)
    {
        return [&]<int32_t... I>(std::integer_sequence<int32_t, I...>)
        {
            if(i + ItemsPerThread < front_size)
                return hip::static_array<T, ItemsPerThread>{front[i + I]...};
            else
                return hip::static_array<T, ItemsPerThread>{
                    (i + I < front_size ? front[i + I] : zero_elem)...};
        }(std::make_integer_sequence<int32_t, ItemsPerThread>());
    };
    auto read_shared_safe = [&](const uint32_t i) { return i < WarpCount ? shared[i] : zero_elem; };

    const uint32_t tid = threadIdx.x, bid = blockIdx.x,
                   gid = bid * (blockDim.x * ItemsPerThread) + tid * ItemsPerThread,
                   wid = tid / WarpSize, lid = tid % WarpSize;

    // Read input from front buffer to local
    T res = [&]()
    {
        // Read input from front buffer to local
        hip::static_array<T, ItemsPerThread> arr = read_global_safe(gid);

        // Reduce ItemsPerThread to scalar
        tmp::static_for<1, tmp::less_than<ItemsPerThread>, tmp::increment<1>>(
            [&]<int I>() { get<0>(arr) = op(get<0>(arr), get<I>(arr)); });

        return get<0>(arr);
    }();

    // Perform warp reductions and communicate results via shared
    tmp::static_for<WarpCount,
                    tmp::not_equal<0>,
                    tmp::select<tmp::not_equal<1>, tmp::divide_ceil<WarpSize>, tmp::constant<0>>>(
        [&]<uint32_t ActiveWarps>()
        {
            if(wid < ActiveWarps)
            {
                // Warp reduction
                tmp::static_for<WarpSize / 2, tmp::not_equal<0>, tmp::divide<2>>(
                    [&]<int Delta>() { res = op(res, __shfl_down(res, Delta)); });

                // Write warp result from local to shared
                if(lid == 0)
                    shared[wid] = res;
            }
            __syncthreads();

            // Read warp result from shared to local
            res = read_shared_safe(tid);
        });

    // Write result from local to back buffer
    if(tid == 0)
        back[bid] = res;
}
