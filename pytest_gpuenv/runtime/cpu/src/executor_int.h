// The executor's internal header, included by every source file of src/ (README.md maps them): its limits,
// a worker's launch state (Launch) and, below it, the functions one file defines for the others, under the
// name of the file that defines them. Everything here has hidden visibility: the library exports the
// extern "C" entry points of include/gpuenv_cpu.h and the checked mode's, nothing of namespace gx.
#pragma once
#include "include/gpuenv_cpu.h"

#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace gx __attribute__((visibility("hidden"))) {

constexpr size_t kStack = 256 * 1024;
constexpr int kMaxThreads = 1024;
constexpr size_t kDynMax = 160 * 1024;      // the largest shared memory of a block: gfx950's LDS (rtc/target.py)
constexpr size_t kShadowBytes = 160 * 1024;  // shadowed shared memory per kind (static, dynamic)
constexpr int kMaxVars = 1024;              // static __shared__ variables and red zones per module
constexpr uint16_t kMany = 0xFFFF;
constexpr int kExitSite = -2;  // Launch::bar_where of a round-robin interval whose threads return
constexpr int32_t kRoRedzone = 2;           // gpuenv_region_t.readonly of the __device__ variables' section: red zones between them
// the tag a warning line starts with when it is a barrier that threads which returned never reached
// (runtime/cpu/report.py: warnings_of makes it a KernelBarrierWarning)
constexpr const char* kBarrierWarning = "[barrier]";
constexpr int32_t kArgsIndex = -(1 << 20);  // gpuenv_region_t.index of the argument values' own storage (request.cpp)

// What a released barrier returns to each thread: __syncthreads_count/_and/_or of `count` predicates set
// among `n` threads (0 for a plain __syncthreads)
inline int barrier_result(int flavour, int count, int n) {
    return flavour == GPUENV_BAR_COUNT ? count : flavour == GPUENV_BAR_AND ? count == n
         : flavour == GPUENV_BAR_OR ? count > 0 : 0;
}

// T_LOCK: in lockstep mode, waiting before a shared-memory access until every lane of its wave is there
// (a thread that returned keeps T_NEW or T_RUN: when no thread can run, those are the ones that returned;
// T_EXIT + 1 marks threads already listed in a barrier report)
enum TState : uint8_t { T_NEW, T_RUN, T_BAR, T_WARP, T_LOCK, T_EXIT };

struct Fiber {
    char* map;
    char* lo;  // usable stack [lo, lo + kStack); the guard page is below lo
    void* sp;  // while it is free (no thread waits on it): its saved stack pointer
    size_t color;  // bytes left unused at the stack's top (stack colouring, fiber_switch.h)
#ifdef GPUENV_UCONTEXT
    void* uc;
#endif
};

struct Thread {
    uint8_t state;
    uint8_t op;        // warp operation (with arg and width, its operands)
    uint8_t masked;    // a *_sync function's: mask is the lane's (gpuenv_warp_op_mask)
    Fiber* fiber;
    void* site;        // return address of the barrier / warp operation call (for file:line in reports)
    const char* file;  // with `where` (line * 1024 + column; a barrier's: its site, gpuenv_cpu.h): the site's identity
    int where;
    int arg, width;
    uint64_t val, res;   // the thread's value in, the result out
    uint64_t mask;
};

// Shadow of one byte of shared memory (byte-granular: per-thread char/short elements are no race), 16
// bytes so that a block's shadow stays in cache. Epochs count barrier intervals from 1 in each block
// (0: never this block); they wrap at 0xFFFF, when every entry's epochs are cleared (shadow_new_epoch).
// Sites are the accesses' code addresses as numbers (site_of: 0 when the table is full), so that a race's
// report names the line of the earlier access too.
struct Shadow {
    uint16_t wep;   // epoch of the last write
    uint16_t rep;   // epoch of the reads recorded in rt/rwave/rws
    uint16_t wt;    // linear thread id of the last writer
    uint16_t rt;    // linear thread id of the reader in epoch rep, kMany when several threads read
    uint8_t wws;    // the writer's wave warp-sync count (Launch::warp_sync, mod 256) at the write
    uint8_t rws;    // the highest warp-sync count among the readers of epoch rep
    uint8_t rwave;  // the wave of every reader of epoch rep, kManyWaves when readers came from several
    uint8_t init;   // written since the block started
    uint16_t wsite;  // the last write's site
    uint16_t rsite;  // the site of the last read of epoch rep
};
constexpr uint8_t kManyWaves = 0xFF;
// checks.cpp loads and stores an entry as two little-endian uint64_t: (wep, rep, wt, rt) and the rest
static_assert(sizeof(Shadow) == 16 && offsetof(Shadow, wws) == 8, "the shadow's packed layout");
constexpr int kSiteSlots = 4096;  // the access sites a checked launch numbers (open addressing, at most 3/4 full)

