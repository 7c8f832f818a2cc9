// A launch (gpuenv_launch): its blocks run one after another on one worker, or, when the kernel module allows it
// (GPUENV_PARALLEL: unchecked, no lockstep, no __device__ variables), on several worker threads, each with
// its own copy of the kernel module (its own gpuenv_state and static __shared__ variables), its own fibers
// and signal stack. Workers claim blocks in order; the launch's report is the one of the failing block with
// the lowest index, and device printf output is put together in block order, so the report and the output
// are the same whichever thread ran which block. Checked and lockstep launches keep one worker: their
// shadow memory and barrier epochs are one block's at a time (checks.cpp).
#include "executor_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace gx {

__thread Launch* cur_launch __attribute__((tls_model("initial-exec")));
static Launch main_launch;
static Launch* helpers[kMaxWorkers];
// the lowest block index that failed so far (workers stop claiming blocks above it) and the next to claim
static uint64_t fail_block, next_block;

__attribute__((constructor)) static void main_thread() { cur_launch = &main_launch; }  // (device printf outside a launch)

static void poison_block() {
    Launch& l = current_launch();
    gpuenv_launch_t* d = l.d;
    poison_vars();
    if (d->shared_bytes) memset(l.dyn_buf, 0xFF, d->shared_bytes);
    if (l.check) reset_shadow();
}

// Runs blocks claimed in order until none is left or a lower block failed; false when this worker's
// block failed (Launch::r says why, Launch::block which block).
static bool run_blocks() {
    Launch& l = current_launch();
    gpuenv_launch_t* d = l.d;
    uint64_t gx = d->grid[0], gxy = gx * d->grid[1], total = gxy * d->grid[2];
    // blocks are claimed a run at a time (a counter shared by every block would bounce between the cores),
    // in order, about 16 runs per worker; a cooperative launch's worker runs its own block (coop.cpp)
    bool coop = d->check & GPUENV_COOPERATIVE;
    uint64_t run = total / (16 * (uint64_t)d->nworkers) + 1, b = coop ? (uint64_t)l.worker : 0, end = coop ? b + 1 : 0;
    for (;;) {
        if (b == end) {
            if (coop) return true;
            b = __atomic_fetch_add(&next_block, run, __ATOMIC_RELAXED);
            end = b + run < total ? b + run : total;
        }
        if (b >= total || b > __atomic_load_n(&fail_block, __ATOMIC_RELAXED)) return true;
        l.block = b;
        l.st->bid = {(unsigned)(b % gx), (unsigned)(b % gxy / gx), (unsigned)(b / gxy)};
        poison_block();
        b++;
        if (!run_block()) return false;
        if (l.wd_pending) {
            l.r->kind = GPUENV_WATCHDOG;
            set_where(l.r);
            watchdog_text(l.r);
            return false;
        }
    }
}

// Worker i's state for launch d, running module copy `copy` (a cooperative launch's workers share copy 0).
static void prepare(Launch& w, gpuenv_launch_t* d, int i, int copy, double t0) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!w.dyn_buf) {
        w.dyn_buf = (char*)mmap(nullptr, kDynMax + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mprotect(w.dyn_buf + kDynMax, page, PROT_NONE);
    }
    unsigned n = d->block[0] * d->block[1] * d->block[2];
    w.d = d;
    w.worker = i;
    w.entry = d->nworkers > 0 ? d->workers[copy].entry : d->entry;
    w.st = d->nworkers > 0 ? d->workers[copy].state : nullptr;
    w.nthreads = (int)n;
    w.warp = d->warp_size;
    w.warp_shift = d->warp_size == 64 ? 6 : 5;
    for (unsigned t = 0; t < n; t++) {
        unsigned bx = d->block[0], by = d->block[1];
        w.ids[t] = {{t % bx, (t / bx) % by, t / (bx * by)}, t};
        w.threads[t].state = T_NEW;  // (an aborted launch may have left waiting states)
    }
    w.aborted = w.abandoned = false;
    w.wd_pending = 0;
    w.check = d->check & GPUENV_CHECK_ACCESS;
    w.lockstep = d->check & GPUENV_LOCKSTEP;
    w.rr_ok = !w.check && !w.lockstep;
    w.t0 = t0;
    w.nsegs = 0;
    w.out_len = 0;
    if (i > 0) {
        memset(&w.rep, 0, sizeof w.rep);
        w.r = &w.rep;
    }
    w.st->bdim = {d->block[0], d->block[1], d->block[2]};
    w.st->gdim = {d->grid[0], d->grid[1], d->grid[2]};
    w.st->dyn_shared = w.dyn_buf;
    // a module's entry starts the next thread itself where nothing checks between threads (next_inline)
    w.inline_end = w.rr_ok ? n : 0;
}

