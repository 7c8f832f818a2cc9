// The launch request's parser: the payload the parent wrote (runtime/cpu/__init__.py), read here, not in
// the server's Python (which only reads the pipe, handles the module's symbol sections and picks the
// workers): its static __shared__ variables, __device__ variables and argument buffers become the launch's
// regions, its argument values are copied into storage of their own, pointers made addresses in the arena;
// then gpuenv_launch runs it. A request that is cut short or names memory outside the arena is refused
// before anything runs. Its parts' layout is protocol.py's (protocol.h).
#include "executor_int.h"
#include "protocol.h"

#include <stdlib.h>
#include <string.h>

namespace gx {
namespace {

constexpr size_t kBlobAlign = 64;           // the argument values' storage (a larger alignment: kept modulo this)

// Buffers kept from request to request (the server serves one at a time).
gpuenv_region_t *vars_buf, *regions_buf;
void** argv_buf;
char* blob_buf;
size_t vars_cap, regions_cap, argv_cap, blob_cap;

template <class T>
T* room(T*& buf, size_t& cap, size_t n) {
    if (n <= cap) return buf;
    free(buf);
    cap = n < 16 ? 16 : n;
    if (posix_memalign((void**)&buf, kBlobAlign, cap * sizeof(T))) {
        buf = nullptr;
        cap = 0;
    }
    return buf;
}

// The bytes that bring `used` to a multiple of `align` (at most kBlobAlign: the storage's own alignment).
uint64_t pad(uint64_t used, uint32_t align) {
    uint64_t a = align < 1 ? 1 : align > kBlobAlign ? kBlobAlign : align;
    return (a - used % a) % a;
}

// `n` items of `size` bytes at *pos, within len: their start, and *pos moved past them; nullptr if they overrun.
const uint8_t* take(const uint8_t* p, uint64_t len, uint64_t* pos, uint64_t n, uint64_t size) {
    if (n > len || *pos > len || size * n > len - *pos) return nullptr;
    const uint8_t* at = p + *pos;
    *pos += size * n;
    return at;
}

}  // namespace
}  // namespace gx

using namespace gx;

// Runs the launch request `p` (`len` bytes, its symbol sections already handled: `pos` is where the
// SVAR section starts) on the module whose workers are given (workers[0] is the module itself), its
// argument copies at `base` (the arena in this process). Returns the device printf bytes written, or -1 if
// the request is malformed (nothing ran). The report is at `report`, the printf output at `out`.
extern "C" __attribute__((visibility("default"))) int64_t gpuenv_server_launch(
    const uint8_t* p, uint64_t len, uint64_t pos, char* base, gpuenv_report_t* report, char* out, uint64_t out_cap,
    char* shared_lo, char* shared_hi, uint64_t glo, uint64_t ghi, const gpuenv_worker_t* workers, int32_t nworkers) {
    launch_head_t h;
    if (len < sizeof h || nworkers < 1) return -1;
    memcpy(&h, p, sizeof h);
    if (h.nvars < 0 || h.nregions < 0 || h.nvalues < 0 || h.nglobals < 0 ||
        (uint64_t)h.nvalues * sizeof(value_t) > len)
        return -1;
    const uint8_t* svars = take(p, len, &pos, h.nvars, sizeof(svar_t));
    const uint8_t* gvars = take(p, len, &pos, h.nglobals, sizeof(var_t));
    const uint8_t* regs = take(p, len, &pos, h.nregions, sizeof(region_in_t));
    if (!svars || !gvars || !regs) return -1;
    // __device__ variables (parameter index -1 - i) and, after them, their section's red zones
    uint64_t nextra = ghi > glo && h.nglobals ? (uint64_t)h.nglobals + 1 : 0;
    gpuenv_region_t* vars = room(vars_buf, vars_cap, h.nvars ? h.nvars : 1);
    gpuenv_region_t* rs = room(regions_buf, regions_cap, h.nregions + nextra + 1);
    void** argv = room(argv_buf, argv_cap, h.nvalues ? h.nvalues : 1);
    if (!vars || !rs || !argv) return -1;
    for (int32_t i = 0; i < h.nvars; i++) {
        svar_t v;
        memcpy(&v, svars + i * sizeof v, sizeof v);
        vars[i] = {v.off, v.size, v.index < 0, v.index};
    }
    int32_t nr = 0;
    for (int32_t i = 0; i < h.nregions; i++) {
        region_in_t r;
        memcpy(&r, regs + i * sizeof r, sizeof r);
        if (r.off > h.arena_bytes || r.size > h.arena_bytes - r.off) return -1;  // (offsets in the arena)
        rs[nr++] = {(uint64_t)(uintptr_t)(base + r.off), r.size, r.readonly, r.index};
    }
    for (uint64_t i = 0; i + 1 < nextra; i++) {
        var_t v;
        memcpy(&v, gvars + i * sizeof v, sizeof v);
        if (v.off > ghi - glo || v.size > ghi - glo - v.off) return -1;  // (offsets in the globals section)
        rs[nr++] = {glo + v.off, v.size, 0, -1 - (int32_t)i};
    }
    if (nextra) rs[nr++] = {glo, ghi - glo, kRoRedzone, -1};
    // the argument values, each at its alignment in one block of storage
    uint64_t start = pos, used = 0;
    for (int32_t i = 0; i < h.nvalues; i++) {
        const uint8_t* at = take(p, len, &pos, 1, sizeof(value_t));
        value_t v;
        if (!at) return -1;
        memcpy(&v, at, sizeof v);
        const uint8_t* data = take(p, len, &pos, 1, v.size);
        uint64_t off = 0;
        if (data && v.kind == kValueArena) {
            if (v.size == 8) memcpy(&off, data, 8);
            if (v.size != 8 || off > h.arena_bytes) return -1;
        }
        if (!data) return -1;
        used += pad(used, v.align) + v.size;
    }
    char* blob = room(blob_buf, blob_cap, used + 1);
    if (!blob) return -1;
    pos = start;
    used = 0;
    for (int32_t i = 0; i < h.nvalues; i++) {
        value_t v;
        memcpy(&v, p + pos, sizeof v);
        pos += sizeof v;
        used += pad(used, v.align);
        argv[i] = blob + used;
        if (v.kind == kValueArena) {
            uint64_t off;
            memcpy(&off, p + pos, 8);
            char* ptr = base + off;
            memcpy(blob + used, &ptr, 8);
        } else {
            memcpy(blob + used, p + pos, v.size);
        }
        pos += v.size;
        used += v.size;
    }
    blob[used++] = 0;
    // read-only and registered: a struct passed by value may be copied from here with memcpy
    rs[nr++] = {(uint64_t)(uintptr_t)blob, used, 1, kArgsIndex};
    gpuenv_launch_t d = {};
    d.entry = workers[0].entry;
    d.args = argv;
    memcpy(d.grid, h.grid, sizeof d.grid);
    memcpy(d.block, h.block, sizeof d.block);
    d.shared_bytes = h.shared_bytes;
    d.warp_size = h.warp_size;
    d.check = h.check & 0xFF;
    d.shared_lo = shared_lo;
    d.shared_hi = shared_hi;
    d.regions = rs;
    d.nregions = nr;
    d.nvars = h.nvars;
    d.vars = vars;
    d.watchdog_s = h.watchdog_s;
    d.out = out;
    d.out_cap = out_cap;
    d.nworkers = nworkers;
    d.workers = workers;
    gpuenv_launch(&d, report);
    return (int64_t)d.out_len;
}
