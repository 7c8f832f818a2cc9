// The scheduler's primitives, inline where a barrier, a warp operation or a thread's end needs them
// (barrier.cpp, warps.cpp, scheduler.cpp, fibers.cpp): which thread runs next, how one waits and hands over
// to the next directly, how a fiber starts threads and is freed. The fibers themselves (their stacks, their
// start, the pool) are fibers.cpp's; the context switch is fiber_switch.h's.
//
// A free fiber (on Launch::freelist) waits at the start of fiber_main, or, within a launch, in the module's
// entry (gpuenv_next_thread) for the next thread it starts; every fiber starts afresh at a launch's start.
#pragma once
#include "executor_int.h"
#include "fiber_switch.h"

namespace gx __attribute__((visibility("hidden"))) {

// The lines a waiting thread's fiber resumes on (saved registers, then the frames of the executor call,
// the kernel and the entry): fetched one thread ahead, they are in L1 when the switch pops them (a block
// of 256 waiting threads keeps more stack lines than L1 holds).
static inline void prefetch_stack(const void* at) {
    const char* sp = (const char*)at;
    for (int i = 0; i < 5; i++) __builtin_prefetch(sp + 64 * i);
}

// A free fiber, or nullptr when no stack can be mapped.
static inline Fiber* acquire() {
    Launch& l = current_launch();
    if (__builtin_expect(!l.nfree, 0)) return new_fiber();
    Fiber* f = l.freelist[--l.nfree];
    if (l.nfree) prefetch_stack(l.freelist[l.nfree - 1]->sp);  // the next block's next thread
    return f;
}

// ------------------------------------------------------------------ threads
// What device code reads of the running thread (threadIdx, the linear id); set_current also tells the
// executor (the round-robin fast path leaves l.cur to leave_rr)
static inline __attribute__((always_inline)) void set_tid(Launch& l, unsigned t) {
    static_assert(offsetof(gpuenv_state_t, lin) == sizeof(gpuenv_u3) && sizeof(Launch::Ids) == 16, "tid, lin");
    memcpy(&l.st->tid, &l.ids[t], sizeof(Launch::Ids));
}

static inline void set_current(int t) {
    Launch& l = current_launch();
    l.cur = t;
    set_tid(l, t);
}

// pick_thread: the queued or released thread that runs next, -1 when none; take: it becomes current
// (the two are never both non-empty: a barrier releases, and warp operations resolve, only when neither
// has threads left; the barrier's release comes first, as the common case)
static inline int pick_thread() {
    Launch& l = current_launch();
    if (l.seq_next < l.seq_end) {
        int t = l.seq_next++;
        prefetch_stack(l.sps[l.seq_next + 1]);  // (past the range: a stale or null address, never a fault)
        return t;
    }
    if (l.rq_head < l.rq_tail) return l.runq[l.rq_head++];
    return -1;
}

static inline void* take(int t) {
    Launch& l = current_launch();
    Thread& th = l.threads[t];
    th.state = T_RUN;
    set_current(t);
    l.st->end = 0;  // a thread that waited: the ones after it have started (next_inline)
    l.cur_fiber = th.fiber;
    return thread_ctx(t);
}

// Starts the next thread not started yet on the current fiber; false when none is left.
static inline bool start_new() {
    Launch& l = current_launch();
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
    Launch& l = current_launch();
    Fiber* f = l.cur_fiber;
    l.freelist[l.nfree++] = f;
    int t = __builtin_expect(l.aborted, 0) ? -1 : pick_thread();
    park_fiber(f, t >= 0 ? take(t) : sched_ctx());
}

// The current thread waits (barrier, warp operation, lockstep); the next runnable one goes on directly:
// one switch per thread per barrier, not two through the scheduler.
// `cur` is the current thread (gpuenv_state.lin). Threads the module's entry started itself (next_inline) are
// counted only where no released or queued thread runs next: the entry starts threads only while some are
// not started yet, and a barrier releases, and warp operations resolve, only once all have started.
static inline __attribute__((always_inline)) void wait_here(uint8_t st, void* site, int cur) {
    Launch& l = current_launch();
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

static inline void watchdog_poll() {
    if (__builtin_expect(current_launch().wd_pending, 0)) check_watchdog_pending();
}

}  // namespace gx