// One worker's share of the launch, on the current thread (whose current_launch() is set).
static void work() {
    Launch& l = current_launch();
    bool coop = l.d->check & GPUENV_COOPERATIVE;
    if (coop && !coop_turn(l.worker)) return;  // a block before this one failed
    find_module((void*)l.entry);
    setup_vars();
    reset_fibers();  // they wait in the last launch's entry (gpuenv_next_thread), ran on another thread, or were left mid-thread by an aborted launch
    if (coop) l.st->dyn_shared = l.dyn_buf;  // (the workers share one gpuenv_state)
    l.active = true;
    bool ok = false;
    if (sigsetjmp(l.jb, 1) == 0) ok = run_blocks();
    l.active = false;
    if (coop) ok = coop_end(l.worker, ok) || l.abandoned;
    if (!ok) {
        uint64_t seen = __atomic_load_n(&fail_block, __ATOMIC_RELAXED);
        while (l.block < seen && !__atomic_compare_exchange_n(&fail_block, &seen, l.block, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    }
}

static void* helper_main(void* arg) {
    cur_launch = (Launch*)arg;
    worker_signals(true);
    work();
    worker_signals(false);
    return nullptr;
}

// Several workers' warnings, each line once, sorted (which worker saw a line first is not deterministic),
// none first seen in a block after `upto` (as for printf).
static void merge_warnings(Launch** ws, int n, gpuenv_report_t* r, uint64_t upto) {
    const char* lines[256];
    int nl = 0;
    static char all[kMaxWorkers][sizeof r->warnings];
    for (int i = 0; i < n; i++) {
        memcpy(all[i], ws[i]->r->warnings, sizeof all[i]);
        for (char* p = strtok(all[i], "\n"); p && nl < 256; p = strtok(nullptr, "\n")) {
            char* text = p;
            unsigned long long block = p[0] == '#' ? strtoull(p + 1, &text, 10) : 0;  // "#BLOCK text"
            if (text[0] == ' ') text++;
            if (block <= upto) lines[nl++] = text;
        }
    }
    qsort(lines, nl, sizeof *lines, [](const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); });
    r->warnings[0] = 0;
    for (int i = 0; i < nl; i++)
        if (i == 0 || strcmp(lines[i], lines[i - 1])) textf(r->warnings, sizeof r->warnings, "%s\n", lines[i]);
}

}  // namespace gx

using namespace gx;

