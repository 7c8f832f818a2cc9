// <hip/hip_runtime_api.h> for the CPU executor (pytest-gpuenv): HIP's host runtime API, declared so that a
// kernel file as hipcc takes it (host main, its helpers, error-checking macros, launches) compiles whole.
// The executor runs kernels only: it never calls the file's host code, so every function here is a stub
// that stops the launch with a device assertion naming it if it is ever called (from a kernel: HIP host code
// cannot be called there). Names, types and parameters follow ROCm's hip_runtime_api.h and driver_types.h
// (clr, hipamd/include/hip/hip_runtime_api.h); enumerator values are ROCm's where code may compare them.
// A launch `k<<<grid, block, shared, stream>>>(args)` in host code is rewritten to
// `(__gpuenv_host::launch(grid, block, shared, stream), k(args))` (rtc/_cpu_rewrite.py: host_launches).
#pragma once
#include "hip_runtime.h"

#ifndef GPUENV_HOST_API_DECLARED
#define GPUENV_HOST_API_DECLARED

// ---------------------------------------------------------------- types
typedef enum hipError_t {
    hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2, hipErrorMemoryAllocation = 2,
    hipErrorNotInitialized = 3, hipErrorInitializationError = 3, hipErrorDeinitialized = 4,
    hipErrorInvalidConfiguration = 9, hipErrorInvalidPitchValue = 12, hipErrorInvalidSymbol = 13,
    hipErrorInvalidDevicePointer = 17, hipErrorInvalidMemcpyDirection = 21, hipErrorInsufficientDriver = 35,
    hipErrorMissingConfiguration = 52, hipErrorPriorLaunchFailure = 53, hipErrorInvalidDeviceFunction = 98,
    hipErrorNoDevice = 100, hipErrorInvalidDevice = 101, hipErrorInvalidImage = 200, hipErrorInvalidContext = 201,
    hipErrorContextAlreadyCurrent = 202, hipErrorMapFailed = 205, hipErrorUnmapFailed = 206,
    hipErrorNoBinaryForGpu = 209, hipErrorInvalidKernelFile = 218, hipErrorInvalidSource = 300,
    hipErrorFileNotFound = 301, hipErrorSharedObjectInitFailed = 303, hipErrorInvalidHandle = 400,
    hipErrorInvalidResourceHandle = 400, hipErrorIllegalState = 401, hipErrorNotFound = 500,
    hipErrorNotReady = 600, hipErrorIllegalAddress = 700, hipErrorLaunchOutOfResources = 701,
    hipErrorLaunchTimeOut = 702, hipErrorPeerAccessAlreadyEnabled = 704, hipErrorPeerAccessNotEnabled = 705,
    hipErrorSetOnActiveProcess = 708, hipErrorContextIsDestroyed = 709, hipErrorAssert = 710,
    hipErrorHostMemoryAlreadyRegistered = 712, hipErrorHostMemoryNotRegistered = 713, hipErrorLaunchFailure = 719,
    hipErrorCooperativeLaunchTooLarge = 720, hipErrorNotSupported = 801, hipErrorUnknown = 999,
} hipError_t;

typedef enum hipMemcpyKind {
    hipMemcpyHostToHost = 0, hipMemcpyHostToDevice = 1, hipMemcpyDeviceToHost = 2, hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4,
} hipMemcpyKind;

