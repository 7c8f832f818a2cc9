// The scheduler: every GPU thread of a block is a fiber on this one OS thread, run in a deterministic order.
// A thread runs until it returns or waits at a barrier (barrier.cpp) or a warp operation (warps.cpp), and the
// next one goes on directly; when every thread of the block waits, warp operations resolve and then the
// barrier releases, or the launch stops with a report. run_block runs one block; gpuenv_next_thread is where
// a thread's end brings its fiber (the module's entry calls it).
#include "executor_int.h"
#include "fiber_switch.h"
#include "fibers.h"

#include <string.h>

namespace gx {

// A round-robin thread returns (rr_run, and every arrival of the interval so far was a return, in order): its
// fiber keeps it, waiting here with its context in sps[cur], and the next thread goes on as at a barrier. The
// block's last thread goes to the scheduler, which starts the next block's threads on the same fibers
// (run_block): a barrier's fast path then starts thread t + 1 by switching to sps[t + 1], as it resumes a
// waiting one, and every thread's start and end is one switch. Resumed, the fiber runs the thread that
// the switch set (gpuenv_state), so the entry calls the kernel again.
__attribute__((noinline)) static void rr_exit() {
    Launch& l = current_launch();
    int cur = l.rr_at, next = cur + 1, n = l.nthreads;
    l.bar_where = kExitSite;
    if (next == n) {  // the block is done: what the scheduler reads of it, as the general path leaves it
        l.rr_run = l.tied_first = false;
        l.rr_at = -1;
        l.tied = true;
        l.nlive = 0;
        l.next_new = n;
        l.seq_next = l.seq_end = 0;
        return park_thread(cur, sched_ctx());
    }
    l.rr_at = next;
    set_tid(l, next);
    prefetch_stack(l.sps[next + 1]);
    // (a tail call: resumed, the switch jumps straight back into the module's entry, with no `ret` that the
    // return-stack predictor would miss after the other fibers' calls)
    park_thread(cur, thread_ctx(next));
}

static void resume(int t) { from_sched(take(t)); }

bool run_block() {
    Launch& l = current_launch();
    l.next_new = 0;
    l.nlive = l.nthreads;
    l.rq_head = l.rq_tail = 0;
    l.seq_next = l.seq_end = 0;
    l.nwait = l.nbar = 0;
    l.bar_div = l.bar_fchk = false;
    l.rr_at = l.rr_ok ? 0 : -1;
    l.rr_run = false;
    l.tied_first = false;
    l.bar_where = -1;  // (no site: the first arrival records its own)
    l.epoch = 1;
    l.pend.kind = 0;
    l.pend_ws.kind = 0;
    memset(l.warp_sync, 0, sizeof l.warp_sync);
    if (l.tied) {  // every thread t starts on the fiber that ran thread t of the last block (rr_exit)
        l.tied = false;
        l.rr_run = l.tied_first = true;
        l.seq_end = l.nthreads;  // (the fast path switches to sps[t + 1] while t + 1 < seq_end)
        l.next_new = 1;
        l.st->end = 0;  // (none starts the next one itself: each has its fiber)
        set_tid(l, 0);
        from_sched(thread_ctx(0));
        if (l.aborted) return false;
    }
    for (;;) {
        for (;;) {
            if (l.rq_head < l.rq_tail) {
                resume(l.runq[l.rq_head++]);
            } else if (l.seq_next < l.seq_end) {
                resume(l.seq_next++);
            } else if (l.next_new < l.nthreads) {
                Fiber* f = acquire();
                if (!f) {
                    l.r->kind = GPUENV_USAGE;
                    textf(l.r->text, sizeof l.r->text, "out of memory for fiber stacks");
                    return false;
                }
                l.cur_fiber = f;
                from_sched(fiber_ctx(f));
            } else {
                break;
            }
            if (l.aborted) return false;
        }
        l.rq_head = l.rq_tail = 0;
        int n = l.nlive && l.nwait ? resolve_warps() : 0;
        if (n < 0) return false;
        if (n > 0) continue;
        if (l.check && !settle_held_write()) return false;  // (a write after write that changed the bytes)
        if (l.pend_ws.kind) {  // a conflict within one wave, and no race between waves in the interval
            memcpy(l.pend_ws.warnings, l.r->warnings, sizeof l.pend_ws.warnings);
            memcpy(l.r, &l.pend_ws, sizeof l.pend_ws);
            return false;
        }
        if (l.pend.kind) {  // an uninitialised read no later write in the interval explained as a race
            memcpy(l.pend.warnings, l.r->warnings, sizeof l.pend.warnings);
            memcpy(l.r, &l.pend, sizeof l.pend);
            return false;
        }
        if (l.nlive == 0) return true;
        if (!release_barrier()) return false;
    }
}

void enqueue(int t) {
    Launch& l = current_launch();
    l.runq[l.rq_tail++] = t;
}

}  // namespace gx

using namespace gx;

// The current thread is done: start the next one on this fiber. When none is left to start, the fiber
// is free and waits here, in the module's entry (its arguments unpacked), until it is taken for a new thread:
// a thread's start and end on a fiber of a block with barriers is then a switch, not a return from the entry
// and a call into it (HIP-CPU's fibers loop the same way).
extern "C" void gpuenv_next_thread() {
    if (current_launch().rr_run) {
        if (current_launch().bar_where < 0) return rr_exit();  // (-1: no arrival in this interval yet; kExitSite: only returns)
        leave_rr();
    }
    Launch& l = current_launch();
    catch_up(l);
    l.nlive--;  // its state stays T_RUN/T_NEW: a thread that does not wait when the block stalls has returned
    while (!start_new()) free_fiber();
}