// A write to shared memory whose only conflict is an earlier write of this interval by another thread: it is
// a race only if it changes the bytes (a write of the same value is none, as compute-sanitizer's racecheck
// and the hardware have it). The hook runs before the store, so the bytes are compared at the next checked
// access or at the interval's end (checks.cpp: settle_held_write).
struct HeldWrite {
    bool on;
    int kind;  // checks.cpp's RACE or WAVE_ONLY (between lanes of one wave)
    int rkind, rindex, size, t, other;
    uint16_t other_site;
    uint16_t mask;  // the bytes of the access that conflict
    int64_t rel;
    uintptr_t a;
    void* pc;
    uint8_t old[16];  // those bytes before the store
};

// A static __shared__ variable or red zone, at its absolute address in this process.
struct SVar {
    uintptr_t lo, hi;
    int index;      // the variable's number in reports, -1 for a red zone
    uint32_t shad;  // offset of its shadow in shadow_static
};

constexpr int kMaxWorkers = 64;
// the fibers the workers keep (each a stack and its guard page: two of the process's ~65,530 mappings): a
// parallel launch takes fewer workers, a cooperative one (a fiber per thread of the grid) no more threads,
// and the helpers give theirs back after a launch that left more (launch.cpp)
constexpr int kFibers = 16384;

// A region of the launch (an argument buffer or a __device__ variable) that let an access through: a later
// access inside it, reading or (writable) writing, passes as the walk over every region would pass it.
struct RegionHit {
    uintptr_t lo, hi;
    bool writable;
};
constexpr int kRegionHits = 4;

