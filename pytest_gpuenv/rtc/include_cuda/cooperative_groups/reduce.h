/* <cooperative_groups/reduce.h> for CUDA-dialect kernels on AMD and the CPU executor (pytest-gpuenv):
 * cooperative_groups::reduce over a tile (thread_block_tile<N>, coalesced_group: a group with shfl_xor and a
 * power-of-two size) and CUDA's operators plus, less, greater, bit_and, bit_or, bit_xor. As in CUDA every
 * thread of the group gets the result (a butterfly of shfl_xor). reduce_update_async and reductions over a
 * whole thread_block are absent: a compile error.
 */
#ifndef PYTEST_GPUENV_CG_REDUCE_H
#define PYTEST_GPUENV_CG_REDUCE_H
#include "../cooperative_groups.h"

namespace cooperative_groups {
template <class T> struct plus {
    __device__ T operator()(const T& a, const T& b) const { return a + b; }
};
template <class T> struct less {  /* the smaller of the two, as CUDA's */
    __device__ T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <class T> struct greater {  /* the larger of the two, as CUDA's */
    __device__ T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <class T> struct bit_and {
    __device__ T operator()(const T& a, const T& b) const { return a & b; }
};
template <class T> struct bit_or {
    __device__ T operator()(const T& a, const T& b) const { return a | b; }
};
template <class T> struct bit_xor {
    __device__ T operator()(const T& a, const T& b) const { return a ^ b; }
};

template <class Group, class T, class Op>
__device__ T reduce(const Group& group, T value, Op op) {
    for (unsigned int offset = 1; offset < group.size(); offset <<= 1) value = op(value, group.shfl_xor(value, offset));
    return value;
}
}  // namespace cooperative_groups
#endif
