// A kernel file as benchmark suites write one (pytest-gpuenv's own): host main with the HIP runtime API, error
// checks, event timing, <<<>>> and hipLaunchKernelGGL launches; the CPU executor builds it whole and runs its kernels.
#include <stdio.h>
#include <stdlib.h>
#include <chrono>
#include <string>
#include <hip/hip_runtime.h>

#define HIP_CHECK(call)                                                       \
  do {                                                                        \
    hipError_t err = call;                                                    \
    if (err != hipSuccess) {                                                  \
      fprintf(stderr, "%s at %s:%d\n", hipGetErrorString(err), __FILE__, __LINE__); \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

struct Pitched { hipPitchedPtr p; };

template <typename T, int N>
__global__ void scale(T* out, const T* in, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i] + N;
}

__global__ void fill(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

__global__ void pitched(hipPitchedPtr p) { ((char*)p.ptr)[threadIdx.x] = 1; }

template <typename T>
void run(int n, hipStream_t stream) {
  T *d_in, *d_out;
  HIP_CHECK(hipMalloc((void**)&d_in, n * sizeof(T)));
  HIP_CHECK(hipMalloc(&d_out, n * sizeof(T)));
  scale<T, 2><<<(n + 255) / 256, 256, 0, stream>>>(d_out, d_in, T(2), n);  // "k<<<a, b>>>(x)" in a comment
  const char* s = "k<<<1, 2>>>(x)"; (void)s;
  hipLaunchKernelGGL(HIP_KERNEL_NAME(scale<T, 3>), dim3((n + 255) / 256), dim3(256), 0, stream, d_out, d_in, T(2), n);
  HIP_CHECK(hipStreamSynchronize(stream));
  HIP_CHECK(hipFree(d_in));
  HIP_CHECK(hipFree(d_out));
}

int main(int argc, char* argv[]) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  int warp = 0;
  HIP_CHECK(hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, 0));
  printf("fill<<<%d, %d>>>\n", n, warp);  /* fill<<<1, 2>>>(x) in a comment */
  int* d;
  int* h = (int*)malloc(n * sizeof(int));
  HIP_CHECK(hipMalloc((void**)&d, n * sizeof(int)));
  HIP_CHECK(hipMemset(d, 0, n * sizeof(int)));
  hipEvent_t start, stop;
  HIP_CHECK(hipEventCreate(&start));
  HIP_CHECK(hipEventCreate(&stop));
  HIP_CHECK(hipEventRecord(start, 0));
  auto t0 = std::chrono::steady_clock::now();
  if (n > 0)
    fill<<<dim3((n + 255) / 256),
           dim3(256)>>>(d, n);
  else
    fill<<<1, 1>>>(d, 0);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipDeviceSynchronize());
  HIP_CHECK(hipEventRecord(stop, 0));
  HIP_CHECK(hipEventSynchronize(stop));
  float ms = 0;
  HIP_CHECK(hipEventElapsedTime(&ms, start, stop));
  HIP_CHECK(hipMemcpy(h, d, n * sizeof(int), hipMemcpyDeviceToHost));
  HIP_CHECK(hipMemcpy(d, h, n * sizeof(int), hipMemcpyHostToDevice));
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  run<float>(n, s);
  HIP_CHECK(hipStreamDestroy(s));
  void* pp; size_t pitch;
  HIP_CHECK(hipMallocPitch(&pp, &pitch, 64, 4));
  hipPitchedPtr p = make_hipPitchedPtr(pp, pitch, 64, 4);
  pitched<<<1, 64>>>(p);
  hipDeviceProp_t prop;
  HIP_CHECK(hipGetDeviceProperties(&prop, 0));
  HIP_CHECK(hipEventDestroy(start));
  HIP_CHECK(hipEventDestroy(stop));
  HIP_CHECK(hipFree(d));
  free(h);
  std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;
  printf("%f %f %d\n", ms, t.count(), prop.warpSize);
  return 0;
}

// host code that catches (main's argument parsing in HeCBench bitonic-sort)
int parse(const char* s) {
  try {
    return std::stoi(s);
  } catch (...) {
    return -1;
  }
}