// One worker's launch state: each OS thread that runs blocks (launch.cpp) has its own, reached through
// current_launch(); fibers never move between threads, so a fiber's launch state stays its own.
struct Launch {
    gpuenv_launch_t* d;
    gpuenv_report_t* r;       // the caller's report (worker 0) or rep (a helper worker)
    void (*entry)(void**);    // this worker's copy of the kernel module
    gpuenv_state_t* st;       // and that copy's gpuenv_state (threadIdx & co.)
    int worker;
    uint64_t block;           // linear index of the running block
    Fiber* pool[kMaxThreads + 1];
    Fiber* freelist[kMaxThreads + 1];
    int npool, nfree;
    char* dyn_buf;            // dynamic shared memory, a guard page after it
    char* alt_stack;          // the signal stack of a helper worker's thread
    char* out;                // device printf: the caller's buffer (one worker) or this worker's
    uint64_t out_cap, out_len;
    uint64_t* segs;           // with several workers: (block, start in out) of each block's printf output
    int nsegs, segs_cap;
    char* own_out;            // this worker's printf buffer and segments, kept from launch to launch
    uint64_t own_cap;
    uint64_t* own_segs;
    gpuenv_report_t rep;
    Thread threads[kMaxThreads];
    // each thread's threadIdx and linear id, as gpuenv_state starts: a switch writes them in one store (set_tid)
    struct alignas(16) Ids {
        gpuenv_u3 tid;
        unsigned lin;
    } ids[kMaxThreads];
    // while thread t waits: its saved stack pointer (x86-64 switch), apart from Thread so that the barrier's
    // fast path indexes it without a multiply and eight share a cache line (two entries past the largest
    // block: the fast path and pick_thread prefetch the stack of the thread after next unchecked)
    void* sps[kMaxThreads + 2];
    int nthreads, next_new, nlive, warp, warp_shift;  // warp = 1 << warp_shift
    unsigned inline_end;  // gpuenv_state.end of a newly started thread: nthreads, or 0 (checked, lockstep)
    int runq[kMaxThreads];
    int rq_head, rq_tail;
    int seq_next, seq_end;  // after a barrier released every thread: threads [seq_next, seq_end) run next, in order
    int nwait;              // threads waiting at a warp operation or in lockstep (resolve_warps has work)
    // the barrier interval's arrivals, counted as they come (a release needs no scan of the block):
    // how many, the first one's site and kind, whether any other differed, the sum of their predicates
    int nbar, bar_where, bar_op, bar_count;  // (bar_where: the first arrival's site, gpuenv_cpu.h)
    const char* bar_file;
    bool bar_div;
    bool bar_fchk;     // an arrival's file pointer differed from the first's: compare the names at release
    uint64_t bar_res;  // what the released barrier returns (__syncthreads_count/_and/_or)
    void* bar_site;    // the first arrival's return address
    // round robin (unchecked, no lockstep): while every arrival of the interval so far was thread k at its
    // k-th arrival, at the first one's site, nothing is written per thread but its saved context: rr_at is
    // the thread whose arrival comes next (the count so far; nbar is written when the interval leaves round
    // robin), threads [0, rr_at) wait there implicitly and no thread's recorded state is above T_RUN;
    // leave_rr records them as the general path does as soon as anything differs (barrier.cpp). -1: off
    int rr_at;
    bool rr_ok;
    // the running thread was resumed by the round-robin fast path (gpuenv_barrier, gpuenv_next_thread): it is
    // rr_at, and cur, cur_fiber and seq_next are not written per switch; leave_rr writes them before anything
    // else reads them. Threads that exit in order in such an interval (bar_where is kExitSite) keep their
    // fibers: thread t's fiber waits in gpuenv_next_thread, its context in sps[t], until it starts thread t
    // of the next block (tied: the last block ended so; tied_first: this block started so and its first
    // barrier has not released, threads after rr_at have not started; scheduler.cpp: rr_exit).
    bool rr_run, tied, tied_first;
    int cur;
    Fiber* cur_fiber;
    void* sched_sp;
#ifdef GPUENV_UCONTEXT
    void* sched_uc;
#endif
    bool active, aborted;
    bool abandoned;        // a cooperative launch stopped while this block waited at grid.sync (coop.cpp)
    char* coop_buf;        // where a cooperative launch's block keeps its state while it waits (coop.cpp)
    size_t coop_cap;
    volatile sig_atomic_t wd_pending;
    uint32_t epoch;
    uint16_t warp_sync[kMaxThreads / 32];  // per wave: warp operations resolved so far in this block
    bool check, lockstep;
    SVar vars[kMaxVars];  // sorted by address
    int nsv;
    uintptr_t sv_lo, sv_hi;  // the span of vars: a cheap first test
    uintptr_t mod_base, text_lo, text_hi;
    uintptr_t seg_lo[8], seg_hi[8];
    int nseg;
    RegionHit hits[kRegionHits];  // the regions that let recent accesses through (check_other), newest first
    double t0;
    gpuenv_report_t pend;     // the first uninitialised shared read of this barrier interval
    gpuenv_report_t pend_ws;  // the first conflict within one wave of this interval (lockstep reliance)
    HeldWrite held;           // a write after write of this interval, until its bytes are known
    uintptr_t sites[kSiteSlots];  // a checked launch's access sites by number - 1 (0: a free slot)
    int nsites;
    sigjmp_buf jb;
};

// Whether thread a waits at the barrier or warp operation at (file, where): the same source position
inline bool same_site(const Thread& a, const char* file, int where) {
    return a.where == where && (a.file == file || (a.file && file && !strcmp(a.file, file)));
}

// launch.cpp: the running worker's launch state (set for each worker's OS thread; nullptr on other threads)
extern __thread Launch* cur_launch __attribute__((tls_model("initial-exec")));
inline Launch& current_launch() { return *cur_launch; }

