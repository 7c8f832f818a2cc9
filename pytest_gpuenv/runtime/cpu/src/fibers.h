// The fibers of one worker (Launch::pool) and the threads on them, included by executor.cpp only (after
// fiber_switch.h): a free fiber (on Launch::freelist) waits at the start of fiber_main, or, within a launch,
// in the module's entry (gpuenv_next_thread) for the next thread it starts; every fiber starts afresh at a
// launch's start. Then the scheduler's primitives: which thread runs, how one waits and hands over to the
// next, how a fiber starts threads and is freed (the entry points that use them and the round-robin fast
// path are in executor.cpp).
#pragma once
#include "executor_int.h"
#include "fiber_switch.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace gx {

__attribute__((noinline)) static Fiber* new_fiber() {
    static size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = kStack + page;
    char* m = (char*)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    mprotect(m, page, PROT_NONE);
    Fiber* f = new Fiber();
    f->map = m;
    f->lo = m + page;
    f->color = (size_t)(L.npool % 61) * 5 * 64;  // 61 prime, 5 lines apart: 305 lines before a repeat
    ctx_init(f);
    L.pool[L.npool++] = f;
    return f;
}

// The lines a waiting thread's fiber resumes on (saved registers, then the frames of the executor call,
// the kernel and the entry): fetched one thread ahead, they are in L1 when the switch pops them (a block
// of 256 waiting threads keeps more stack lines than L1 holds).
static inline void prefetch_stack(const void* at) {
    const char* sp = (const char*)at;
    for (int i = 0; i < 5; i++) __builtin_prefetch(sp + 64 * i);
}

// A free fiber, or nullptr when no stack can be mapped.
static inline Fiber* acquire() {
    Launch& l = L;
    if (__builtin_expect(!l.nfree, 0)) return new_fiber();
    Fiber* f = l.freelist[--l.nfree];
    if (l.nfree) prefetch_stack(l.freelist[l.nfree - 1]->sp);  // the next block's next thread
    return f;
}

// Worker w's fibers unmapped (each stack and its guard page are two of the process's at most ~65,530
// mappings): the helpers give theirs back after a cooperative launch, or one that left more than kFibers.
void release_fibers(Launch& w) {
    static size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < w.npool; i++) {
        munmap(w.pool[i]->map, kStack + page);
        delete w.pool[i];
    }
    w.npool = w.nfree = 0;
    w.tied = false;
}

// Every fiber free and at the start of fiber_main, at each launch's start: they wait in the last launch's entry,
// or last ran on another OS thread, or an aborted launch left some mid-thread.
void reset_fibers() {
    Launch& l = L;
    l.tied = false;
    l.nfree = 0;
    for (int i = 0; i < l.npool; i++) {
        ctx_init(l.pool[i]);
        l.freelist[l.nfree++] = l.pool[i];
    }
}

// A fiber that waited for its thread of the next block (Launch::tied) or for one that never started is free.
static void untie(int t) {
    Launch& l = L;
    Fiber* f = l.threads[t].fiber;
    ctx_init(f);
    l.freelist[l.nfree++] = f;
}

// ------------------------------------------------------------------ threads
// What device code reads of the running thread (threadIdx, the linear id); set_current also tells the
// executor (the round-robin fast path leaves l.cur to leave_rr)
static inline __attribute__((always_inline)) void set_tid(Launch& l, unsigned t) {
    static_assert(offsetof(gpuenv_state_t, lin) == sizeof(gpuenv_u3) && sizeof(Launch::Ids) == 16, "tid, lin");
    memcpy(&l.st->tid, &l.ids[t], sizeof(Launch::Ids));
}

static inline void set_current(int t) {
    L.cur = t;
    set_tid(L, t);
}

// pick_thread: the queued or released thread that runs next, -1 when none; take: it becomes current
// (the two are never both non-empty: a barrier releases, and warp operations resolve, only when neither
// has threads left; the barrier's release comes first, as the common case)
static inline int pick_thread() {
    Launch& l = L;
    if (l.seq_next < l.seq_end) {
        int t = l.seq_next++;
        prefetch_stack(l.sps[l.seq_next + 1]);  // (past the range: a stale or null address, never a fault)
        return t;
    }
    if (l.rq_head < l.rq_tail) return l.runq[l.rq_head++];
    return -1;
}

