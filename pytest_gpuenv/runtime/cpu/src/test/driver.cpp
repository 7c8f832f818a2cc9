// The executor outside pytest: loads the library and a kernel module as runtime/cpu/server.py does (the
// executor's symbols global), builds launch requests as runtime/cpu/__init__.py does (protocol.h's parts)
// and runs them through gpuenv_server_launch, then checks the results, the printf output and a report.
//   driver EXECUTOR.so KERNEL_FAST.so KERNEL_CHECKED.so [LAUNCHES]
// (LAUNCHES: run the unchecked launch that many times more, for a profiler: valgrind --tool=callgrind)
#include "../protocol.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tuple>
#include <utility>
#include <vector>

using namespace gx;

namespace {

using server_init_t = int (*)(void*);
using server_launch_t = int64_t (*)(const uint8_t*, uint64_t, uint64_t, char*, gpuenv_report_t*, char*, uint64_t,
                                    char*, char*, uint64_t, uint64_t, const gpuenv_worker_t*, int32_t);
using range_t = void (*)(char**, char**);

constexpr int kBlock = 64, kBlocks = 4, kN = kBlock * kBlocks;
constexpr uint64_t kIn = 4096, kOut = kIn + kN * sizeof(float), kArena = 1 << 16, kOutCap = 4096;

int failures = 0;

void expect(bool ok, const char* what) {
    printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
}

void* sym(void* lib, const char* name) {
    void* p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "driver: no %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

template <class T>
void put(std::vector<uint8_t>& out, const T& part) {
    const uint8_t* p = (const uint8_t*)&part;
    out.insert(out.end(), p, p + sizeof part);
}

struct Module {
    gpuenv_worker_t worker;
    char *lo, *hi, *glo, *ghi;
};

Module load(const char* path) {
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "driver: %s\n", dlerror());
        exit(2);
    }
    Module m;
    m.worker.entry = (void (*)(void**))sym(lib, "__gpuenv_entry");
    m.worker.state = ((gpuenv_state_t * (*)()) sym(lib, "__gpuenv_state_ptr"))();
    ((range_t)sym(lib, "__gpuenv_shared_range"))(&m.lo, &m.hi);
    ((range_t)sym(lib, "__gpuenv_globals_range"))(&m.glo, &m.ghi);
    return m;
}

// scale(out, in, kN) on kBlocks blocks of kBlock threads: the request as runtime/cpu/__init__.py writes it
// (no symbol sections, no static __shared__ variables registered), the two buffers as regions of the arena
// (`in`: in_bytes of it)
std::vector<uint8_t> request(int32_t check, uint64_t in_bytes) {
    std::vector<uint8_t> p;
    launch_head_t h = {};
    h.grid[0] = kBlocks;
    h.grid[1] = h.grid[2] = 1;
    h.block[0] = kBlock;
    h.block[1] = h.block[2] = 1;
    h.arena_bytes = kArena;
    h.watchdog_s = 10;
    h.warp_size = 32;
    h.check = check;
    h.nregions = 2;
    h.nvalues = 3;
    put(p, h);
    put(p, region_in_t{kOut, kN * sizeof(float), 0, 0});
    put(p, region_in_t{kIn, in_bytes, 1, 1});
    for (uint64_t off : {kOut, kIn}) {
        put(p, value_t{kValueArena, {}, 8, 8});
        put(p, off);
    }
    put(p, value_t{kValueBytes, {}, 4, 4});
    put(p, (int32_t)kN);
    return p;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: driver EXECUTOR.so KERNEL_FAST.so KERNEL_CHECKED.so [LAUNCHES]\n");
        return 2;
    }
    void* exe = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!exe) {
        fprintf(stderr, "driver: %s\n", dlerror());
        return 2;
    }
    static gpuenv_note_t note;
    ((server_init_t)sym(exe, "gpuenv_server_init"))(&note);
    auto launch = (server_launch_t)sym(exe, "gpuenv_server_launch");
    Module fast = load(argv[2]), checked = load(argv[3]);
    char* arena = (char*)aligned_alloc(4096, kArena);
    static char out[kOutCap];
    static gpuenv_report_t report;
    float* in = (float*)(arena + kIn);
    float* res = (float*)(arena + kOut);

    auto run = [&](const Module& m, int32_t check, uint64_t in_bytes) {
        for (int i = 0; i < kN; i++) in[i] = (float)i, res[i] = -1;
        out[0] = 0;
        std::vector<uint8_t> p = request(check, in_bytes);
        int64_t len = launch(p.data(), p.size(), sizeof(launch_head_t), arena, &report, out, kOutCap, m.lo, m.hi,
                             (uint64_t)m.glo, (uint64_t)m.ghi, &m.worker, 1);
        bool right = true;
        for (int i = 0; i < kN; i++) right &= res[i] == 2.0f * (float)(i / kBlock * kBlock + kBlock - 1 - i % kBlock);
        return std::make_pair(len, right);
    };

    for (auto [m, check, name] : {std::make_tuple(&fast, 0, "unchecked"), std::make_tuple(&checked, 1, "checked")}) {
        auto [len, right] = run(*m, check, kN * sizeof(float));
        printf("%s launch: report kind %d, output %s", name, report.kind, out);
        expect(report.kind == GPUENV_OK && right, "every block reverses its slice through shared memory");
        expect(len == (int64_t)strlen(out) && !strcmp(out, "scale: 4 blocks\n"), "device printf, once");
    }
    run(checked, 1, (kN - 1) * sizeof(float));  // the last element of `in` left out
    printf("checked launch, `in` one element short: report kind %d, argument %d, offset %lld, block %u thread %u\n",
           report.kind, report.region_index, (long long)report.offset, report.block[0], report.thread[0]);
    expect(report.kind == GPUENV_BOUNDS && report.region_kind == GPUENV_R_ARG && report.region_index == 1 &&
               report.offset == (kN - 1) * sizeof(float) && report.block[0] == kBlocks - 1 &&
               report.thread[0] == kBlock - 1,
           "a read past `in` stops the launch, naming the argument, the offset, the block and the thread");
    for (int i = argc > 4 ? atoi(argv[4]) : 0; i > 0; i--) run(fast, 0, kN * sizeof(float));
    expect(note.kind == 0, "no death note");
    printf("%s\n", failures ? "driver: FAILED" : "driver: OK");
    return failures ? 1 : 0;
}