// fibers.cpp (the scheduler's inline primitives are in fibers.h, the context switch in fiber_switch.h)
Fiber* new_fiber();  // a fiber of its own stack, in the worker's pool; nullptr when no stack can be mapped
void reset_fibers();  // every fiber free and started afresh, at each launch's start
void release_fibers(Launch& w);  // a worker's fibers unmapped (launch.cpp: after a cooperative launch, or past kFibers)
void untie(int t);  // thread t's fiber, which waited for it (Launch::tied), is free
void wait_for_new(int me);  // the current thread waits; a fiber starts the next thread not started yet
__attribute__((noreturn)) void fail_in_fiber();  // the launch stops (the report is written): back to the scheduler
void block_here(uint8_t st, void* site);  // the current thread waits in state st (warp operation, lockstep)

// scheduler.cpp
bool run_block();  // runs one block to its end; false when the launch stopped (the report says why)
void enqueue(int t);  // thread t runs once the running ones wait

// barrier.cpp
void leave_rr();  // a round-robin interval's arrivals, recorded (Launch::rr_at)
bool release_barrier();  // the barrier every live thread waits at, released; false (with a report) when it cannot

// warps.cpp
int resolve_warps();  // warp operations and lockstep waves resolved: the lanes released, -1 when the launch stops

// checks.cpp
extern Shadow shadow_static[kShadowBytes];
extern Shadow shadow_dyn[kShadowBytes];
void setup_vars();   // the module's static __shared__ variables, at their addresses (Launch::vars)
void poison_vars();  // their bytes set to 0xFF at each block's start
void reset_shadow();
void shadow_new_epoch();  // after a barrier
size_t shadow_bytes();                   // the checked mode's shadow of the running block, in bytes
void shadow_keep(char* buf, bool save);  // that shadow into buf, or back from it
void check_access(uintptr_t a, size_t size, bool write, void* pc);  // a load or store of device code
// at an interval's end: a held write that changed its bytes is a race (false: the launch stops, Launch::r says
// why) or a lockstep reliance (Launch::pend_ws)
bool settle_held_write();

// coop.cpp: cooperative launches (gpuenv_launch_t.check & GPUENV_COOPERATIVE), one worker per block
void coop_start(int blocks);
void coop_stop();               // no block is to run any more (a failure, or workers that did not start)
bool coop_turn(int worker);     // waits for that worker's block's turn; false when the launch stopped first
bool coop_end(int worker, bool ok);  // its block ended: the next one's turn; false when it failed

// signals.cpp: faults and the watchdog
void install_signals();
void uninstall_signals();
void worker_signals(bool on);  // a helper worker's thread: its own signal stack
void wake_workers(const pthread_t* tids, int n);  // the helpers the watchdog forwards its signal to (0: none)
void check_watchdog_pending();  // the watchdog fired while the executor ran: the launch stops
void watchdog_text(gpuenv_report_t* r);  // the watchdog's report text
uintptr_t sig_pc(void* uc);  // the interrupted instruction of a signal's ucontext (0 where unknown)

// report.cpp: what a report says
double now();
void textf(char* buf, size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));  // appended
void find_module(void* entry);  // the kernel module's load address and segments (Launch::mod_base, seg_lo)
uint64_t pc_rel(const void* pc);  // pc, relative to the kernel module's load address (0: not in its code)
uint64_t caller_in_kernel();  // the innermost kernel frame on this stack (module-relative), or 0
// the running thread's block and thread index, into a report's (or the death note's) fields
void where_now(uint32_t block[3], uint32_t thread[3]);
void set_where(gpuenv_report_t* r);
void set_thread(gpuenv_report_t* r, int t);  // the running block's thread t

// printf.cpp: device printf
// several workers' output, each block's in block order, into the launch's buffer (none after block `upto`)
void merge_output(Launch** ws, int n, gpuenv_launch_t* d, uint64_t upto);

// libc_checks.cpp (checked mode's libc functions), request.cpp (the launch request's parser) and
// death_note.cpp (the child's last words) define extern "C" entry points only: for kernels
// (include/gpuenv_libc.h) and for runtime/cpu/server.py.

}  // namespace gx
