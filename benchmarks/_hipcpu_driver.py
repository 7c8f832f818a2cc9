"""The HIP-CPU side of benchmarks/cpu_exec.py: a C++ driver that runs the same kernel sources on AMD's
HIP-CPU, timed around its launch alone or around hipMemcpy in, the launch, hipMemcpy back."""

HIP_CPU_DRIVER = r"""#include <hip/hip_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#include "vector_add.hip"
#include "matmul_tiled.hip"
#include "block_sum.hip"

// the same inputs as benchmarks/cpu_exec.py's inputs(); argv: kernel, launches, file for the output
int main(int argc, char** argv) {
    const int n = 1 << 20, m = 256;
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) { a[i] = (i % 7) * 0.5f; b[i] = (i % 5) * 0.25f; }
    float *da, *db, *dout;
    hipMalloc((void**)&da, n * 4); hipMalloc((void**)&db, n * 4); hipMalloc((void**)&dout, n * 4);
    hipMemcpy(da, a.data(), n * 4, hipMemcpyHostToDevice);
    hipMemcpy(db, b.data(), n * 4, hipMemcpyHostToDevice);
    std::function<void()> launch;
    size_t out_n = n, in_n = n;
    int ins = 2;  // the inputs a user's call copies in: da (and db) from a (and b)
    if (!strcmp(argv[1], "vector_add")) {
        launch = [&] { hipLaunchKernelGGL(vector_add, dim3(n / 256), dim3(256), 0, 0, dout, da, db, n); };
    } else if (!strcmp(argv[1], "matmul_tiled")) {
        out_n = in_n = m * m;
        launch = [&] { hipLaunchKernelGGL(matmul_tiled, dim3(m / 16, m / 16), dim3(16, 16), 0, 0, dout, da, db, m, m, m); };
    } else {
        out_n = n / 256;
        ins = 1;
        launch = [&] { hipLaunchKernelGGL(block_sum, dim3(n / 256), dim3(256), 0, 0, dout, da, n); };
    }
    // argv[4] "copies": time what a user's call does (the inputs copied to device buffers, the launch, the
    // output copied back), else the launch alone
    const bool copies = argc > 4 && !strcmp(argv[4], "copies");
    std::vector<float> out(out_n);
    launch();
    hipDeviceSynchronize();
    for (int r = 0; r < atoi(argv[2]); ++r) {
        auto t = std::chrono::steady_clock::now();
        if (copies) {
            hipMemcpy(da, a.data(), in_n * 4, hipMemcpyHostToDevice);
            if (ins > 1) hipMemcpy(db, b.data(), in_n * 4, hipMemcpyHostToDevice);
        }
        launch();
        hipDeviceSynchronize();
        if (copies) hipMemcpy(out.data(), dout, out_n * 4, hipMemcpyDeviceToHost);
        printf("%.9f\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    }
    hipMemcpy(out.data(), dout, out_n * 4, hipMemcpyDeviceToHost);
    FILE* f = fopen(argv[3], "wb");
    fwrite(out.data(), 4, out_n, f);
    fclose(f);
    return 0;
}
"""
