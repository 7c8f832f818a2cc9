// Internal state shared by executor.cpp (fibers, scheduler, launch) and checks.cpp (memory checks).
#pragma once
#include "include/gpuenv_cpu.h"

#include <signal.h>
#include <setjmp.h>
#include <stdint.h>

namespace gx {

constexpr size_t kStack = 256 * 1024;
constexpr int kMaxThreads = 1024;
constexpr size_t kDynMax = 64 * 1024;
constexpr size_t kGranules = 32768;  // 4-byte granules: 64 KiB of static __shared__ variables and their red zones
constexpr uint16_t kMany = 0xFFFF;

enum TState : uint8_t { T_NEW, T_RUN, T_BAR, T_WARP, T_EXIT };

struct Fiber {
    char* map;
    char* lo;  // usable stack [lo, lo + kStack); the guard page is below lo
    void* sp;
    bool fresh;
#ifdef GPUENV_UCONTEXT
    void* uc;
#endif
};

struct Thread {
    uint8_t state;
    Fiber* fiber;
    void* site;
    int op, arg, width;
    uint64_t val, res;
};

struct Gran {  // shadow of 4 bytes of shared memory
    uint32_t wep, rep;
    uint16_t wt, rt, wws, rws;
    uint8_t wmask, rmask, init, pad;
};

struct Launch {
    gpuenv_launch_t* d;
    gpuenv_report_t* r;
    Thread threads[kMaxThreads];
    int nthreads, next_new, nlive, warp;
    int runq[kMaxThreads];
    int rq_head, rq_tail;
    int cur;
    Fiber* cur_fiber;
    void* sched_sp;
#ifdef GPUENV_UCONTEXT
    void* sched_uc;
#endif
    bool active, aborted;
    volatile sig_atomic_t wd_pending;
    uint32_t epoch;
    uint16_t warp_sync[kMaxThreads / 32];
    uintptr_t mod_base, text_lo, text_hi;
    uintptr_t seg_lo[8], seg_hi[8];
    int nseg;
    double t0;
    gpuenv_report_t pend;  // the first uninitialised shared read of this barrier interval
    sigjmp_buf jb;
};

extern Launch L;
extern Gran shadow_static[kGranules];
extern Gran shadow_dyn[kGranules];

// executor.cpp
__attribute__((noreturn)) void fail_in_fiber();
void set_where(gpuenv_report_t* r);
uint64_t pc_rel(const void* pc);
void textf(char* buf, size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
double now();

// checks.cpp
void reset_shadow();
void check_access(uintptr_t a, size_t size, bool write, void* pc);

}  // namespace gx