typedef enum hipDeviceAttribute_t {
    hipDeviceAttributeCudaCompatibleBegin = 0,
    hipDeviceAttributeEccEnabled = hipDeviceAttributeCudaCompatibleBegin, hipDeviceAttributeAccessPolicyMaxWindowSize,
    hipDeviceAttributeAsyncEngineCount, hipDeviceAttributeCanMapHostMemory,
    hipDeviceAttributeCanUseHostPointerForRegisteredMem, hipDeviceAttributeClockRate, hipDeviceAttributeComputeMode,
    hipDeviceAttributeComputePreemptionSupported, hipDeviceAttributeConcurrentKernels,
    hipDeviceAttributeConcurrentManagedAccess, hipDeviceAttributeCooperativeLaunch,
    hipDeviceAttributeCooperativeMultiDeviceLaunch, hipDeviceAttributeDeviceOverlap,
    hipDeviceAttributeDirectManagedMemAccessFromHost, hipDeviceAttributeGlobalL1CacheSupported,
    hipDeviceAttributeHostNativeAtomicSupported, hipDeviceAttributeIntegrated, hipDeviceAttributeIsMultiGpuBoard,
    hipDeviceAttributeKernelExecTimeout, hipDeviceAttributeL2CacheSize, hipDeviceAttributeLocalL1CacheSupported,
    hipDeviceAttributeLuid, hipDeviceAttributeLuidDeviceNodeMask, hipDeviceAttributeComputeCapabilityMajor,
    hipDeviceAttributeManagedMemory, hipDeviceAttributeMaxBlocksPerMultiProcessor, hipDeviceAttributeMaxBlockDimX,
    hipDeviceAttributeMaxBlockDimY, hipDeviceAttributeMaxBlockDimZ, hipDeviceAttributeMaxGridDimX,
    hipDeviceAttributeMaxGridDimY, hipDeviceAttributeMaxGridDimZ, hipDeviceAttributeMaxSurface1D,
    hipDeviceAttributeMaxSurface1DLayered, hipDeviceAttributeMaxSurface2D, hipDeviceAttributeMaxSurface2DLayered,
    hipDeviceAttributeMaxSurface3D, hipDeviceAttributeMaxSurfaceCubemap, hipDeviceAttributeMaxSurfaceCubemapLayered,
    hipDeviceAttributeMaxTexture1DWidth, hipDeviceAttributeMaxTexture1DLayered, hipDeviceAttributeMaxTexture1DLinear,
    hipDeviceAttributeMaxTexture1DMipmap, hipDeviceAttributeMaxTexture2DWidth, hipDeviceAttributeMaxTexture2DHeight,
    hipDeviceAttributeMaxTexture2DGather, hipDeviceAttributeMaxTexture2DLayered,
    hipDeviceAttributeMaxTexture2DLinear, hipDeviceAttributeMaxTexture2DMipmap, hipDeviceAttributeMaxTexture3DWidth,
    hipDeviceAttributeMaxTexture3DHeight, hipDeviceAttributeMaxTexture3DDepth, hipDeviceAttributeMaxTexture3DAlt,
    hipDeviceAttributeMaxTextureCubemap, hipDeviceAttributeMaxTextureCubemapLayered, hipDeviceAttributeMaxThreadsDim,
    hipDeviceAttributeMaxThreadsPerBlock, hipDeviceAttributeMaxThreadsPerMultiProcessor, hipDeviceAttributeMaxPitch,
    hipDeviceAttributeMemoryBusWidth, hipDeviceAttributeMemoryClockRate, hipDeviceAttributeComputeCapabilityMinor,
    hipDeviceAttributeMultiGpuBoardGroupID, hipDeviceAttributeMultiprocessorCount, hipDeviceAttributeName,
    hipDeviceAttributePageableMemoryAccess, hipDeviceAttributePageableMemoryAccessUsesHostPageTables,
    hipDeviceAttributePciBusId, hipDeviceAttributePciDeviceId, hipDeviceAttributePciDomainID,
    hipDeviceAttributePersistingL2CacheMaxSize, hipDeviceAttributeMaxRegistersPerBlock,
    hipDeviceAttributeMaxRegistersPerMultiprocessor, hipDeviceAttributeReservedSharedMemPerBlock,
    hipDeviceAttributeMaxSharedMemoryPerBlock, hipDeviceAttributeSharedMemPerBlockOptin,
    hipDeviceAttributeSharedMemPerMultiprocessor, hipDeviceAttributeSingleToDoublePrecisionPerfRatio,
    hipDeviceAttributeStreamPrioritiesSupported, hipDeviceAttributeSurfaceAlignment, hipDeviceAttributeTccDriver,
    hipDeviceAttributeTextureAlignment, hipDeviceAttributeTexturePitchAlignment, hipDeviceAttributeTotalConstantMemory,
    hipDeviceAttributeTotalGlobalMem, hipDeviceAttributeUnifiedAddressing, hipDeviceAttributeUuid,
    hipDeviceAttributeWarpSize, hipDeviceAttributeMemoryPoolsSupported, hipDeviceAttributeCudaCompatibleEnd = 9999,
    hipDeviceAttributeAmdSpecificBegin = 10000,
    hipDeviceAttributeClockInstructionRate = hipDeviceAttributeAmdSpecificBegin, hipDeviceAttributeArch,
    hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, hipDeviceAttributeGcnArch, hipDeviceAttributeGcnArchName,
    hipDeviceAttributeHdpMemFlushCntl, hipDeviceAttributeHdpRegFlushCntl,
    hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc, hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim,
    hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim,
    hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem, hipDeviceAttributeIsLargeBar,
    hipDeviceAttributeAsicRevision, hipDeviceAttributeCanUseStreamWaitValue, hipDeviceAttributeImageSupport,
    hipDeviceAttributePhysicalMultiProcessorCount, hipDeviceAttributeFineGrainSupport,
    hipDeviceAttributeWallClockRate, hipDeviceAttributeAmdSpecificEnd = 19999,
    hipDeviceAttributeVendorSpecificBegin = 20000,
} hipDeviceAttribute_t;

