/* HIP device code on NVIDIA GPUs: the subset of <hip/hip_runtime.h> a kernel source needs, mapped onto
 * CUDA for NVRTC and nvcc. Shipped by pytest-gpuenv (pytest_gpuenv/rtc/include); on AMD the real ROCm
 * header is used instead. Host APIs (hipMalloc, hipLaunchKernelGGL, ...) are deliberately absent:
 * pytest-gpuenv loads and launches kernels itself.
 *
 * Semantics kept from HIP:
 *  - __shfl, __shfl_up, __shfl_down, __shfl_xor take no mask and an optional width (default warpSize);
 *    they map to the *_sync forms with the full mask, so every lane of the warp must take part.
 *  - __ballot returns a 64-bit mask (HIP's type), __any / __all return int.
 *  - warpSize is the runtime built-in (32 on NVIDIA); never assume 32 in code meant for AMD (64 on CDNA).
 */
#ifndef PYTEST_GPUENV_HIP_RUNTIME_H
#define PYTEST_GPUENV_HIP_RUNTIME_H
/* A CUDA-dialect source (.cu, dialect="cuda") compiles as CUDA, as written: this header, which the plugin
   pre-includes, then maps nothing (pytest-gpuenv defines GPUENV_CUDA_DIALECT for it). */
#ifndef GPUENV_CUDA_DIALECT

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#error "pytest-gpuenv's hip/hip_runtime.h is the HIP-on-CUDA device header: compile with NVRTC or nvcc"
#endif

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__
#define __HIP_PLATFORM_NVCC__ 1
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif

#if defined(__CUDACC_RTC__)
/* NVRTC has size_t built in but no <cstdint>. */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif
/* HIP on AMD declares these for device code (ROCm hip/amd_detail/device_library_decls.h); published HIP
   kernels use them. Repeating glibc's identical typedefs (sys/types.h, nvcc's host pass) is allowed. */
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

/* Thread and block indices, HIP spelling. */
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)

/* Dynamic shared memory: HIP_DYNAMIC_SHARED(float, buf) declares `extern __shared__ float buf[];`. */
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define __HIP_FULL_MASK 0xffffffffu

#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif

/* Warp shuffles with HIP's signature: no mask, optional width. */
template <typename T>
static __device__ __forceinline__ T pytest_gpuenv_shfl(T var, int src_lane, int width = warpSize) {
    return __shfl_sync(__HIP_FULL_MASK, var, src_lane, width);
}
template <typename T>
static __device__ __forceinline__ T pytest_gpuenv_shfl_up(T var, unsigned int delta, int width = warpSize) {
    return __shfl_up_sync(__HIP_FULL_MASK, var, delta, width);
}
template <typename T>
static __device__ __forceinline__ T pytest_gpuenv_shfl_down(T var, unsigned int delta, int width = warpSize) {
    return __shfl_down_sync(__HIP_FULL_MASK, var, delta, width);
}
template <typename T>
static __device__ __forceinline__ T pytest_gpuenv_shfl_xor(T var, int lane_mask, int width = warpSize) {
    return __shfl_xor_sync(__HIP_FULL_MASK, var, lane_mask, width);
}
/* Macros, so they win over CUDA's own (deprecated, pre-Volta) non-sync declarations. */
#define __shfl(...) pytest_gpuenv_shfl(__VA_ARGS__)
#define __shfl_up(...) pytest_gpuenv_shfl_up(__VA_ARGS__)
#define __shfl_down(...) pytest_gpuenv_shfl_down(__VA_ARGS__)
#define __shfl_xor(...) pytest_gpuenv_shfl_xor(__VA_ARGS__)

/* Warp votes, HIP types (64-bit ballot). */
static __device__ __forceinline__ unsigned long long pytest_gpuenv_ballot(int predicate) {
    return (unsigned long long)__ballot_sync(__HIP_FULL_MASK, predicate);
}
static __device__ __forceinline__ int pytest_gpuenv_any(int predicate) { return __any_sync(__HIP_FULL_MASK, predicate); }
static __device__ __forceinline__ int pytest_gpuenv_all(int predicate) { return __all_sync(__HIP_FULL_MASK, predicate); }
#define __ballot(p) pytest_gpuenv_ballot(p)
#define __any(p) pytest_gpuenv_any(p)
#define __all(p) pytest_gpuenv_all(p)

static __device__ __forceinline__ unsigned int __lane_id(void) {
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

/* Atomics: atomicAdd, atomicSub, atomicMin, atomicMax, atomicExch, atomicCAS, atomicAnd, atomicOr,
 * atomicXor, atomicInc, atomicDec are CUDA built-ins with HIP's names; the HIP-only spellings: */
template <typename T>
static __device__ __forceinline__ T unsafeAtomicAdd(T* addr, T value) { return atomicAdd(addr, value); }
template <typename T>
static __device__ __forceinline__ T safeAtomicAdd(T* addr, T value) { return atomicAdd(addr, value); }

/* __launch_bounds__, __syncthreads, __threadfence, __shared__, __restrict__: CUDA built-ins. */

/* Half precision: __half, __half2 and their intrinsics from CUDA's cuda_fp16.h when it can be found
 * (pytest-gpuenv passes the CUDA toolkit's include directory to NVRTC when there is one). */
#if defined(__has_include)
#if __has_include(<cuda_fp16.h>)
#include <cuda_fp16.h>
#define PYTEST_GPUENV_HAVE_HALF 1
#endif
#endif

#endif /* GPUENV_CUDA_DIALECT */
#endif /* PYTEST_GPUENV_HIP_RUNTIME_H */