static inline void* take(int t) {
    Launch& l = L;
    Thread& th = l.threads[t];
    th.state = T_RUN;
    set_current(t);
    l.st->end = 0;  // a thread that waited: the ones after it have started (next_inline)
    l.cur_fiber = th.fiber;
    return thread_ctx(t);
}

static Fiber* new_fiber_for_next() {
    Fiber* f = acquire();
    if (f) L.cur_fiber = f;
    return f;
}

// The current thread waits for a fiber not started yet: out of line, so that wait_here's common paths make
// no call but the switch.
__attribute__((noinline)) static void wait_for_new(int me) {
    Fiber* f = new_fiber_for_next();
    return park_thread(me, f ? fiber_ctx(f) : sched_ctx());
}

// Starts the next thread not started yet on the current fiber; false when none is left.
static inline bool start_new() {
    Launch& l = L;
    if (l.next_new >= l.nthreads || l.aborted) return false;
    set_current(l.next_new++);  // its state and fiber are written when it waits (wait_here)
    l.st->end = l.inline_end;   // the newest thread: the module may start the ones after it itself
    return true;
}

// The module's entry may have started threads itself since the executor last set the current thread
// (hip_runtime.h: next_inline, unchecked launches only): each one it started means one that returned, and
// it started them in order after the newest (so next_new stays the current thread + 1). Called by every
// executor entry a running thread reaches before it reads the executor's count of threads (a barrier's
// arrival only where it must: wait_here).
static inline __attribute__((always_inline)) void catch_up(Launch& l) {
    int lin = (int)l.st->lin;
    if (__builtin_expect(lin != l.cur, 0)) {
        l.nlive -= lin - l.cur;
        l.next_new += lin - l.cur;
        l.cur = lin;
    }
}

// The current fiber has no thread left (none is left to start): it is free, and the next queued or released
// thread goes on, else the scheduler (the end of the block, or it must decide). The order is the scheduler's,
// so runs stay deterministic. Taken again (acquire), it returns here and its caller starts the next thread.
static inline __attribute__((always_inline)) void free_fiber() {
    Launch& l = L;
    Fiber* f = l.cur_fiber;
    l.freelist[l.nfree++] = f;
    int t = __builtin_expect(l.aborted, 0) ? -1 : pick_thread();
    park_fiber(f, t >= 0 ? take(t) : sched_ctx());
}

// A fiber takes the next thread not started yet and runs it; the kernel module's entry then goes on to
// the next ones through gpuenv_next_thread, so a block without barriers is one loop on one fiber. The
// entry does not return within a launch: a fiber enters it once (work() starts every fiber afresh at a launch).
static void fiber_main() {
    Launch& l = L;
    for (;;) {
        if (start_new()) l.entry(l.d->args);
        free_fiber();
    }
}

void fail_in_fiber() {
    if (L.rr_run) leave_rr();  // (cur_fiber)
    L.aborted = true;
    park_fiber(L.cur_fiber, sched_ctx());
    __builtin_unreachable();
}

// The current thread waits (barrier, warp operation, lockstep); the next runnable one goes on directly:
// one switch per thread per barrier, not two through the scheduler.
// `cur` is the current thread (gpuenv_state.lin). Threads the module's entry started itself (next_inline) are
// counted only where no released or queued thread runs next: the entry starts threads only while some are
// not started yet, and a barrier releases, and warp operations resolve, only once all have started.
static inline __attribute__((always_inline)) void wait_here(uint8_t st, void* site, int cur) {
    Launch& l = L;
    Thread& th = l.threads[cur];
    th.state = st;
    th.site = site;
    th.fiber = l.cur_fiber;
    if (__builtin_expect(!l.aborted, 1)) {
        int t = pick_thread();
        if (t >= 0) return park_thread(cur, take(t));
        catch_up(l);
        if (l.next_new < l.nthreads) return wait_for_new(cur);
    }
    catch_up(l);
    return park_thread(cur, sched_ctx());
}

void block_here(uint8_t st, void* site) {
    if (L.rr_run) leave_rr();
    if (st != T_BAR) L.nwait++;
    wait_here(st, site, L.cur);
}

static inline void watchdog_poll() {
    if (__builtin_expect(L.wd_pending, 0)) check_watchdog_pending();
}


}  // namespace gx
