// origin: ROCm/rocm-examples@7dfb7d402794c33031be2847eaa06ee6732f07cb:Applications/convolution/main.hip (device code verbatim; host code removed; the example's host helper includes "cmdparser.hpp", "example_utils.hpp" removed)
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
#include <array>
#include <cstddef>
#include <functional>
#include <iterator>
#include <ostream>
#include <random>
#include <string>
#include <vector>

// clang-format off
/// \brief Convolution filter using arbitrary values
const constexpr std::array<float, 5 * 5> convolution_filter_5x5 = {1.0f,  3.0f, 0.0f,  -2.0f, -0.0f, 
                                                                   1.0f,  4.0f, 0.0f,  -8.0f, -4.0f,
                                                                   2.0f,  7.0f, 0.0f, -12.0f, -0.0f,
                                                                   2.0f,  3.0f, 1.5f,  -8.0f, -4.0f,
                                                                   0.0f,  1.0f, 0.0f,  -2.0f, -0.0f};
// clang-format on

/// \brief allocate memory in constant address space for the mask on the device
__constant__ float d_mask[5 * 5];

/// \brief Implements a convolution for an input grid \p input and a \p d_mask that is defined in constant memory. The \p input needs
/// to be padded such that \p mask_size is taken into account, i.e. padded_width = floor(mask_width/2) * 2 + width
/// and padded_height = floor(mask_height/2) * 2 + height
template<size_t MaskWidth = 5>
__global__ void convolution(const float* input, float* output, const uint2 input_dimensions)
{
    const size_t x            = blockDim.x * blockIdx.x + threadIdx.x;
    const size_t y            = blockDim.y * blockIdx.y + threadIdx.y;
    const size_t width        = input_dimensions.x;
    const size_t height       = input_dimensions.y;
    const size_t padded_width = width + (MaskWidth / 2) * 2;

    // Check if the currently computed element is inside the grid domain.
    if(x >= width || y >= height)
        return;

    // Temporary storage variables.
    float        sum              = 0.0f;
    const size_t convolution_base = y * padded_width + x;

    // Iterate over the mask in both x and y direction.
    for(size_t mask_index_y = 0; mask_index_y < MaskWidth; ++mask_index_y)
    {
        for(size_t mask_index_x = 0; mask_index_x < MaskWidth; ++mask_index_x)
        {
            const size_t mask_index         = mask_index_y * MaskWidth + mask_index_x;
            const size_t convolution_offset = mask_index_y * padded_width + mask_index_x;
            sum += input[convolution_base + convolution_offset] * d_mask[mask_index];
        }
    }

    output[y * width + x] = sum;
}