typedef enum hipFuncCache_t {
    hipFuncCachePreferNone, hipFuncCachePreferShared, hipFuncCachePreferL1, hipFuncCachePreferEqual,
} hipFuncCache_t;
typedef enum hipSharedMemConfig {
    hipSharedMemBankSizeDefault, hipSharedMemBankSizeFourByte, hipSharedMemBankSizeEightByte,
} hipSharedMemConfig;
typedef enum hipFuncAttribute {
    hipFuncAttributeMaxDynamicSharedMemorySize = 8, hipFuncAttributePreferredSharedMemoryCarveout = 9,
    hipFuncAttributeMax,
} hipFuncAttribute;
typedef enum hipMemoryAdvise {
    hipMemAdviseSetReadMostly = 1, hipMemAdviseUnsetReadMostly = 2, hipMemAdviseSetPreferredLocation = 3,
    hipMemAdviseUnsetPreferredLocation = 4, hipMemAdviseSetAccessedBy = 5, hipMemAdviseUnsetAccessedBy = 6,
} hipMemoryAdvise;

typedef struct ihipStream_t* hipStream_t;
typedef struct ihipEvent_t* hipEvent_t;
typedef struct ihipModule_t* hipModule_t;
typedef struct ihipModuleSymbol_t* hipFunction_t;
typedef void* hipDeviceptr_t;
typedef int hipDevice_t;

typedef struct hipPitchedPtr {
    void* ptr;
    size_t pitch;
    size_t xsize;
    size_t ysize;
} hipPitchedPtr;
typedef struct hipExtent {
    size_t width;
    size_t height;
    size_t depth;
} hipExtent;
typedef struct hipPos {
    size_t x;
    size_t y;
    size_t z;
} hipPos;
inline hipPitchedPtr make_hipPitchedPtr(void* d, size_t p, size_t xsz, size_t ysz) { return {d, p, xsz, ysz}; }
inline hipExtent make_hipExtent(size_t w, size_t h, size_t d) { return {w, h, d}; }
inline hipPos make_hipPos(size_t x, size_t y, size_t z) { return {x, y, z}; }
typedef struct hipMemcpy3DParms {
    void* srcArray;
    hipPos srcPos;
    hipPitchedPtr srcPtr;
    void* dstArray;
    hipPos dstPos;
    hipPitchedPtr dstPtr;
    hipExtent extent;
    hipMemcpyKind kind;
} hipMemcpy3DParms;

