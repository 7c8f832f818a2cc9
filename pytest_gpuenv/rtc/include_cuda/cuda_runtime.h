/* <cuda_runtime.h> for CUDA-dialect kernels built for AMD (hiprtc, hipcc) and the CPU executor, shipped by
 * pytest-gpuenv (pytest_gpuenv/rtc/include_cuda): CUDA's device-side names mapped onto HIP's, the inverse of
 * the HIP-on-CUDA header pytest-gpuenv ships for NVRTC. A .cu source is compiled after this header, as nvcc
 * includes cuda_runtime.h implicitly. On NVIDIA the CUDA toolkit's own header is used instead.
 *
 * What HIP already spells as CUDA does (threadIdx & co., __syncthreads*, __shared__, __constant__, atomics,
 * __shfl/__shfl_up/down/xor, __ballot, __any, __all, the math and integer intrinsics, dim3, warpSize) needs
 * nothing. Mapped here:
 *  - the *_sync warp functions (__shfl_sync, __shfl_up_sync, __shfl_down_sync, __shfl_xor_sync,
 *    __ballot_sync, __any_sync, __all_sync), __activemask and __syncwarp: the mask is ignored and the whole
 *    wavefront takes part, as hipify maps them (an AMD wavefront runs its active lanes together). A CUDA
 *    mask of 0xffffffff names 32 lanes: code that assumes warpSize == 32 (a 32-bit ballot, a lane mask
 *    built from 32) is not portable to wave64 GPUs; the CPU executor at wave64 shows it.
 * Not defined: __CUDA_ARCH__ and __CUDACC__ (HIP does not define them either): code under
 * #ifdef __CUDA_ARCH__ is NVIDIA-only and left out. Host APIs (cudaMalloc, cudaMemcpy, <<<...>>>) are
 * absent: pytest-gpuenv loads and launches kernels itself.
 */
#ifndef PYTEST_GPUENV_CUDA_RUNTIME_H
#define PYTEST_GPUENV_CUDA_RUNTIME_H

/* the CPU executor: the *_sync functions take CUDA's 32-bit mask, unchecked (HIP's take ROCm's 64-bit one) */
#define GPUENV_CUDA_MASKS 1
#include <hip/hip_runtime.h>

#ifndef __GPUENV_CPU__
/* hiprtc / hipcc: HIP before ROCm 6.2 has no *_sync warp functions; where it has them they take a 64-bit
   mask. Macros, so either way the CUDA spelling reaches HIP's mask-free function. */
#define __shfl_sync(mask, ...) __shfl(__VA_ARGS__)
#define __shfl_up_sync(mask, ...) __shfl_up(__VA_ARGS__)
#define __shfl_down_sync(mask, ...) __shfl_down(__VA_ARGS__)
#define __shfl_xor_sync(mask, ...) __shfl_xor(__VA_ARGS__)
#define __ballot_sync(mask, predicate) __ballot(predicate)
#define __any_sync(mask, predicate) __any(predicate)
#define __all_sync(mask, predicate) __all(predicate)
#define __activemask() __ballot(1)
/* a wavefront's lanes already run together: what is left of __syncwarp is its memory ordering */
static __device__ inline void pytest_gpuenv_syncwarp(void) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
#define __syncwarp(...) pytest_gpuenv_syncwarp()
#endif
/* the CPU executor has the *_sync forms, __activemask, __syncwarp (checked per lane) and __ldg (a load) */

#endif /* PYTEST_GPUENV_CUDA_RUNTIME_H */
