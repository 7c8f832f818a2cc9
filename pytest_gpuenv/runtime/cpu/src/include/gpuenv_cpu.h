// The ABI between the CPU executor (src/, README.md) and kernels compiled for it, and the launch's structs.
// Kernels include it through <hip/hip_runtime.h>; runtime/cpu/protocol.py declares the structs Python fills
// or reads (gpuenv_launch_t, gpuenv_report_t, gpuenv_region_t, gpuenv_worker_t), and the build checks these
// against it field by field (src/protocol.h).
#pragma once
#include <stddef.h>
#include <stdint.h>

extern "C" {

struct gpuenv_u3 {
    unsigned x, y, z;
};

// What device code reads: the running thread's coordinates and the block's dynamic shared memory. Each
// kernel module defines its own (hip_runtime.h, GPUENV_ENTRY), so that every copy of a module loaded for a
// worker thread has one: blocks of a launch run on several OS threads, each thread on its own copy.
struct gpuenv_state_t {
    gpuenv_u3 tid;
    unsigned lin;  // linear thread id within the block (after tid: the executor writes the two in one 16-byte store)
    gpuenv_u3 bid, bdim, gdim;
    // the module's entry may start the threads after this one, up to `end`, itself (hip_runtime.h:
    // next_inline): the executor sets it when it starts a thread not started before (the block's newest), 0
    // when it resumes one that waited, and always 0 in checked and lockstep launches
    unsigned end;
    char* dyn_shared;
};

// A worker thread's copy of the kernel module: its entry and its __gpuenv_state.
struct gpuenv_worker_t {
    void (*entry)(void**);
    gpuenv_state_t* state;
};

enum {
    GPUENV_OP_SHFL = 1, GPUENV_OP_UP, GPUENV_OP_DOWN, GPUENV_OP_XOR,
    GPUENV_OP_BALLOT, GPUENV_OP_ANY, GPUENV_OP_ALL, GPUENV_OP_SYNCWARP
};

enum {
    GPUENV_OK = 0, GPUENV_RACE, GPUENV_BARRIER, GPUENV_BOUNDS, GPUENV_UNINIT, GPUENV_ASSERT,
    GPUENV_STACK, GPUENV_WATCHDOG, GPUENV_WARP, GPUENV_FAULT, GPUENV_USAGE,
    GPUENV_WARPSYNC = 13,  // 11 and 12 are the parent's (runtime/cpu/protocol.py: KIND_EXIT, KIND_PROCESS)
    GPUENV_GRID,           // grid.sync(): not a cooperative launch, or a block that never reaches it
    GPUENV_WARPMASK        // a *_sync function's lanes passed masks that ROCm traps on (warps.cpp)
};

// gpuenv_launch_t.check: bit 0 checks loads and stores, bit 1 runs each wavefront in lockstep, bit 2 lets
// the blocks run on several worker threads (the module has no __device__ variables; unchecked only), bit 3
// makes it a cooperative launch (every block resident at once, for grid.sync(): coop.cpp)
enum { GPUENV_CHECK_ACCESS = 1, GPUENV_LOCKSTEP = 2, GPUENV_PARALLEL = 4, GPUENV_COOPERATIVE = 8 };

// barrier flavours (__syncthreads, __syncthreads_count/_and/_or)
enum { GPUENV_BAR_PLAIN = 0, GPUENV_BAR_COUNT, GPUENV_BAR_AND, GPUENV_BAR_OR };

// region kinds in a report
enum { GPUENV_R_NONE = 0, GPUENV_R_ARG, GPUENV_R_SHARED, GPUENV_R_DYN, GPUENV_R_STACK };

struct gpuenv_region_t {
    uint64_t base, size;
    int32_t readonly, index;
};

struct gpuenv_report_t {
    int32_t kind, is_write, size, region_kind, region_index, other_thread;
    int32_t other_is_write, pad;  // a race's other access: a write or a read, at other_pc (0: unknown)
    int64_t offset;
    uint64_t addr, pc, other_pc;
    uint32_t block[3], thread[3];
    char text[2048];
    char warnings[2048];
};

struct gpuenv_launch_t {
    void (*entry)(void**);
    void** args;
    uint32_t grid[3], block[3];
    uint64_t shared_bytes;
    int32_t warp_size, check;
    char* shared_lo;  // unused (the variables below say where shared memory is)
    char* shared_hi;
    const gpuenv_region_t* regions;
    int32_t nregions, nvars;
    // static __shared__ variables and their red zones, sorted by address: base is the offset from the
    // kernel module's load address, readonly is 1 for a red zone, index the variable's number (-1: red zone)
    const gpuenv_region_t* vars;
    double watchdog_s;
    char* out;
    uint64_t out_cap, out_len;
    // the worker threads' copies of the module (workers[0] is the calling thread's; entry is its entry)
    int32_t nworkers, pad;
    const gpuenv_worker_t* workers;
};

int gpuenv_launch(gpuenv_launch_t* d, gpuenv_report_t* r);
// A barrier or warp operation is identified by its source position (file, line * 1024 + column), as the
// header's __builtin_FILE/LINE/COLUMN default arguments give it: code the compiler duplicates stays one site.
// A barrier's `site` is that position * 4 + its flavour (GPUENV_BAR_*), so that one comparison tells both;
// `value` is its predicate as 0 or 1 (0 for a plain __syncthreads).
static inline int gpuenv_where_line(int where) { return where >> 10; }  // a position's line
static inline int gpuenv_site_line(int site) { return site >> 12; }     // a barrier site's line
static inline int gpuenv_site_flavour(int site) { return site & 3; }    // a barrier site's GPUENV_BAR_*
int gpuenv_barrier(const char* file, int site, int value);
void gpuenv_sync(const char* file, int site);  // a plain __syncthreads: gpuenv_barrier(file, site, 0)
// The module's entry runs the thread the executor started, then asks for the next one: the call returns when
// this fiber is to run the kernel again, for the thread __gpuenv_state names (when none is left to start, the
// fiber waits inside the call until it starts a thread again; the entry never returns within a launch).
void gpuenv_next_thread(void);
uint64_t gpuenv_warp_op(int op, uint64_t value, int arg, int width, const char* file, int where);
// a *_sync function's operation: as gpuenv_warp_op, the lane passing `mask` (checked mode checks the masks)
uint64_t gpuenv_warp_op_mask(int op, uint64_t value, int arg, int width, uint64_t mask, const char* file, int where);
// grid.sync() (hip_cooperative_groups.h): thread 0 of each block waits for every block (a cooperative
// launch), else the launch stops with a report; gpuenv_grid_valid: whether this launch is cooperative
void gpuenv_grid_wait(const char* file, int where);
int gpuenv_grid_valid(void);
void gpuenv_atomic_check(void* p, int size, void* pc);
__attribute__((__noreturn__)) void gpuenv_assert_fail(const char* expr, const char* file, unsigned line, const char* fn);
__attribute__((__noreturn__)) void gpuenv_trap(void);
__attribute__((__format__(printf, 1, 2))) int gpuenv_printf(const char* fmt, ...);
}