typedef struct hipDeviceArch_t {
    unsigned hasGlobalInt32Atomics : 1, hasGlobalFloatAtomicExch : 1, hasSharedInt32Atomics : 1,
        hasSharedFloatAtomicExch : 1, hasFloatAtomicAdd : 1, hasGlobalInt64Atomics : 1, hasSharedInt64Atomics : 1,
        hasDoubles : 1, hasWarpVote : 1, hasWarpBallot : 1, hasWarpShuffle : 1, hasFunnelShift : 1,
        hasThreadFenceSystem : 1, hasSyncThreadsExt : 1, hasSurfaceFuncs : 1, has3dGrid : 1, hasDynamicParallelism : 1;
} hipDeviceArch_t;
typedef struct hipDeviceProp_t {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    int memoryClockRate;
    int memoryBusWidth;
    size_t totalConstMem;
    int major;
    int minor;
    int multiProcessorCount;
    int l2CacheSize;
    int maxThreadsPerMultiProcessor;
    int computeMode;
    int clockInstructionRate;
    hipDeviceArch_t arch;
    int concurrentKernels;
    int pciDomainID;
    int pciBusID;
    int pciDeviceID;
    size_t maxSharedMemoryPerMultiProcessor;
    int isMultiGpuBoard;
    int canMapHostMemory;
    int gcnArch;
    char gcnArchName[256];
    int integrated;
    int cooperativeLaunch;
    int cooperativeMultiDeviceLaunch;
    int maxTexture1DLinear;
    int maxTexture1D;
    int maxTexture2D[2];
    int maxTexture3D[3];
    size_t memPitch;
    size_t textureAlignment;
    size_t texturePitchAlignment;
    int kernelExecTimeoutEnabled;
    int ECCEnabled;
    int tccDriver;
    int managedMemory;
    int directManagedMemAccessFromHost;
    int concurrentManagedAccess;
    int pageableMemoryAccess;
    int pageableMemoryAccessUsesHostPageTables;
    int asicRevision;
} hipDeviceProp_t;
typedef struct hipFuncAttributes {
    int binaryVersion;
    int cacheModeCA;
    size_t constSizeBytes;
    size_t localSizeBytes;
    int maxDynamicSharedSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int preferredShmemCarveout;
    int ptxVersion;
    size_t sharedSizeBytes;
} hipFuncAttributes;

// flags (ROCm's values)
#define hipStreamDefault 0x00
#define hipStreamNonBlocking 0x01
#define hipEventDefault 0x0
#define hipEventBlockingSync 0x1
#define hipEventDisableTiming 0x2
#define hipEventInterprocess 0x4
#define hipHostMallocDefault 0x0
#define hipHostMallocPortable 0x1
#define hipHostMallocMapped 0x2
#define hipHostMallocWriteCombined 0x4
#define hipHostMallocCoherent 0x40000000
#define hipHostMallocNonCoherent 0x80000000
#define hipHostRegisterDefault 0x0
#define hipHostRegisterPortable 0x1
#define hipHostRegisterMapped 0x2
#define hipMemAttachGlobal 0x01
#define hipMemAttachHost 0x02
#define hipDeviceScheduleAuto 0x0
#define hipDeviceMapHost 0x8
#define hipCooperativeLaunchMultiDeviceNoPreSync 0x01
#define hipCooperativeLaunchMultiDeviceNoPostSync 0x02
#define hipStreamPerThread ((hipStream_t)2)
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_SYMBOL(x) (&x)