extern "C" int gpuenv_launch(gpuenv_launch_t* d, gpuenv_report_t* r) {
    cur_launch = &main_launch;
    memset(r, 0, sizeof *r);
    unsigned n = d->block[0] * d->block[1] * d->block[2];
    if (n == 0 || n > (unsigned)kMaxThreads || d->shared_bytes > kDynMax || (d->warp_size != 32 && d->warp_size != 64) ||
        d->nworkers < 1 || d->nworkers > kMaxWorkers) {
        r->kind = GPUENV_USAGE;
        textf(r->text, sizeof r->text, "bad launch: %u threads per block (limit %d), %lu bytes of dynamic shared memory (limit %zu), "
              "%d workers (limit %d)", n, kMaxThreads, (unsigned long)d->shared_bytes, kDynMax, d->nworkers, kMaxWorkers);
        return r->kind;
    }
    uint64_t blocks = 0;
    if (__builtin_mul_overflow((uint64_t)d->grid[0], (uint64_t)d->grid[1], &blocks) ||
        __builtin_mul_overflow(blocks, (uint64_t)d->grid[2], &blocks) || blocks == 0 || blocks > (uint64_t)INT64_MAX) {
        r->kind = GPUENV_USAGE;  // pytest refuses such a grid first; a malformed request must not wrap to 0 blocks
        textf(r->text, sizeof r->text, "bad launch: a grid of %u x %u x %u blocks does not fit a 63-bit count",
              d->grid[0], d->grid[1], d->grid[2]);
        return r->kind;
    }
    bool coop = d->check & GPUENV_COOPERATIVE;
    if (coop && (blocks > (uint64_t)kMaxWorkers || blocks * n > (uint64_t)kFibers)) {
        r->kind = GPUENV_USAGE;
        textf(r->text, sizeof r->text, "a cooperative launch of %lu blocks of %u threads: the CPU executor holds at "
              "most %d blocks and %d threads at once (a GPU holds its multiprocessors times the blocks each can hold)",
              (unsigned long)blocks, n, kMaxWorkers, kFibers);
        return r->kind;
    }
    int nw = coop ? (int)blocks
         : (d->check & GPUENV_PARALLEL) && !(d->check & (GPUENV_CHECK_ACCESS | GPUENV_LOCKSTEP)) ? d->nworkers : 1;
    if ((uint64_t)nw > blocks) nw = (int)blocks;
    if (!coop && nw > 1 && (uint64_t)nw * n > (uint64_t)kFibers) nw = kFibers / (int)n > 1 ? kFibers / (int)n : 1;
    Launch* ws[kMaxWorkers];
    double t0 = now();
    for (int i = 0; i < nw; i++) {
        if (i > 0 && !helpers[i]) helpers[i] = (Launch*)calloc(1, sizeof(Launch));
        ws[i] = i ? helpers[i] : &main_launch;
        if (i == 0) main_launch.r = r;
        prepare(*ws[i], d, i, coop ? 0 : i, t0);
        Launch& w = *ws[i];
        if (nw == 1) {
            w.out = d->out;
            w.out_cap = d->out_cap;
            w.out_len = d->out_len;
            w.segs = nullptr;
        } else {
            if (!w.own_segs) w.own_segs = (uint64_t*)malloc(sizeof(uint64_t) * 2 * (w.segs_cap = 64));
            if (w.own_cap != d->out_cap) w.own_out = (char*)realloc(w.own_out, w.own_cap = d->out_cap);
            w.segs = w.own_segs;
            w.out = w.own_out;
            w.out_cap = w.own_cap;
        }
    }
    fail_block = UINT64_MAX;
    next_block = 0;
    if (coop) coop_start(nw);
    install_signals();
    wake_workers(nullptr, 0);
    pthread_t tids[kMaxWorkers];
    int started = 1;
    for (int i = 1; i < nw; i++) {
        if (pthread_create(&tids[i], nullptr, helper_main, ws[i]) != 0) break;
        started++;
    }
    if (started > 1) wake_workers(tids + 1, started - 1);
    if (coop && started < nw) {  // every block must be resident: none runs
        coop_stop();
        r->kind = GPUENV_USAGE;
        textf(r->text, sizeof r->text, "a cooperative launch of %d blocks needs a thread for each; %d started", nw, started);
    } else {
        work();
    }
    for (int i = 1; i < started; i++) pthread_join(tids[i], nullptr);
    int pooled = main_launch.npool;
    for (int i = 1; i < kMaxWorkers; i++) pooled += helpers[i] ? helpers[i]->npool : 0;
    for (int i = 1; (coop || pooled > kFibers) && i < kMaxWorkers; i++)
        if (helpers[i]) release_fibers(*helpers[i]);
    wake_workers(nullptr, 0);
    uninstall_signals();
    if (nw == 1) {
        d->out_len = main_launch.out_len;
        return r->kind;
    }
    uint64_t upto = coop ? UINT64_MAX : fail_block;
    merge_output(ws, started, d, upto);
    int first = -1;  // the worker whose block failed first in block order
    for (int i = 0; i < started; i++)
        if (ws[i]->r->kind && ws[i]->block == fail_block) first = i;
    gpuenv_report_t* keep = first > 0 ? ws[first]->r : nullptr;
    merge_warnings(ws, started, r, upto);
    if (keep) {  // a helper's block failed first (worker 0's own failure, if any, was in a later block)
        char warnings[sizeof r->warnings];
        memcpy(warnings, r->warnings, sizeof warnings);
        memcpy(r, keep, sizeof *r);
        memcpy(r->warnings, warnings, sizeof warnings);
    }
    return r->kind;
}