// ---------------------------------------------------------------- functions: stubs, never run
#define GPUENV_HOST_ONLY(name)                                                                                 \
    gpuenv_assert_fail(#name ": HIP host code, which the CPU executor never runs (it runs the file's kernels)", \
                       __FILE__, __LINE__, #name)
#define GPUENV_HOST_API(ret, name, params) \
    inline ret name params { GPUENV_HOST_ONLY(name); }

GPUENV_HOST_API(hipError_t, hipMalloc, (void** ptr, size_t size))
GPUENV_HOST_API(hipError_t, hipMallocManaged, (void** dev_ptr, size_t size, unsigned int flags = hipMemAttachGlobal))
GPUENV_HOST_API(hipError_t, hipHostMalloc, (void** ptr, size_t size, unsigned int flags = hipHostMallocDefault))
GPUENV_HOST_API(hipError_t, hipMallocHost, (void** ptr, size_t size))
GPUENV_HOST_API(hipError_t, hipHostAlloc, (void** ptr, size_t size, unsigned int flags))
GPUENV_HOST_API(hipError_t, hipMallocPitch, (void** ptr, size_t* pitch, size_t width, size_t height))
GPUENV_HOST_API(hipError_t, hipMalloc3D, (hipPitchedPtr* pitchedDevPtr, hipExtent extent))
GPUENV_HOST_API(hipError_t, hipMallocAsync, (void** dev_ptr, size_t size, hipStream_t stream))
GPUENV_HOST_API(hipError_t, hipFree, (void* ptr))
GPUENV_HOST_API(hipError_t, hipFreeAsync, (void* dev_ptr, hipStream_t stream))
GPUENV_HOST_API(hipError_t, hipHostFree, (void* ptr))
GPUENV_HOST_API(hipError_t, hipFreeHost, (void* ptr))
GPUENV_HOST_API(hipError_t, hipHostRegister, (void* hostPtr, size_t sizeBytes, unsigned int flags))
GPUENV_HOST_API(hipError_t, hipHostUnregister, (void* hostPtr))
GPUENV_HOST_API(hipError_t, hipHostGetDevicePointer, (void** devPtr, void* hstPtr, unsigned int flags))
GPUENV_HOST_API(hipError_t, hipMemcpy, (void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind))
GPUENV_HOST_API(hipError_t, hipMemcpyAsync,
                (void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipMemcpyHtoD, (hipDeviceptr_t dst, void* src, size_t sizeBytes))
GPUENV_HOST_API(hipError_t, hipMemcpyDtoH, (void* dst, hipDeviceptr_t src, size_t sizeBytes))
GPUENV_HOST_API(hipError_t, hipMemcpyDtoD, (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes))
GPUENV_HOST_API(hipError_t, hipMemcpy2D, (void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                          size_t height, hipMemcpyKind kind))
GPUENV_HOST_API(hipError_t, hipMemcpy2DAsync, (void* dst, size_t dpitch, const void* src, size_t spitch,
                                               size_t width, size_t height, hipMemcpyKind kind, hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipMemcpy3D, (const struct hipMemcpy3DParms* p))
GPUENV_HOST_API(hipError_t, hipMemcpyPeer,
                (void* dst, int dstDeviceId, const void* src, int srcDeviceId, size_t sizeBytes))
GPUENV_HOST_API(hipError_t, hipMemcpyToSymbol, (const void* symbol, const void* src, size_t sizeBytes,
                                                size_t offset = 0, hipMemcpyKind kind = hipMemcpyHostToDevice))
GPUENV_HOST_API(hipError_t, hipMemcpyToSymbolAsync, (const void* symbol, const void* src, size_t sizeBytes,
                                                     size_t offset, hipMemcpyKind kind, hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipMemcpyFromSymbol, (void* dst, const void* symbol, size_t sizeBytes,
                                                  size_t offset = 0, hipMemcpyKind kind = hipMemcpyDeviceToHost))
GPUENV_HOST_API(hipError_t, hipMemcpyFromSymbolAsync, (void* dst, const void* symbol, size_t sizeBytes,
                                                       size_t offset, hipMemcpyKind kind, hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipGetSymbolAddress, (void** devPtr, const void* symbol))
GPUENV_HOST_API(hipError_t, hipGetSymbolSize, (size_t* size, const void* symbol))
GPUENV_HOST_API(hipError_t, hipMemset, (void* dst, int value, size_t sizeBytes))
GPUENV_HOST_API(hipError_t, hipMemsetAsync, (void* dst, int value, size_t sizeBytes, hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipMemsetD32, (hipDeviceptr_t dest, int value, size_t count))
GPUENV_HOST_API(hipError_t, hipMemset2D, (void* dst, size_t pitch, int value, size_t width, size_t height))
GPUENV_HOST_API(hipError_t, hipMemset3D, (hipPitchedPtr pitchedDevPtr, int value, hipExtent extent))
GPUENV_HOST_API(hipError_t, hipMemGetInfo, (size_t* free, size_t* total))
GPUENV_HOST_API(hipError_t, hipMemPrefetchAsync, (const void* dev_ptr, size_t count, int device,
                                                  hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipMemAdvise, (const void* dev_ptr, size_t count, hipMemoryAdvise advice, int device))
GPUENV_HOST_API(hipError_t, hipInit, (unsigned int flags))
GPUENV_HOST_API(hipError_t, hipDeviceSynchronize, (void))
GPUENV_HOST_API(hipError_t, hipDeviceReset, (void))
GPUENV_HOST_API(hipError_t, hipGetDevice, (int* deviceId))
GPUENV_HOST_API(hipError_t, hipSetDevice, (int deviceId))
GPUENV_HOST_API(hipError_t, hipSetDeviceFlags, (unsigned flags))
GPUENV_HOST_API(hipError_t, hipGetDeviceCount, (int* count))
GPUENV_HOST_API(hipError_t, hipGetDeviceProperties, (hipDeviceProp_t* prop, int deviceId))
GPUENV_HOST_API(hipError_t, hipDeviceGetAttribute, (int* pi, hipDeviceAttribute_t attr, int deviceId))
GPUENV_HOST_API(hipError_t, hipDeviceSetCacheConfig, (hipFuncCache_t cacheConfig))
GPUENV_HOST_API(hipError_t, hipDeviceSetSharedMemConfig, (hipSharedMemConfig config))
GPUENV_HOST_API(hipError_t, hipDeviceCanAccessPeer, (int* canAccessPeer, int deviceId, int peerDeviceId))
GPUENV_HOST_API(hipError_t, hipDeviceEnablePeerAccess, (int peerDeviceId, unsigned int flags))
GPUENV_HOST_API(hipError_t, hipDriverGetVersion, (int* driverVersion))
GPUENV_HOST_API(hipError_t, hipRuntimeGetVersion, (int* runtimeVersion))
GPUENV_HOST_API(hipError_t, hipGetLastError, (void))
GPUENV_HOST_API(hipError_t, hipPeekAtLastError, (void))
GPUENV_HOST_API(const char*, hipGetErrorString, (hipError_t hipError))
GPUENV_HOST_API(const char*, hipGetErrorName, (hipError_t hip_error))
GPUENV_HOST_API(hipError_t, hipStreamCreate, (hipStream_t* stream))
GPUENV_HOST_API(hipError_t, hipStreamCreateWithFlags, (hipStream_t* stream, unsigned int flags))
GPUENV_HOST_API(hipError_t, hipStreamCreateWithPriority, (hipStream_t* stream, unsigned int flags, int priority))
GPUENV_HOST_API(hipError_t, hipStreamDestroy, (hipStream_t stream))
GPUENV_HOST_API(hipError_t, hipStreamSynchronize, (hipStream_t stream))
GPUENV_HOST_API(hipError_t, hipStreamQuery, (hipStream_t stream))
GPUENV_HOST_API(hipError_t, hipStreamWaitEvent, (hipStream_t stream, hipEvent_t event, unsigned int flags = 0))
GPUENV_HOST_API(hipError_t, hipEventCreate, (hipEvent_t* event))
GPUENV_HOST_API(hipError_t, hipEventCreateWithFlags, (hipEvent_t* event, unsigned flags))
GPUENV_HOST_API(hipError_t, hipEventRecord, (hipEvent_t event, hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipEventSynchronize, (hipEvent_t event))
GPUENV_HOST_API(hipError_t, hipEventQuery, (hipEvent_t event))
GPUENV_HOST_API(hipError_t, hipEventElapsedTime, (float* ms, hipEvent_t start, hipEvent_t stop))
GPUENV_HOST_API(hipError_t, hipEventDestroy, (hipEvent_t event))
GPUENV_HOST_API(hipError_t, hipFuncGetAttributes, (struct hipFuncAttributes* attr, const void* func))
GPUENV_HOST_API(hipError_t, hipFuncSetAttribute, (const void* func, hipFuncAttribute attr, int value))
GPUENV_HOST_API(hipError_t, hipFuncSetCacheConfig, (const void* func, hipFuncCache_t config))
GPUENV_HOST_API(hipError_t, hipLaunchKernel, (const void* function_address, dim3 numBlocks, dim3 dimBlocks,
                                              void** args, size_t sharedMemBytes = 0, hipStream_t stream = 0))
GPUENV_HOST_API(hipError_t, hipLaunchCooperativeKernel, (const void* f, dim3 gridDim, dim3 blockDimX,
                                                         void** kernelParams, unsigned int sharedMemBytes,
                                                         hipStream_t stream))
GPUENV_HOST_API(hipError_t, hipOccupancyMaxActiveBlocksPerMultiprocessor,
                (int* numBlocks, const void* f, int blockSize, size_t dynSharedMemPerBlk))
GPUENV_HOST_API(hipError_t, hipOccupancyMaxPotentialBlockSize,
                (int* gridSize, int* blockSize, const void* f, size_t dynSharedMemPerBlk, int blockSizeLimit))

// ROCm's C++ overloads (hip_runtime_api.h, "#if defined(__cplusplus)")
template <class T> inline hipError_t hipMalloc(T** devPtr, size_t size) { GPUENV_HOST_ONLY(hipMalloc); }
template <class T> inline hipError_t hipHostMalloc(T** ptr, size_t size, unsigned int flags = hipHostMallocDefault) {
    GPUENV_HOST_ONLY(hipHostMalloc);
}
template <class T> inline hipError_t hipMallocManaged(T** devPtr, size_t size, unsigned int flags = hipMemAttachGlobal) {
    GPUENV_HOST_ONLY(hipMallocManaged);
}
template <class T> inline hipError_t hipGetSymbolAddress(void** devPtr, const T& symbol) {
    GPUENV_HOST_ONLY(hipGetSymbolAddress);
}
template <class T> inline hipError_t hipGetSymbolSize(size_t* size, const T& symbol) {
    GPUENV_HOST_ONLY(hipGetSymbolSize);
}
template <class T>
inline hipError_t hipMemcpyToSymbol(const T& symbol, const void* src, size_t sizeBytes, size_t offset = 0,
                                    hipMemcpyKind kind = hipMemcpyHostToDevice) {
    GPUENV_HOST_ONLY(hipMemcpyToSymbol);
}
template <class T>
inline hipError_t hipMemcpyToSymbolAsync(const T& symbol, const void* src, size_t sizeBytes, size_t offset,
                                         hipMemcpyKind kind, hipStream_t stream = 0) {
    GPUENV_HOST_ONLY(hipMemcpyToSymbolAsync);
}
template <class T>
inline hipError_t hipMemcpyFromSymbol(void* dst, const T& symbol, size_t sizeBytes, size_t offset = 0,
                                      hipMemcpyKind kind = hipMemcpyDeviceToHost) {
    GPUENV_HOST_ONLY(hipMemcpyFromSymbol);
}
template <class T>
inline hipError_t hipMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t sizeBytes, size_t offset,
                                           hipMemcpyKind kind, hipStream_t stream = 0) {
    GPUENV_HOST_ONLY(hipMemcpyFromSymbolAsync);
}
template <class T>
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, T f, int blockSize,
                                                               size_t dynSharedMemPerBlk) {
    GPUENV_HOST_ONLY(hipOccupancyMaxActiveBlocksPerMultiprocessor);
}
template <class T>
inline hipError_t hipOccupancyMaxPotentialBlockSize(int* gridSize, int* blockSize, T f, size_t dynSharedMemPerBlk = 0,
                                                    int blockSizeLimit = 0) {
    GPUENV_HOST_ONLY(hipOccupancyMaxPotentialBlockSize);
}
template <class T>
inline hipError_t hipLaunchCooperativeKernel(T f, dim3 gridDim, dim3 blockDim, void** kernelParams,
                                             unsigned int sharedMemBytes, hipStream_t stream) {
    GPUENV_HOST_ONLY(hipLaunchCooperativeKernel);
}

// ---------------------------------------------------------------- launches in host code
namespace __gpuenv_host {
// what a host-code launch is rewritten to evaluate before its call of the kernel (never run)
template <class _Gpuenv_G, class _Gpuenv_B>
inline void launch(_Gpuenv_G, _Gpuenv_B, size_t = 0, hipStream_t = 0) {
    GPUENV_HOST_ONLY(kernel launch);
}
}  // namespace __gpuenv_host
// (ROCm: hipLaunchKernelGGLInternal, a <<<>>> launch); the kernel is called unparenthesised so that a
// template kernel's arguments are deduced from the call's, as a launch deduces them
#define hipLaunchKernelGGL(kernelName, numBlocks, numThreads, memPerBlock, streamId, ...) \
    (::__gpuenv_host::launch(numBlocks, numThreads, memPerBlock, streamId), kernelName(__VA_ARGS__))
#define hipLaunchKernelNoBarrier hipLaunchKernelGGL

#endif  // GPUENV_HOST_API_DECLARED
