// The CPU executor: every GPU thread of a block is a fiber on this one OS thread, run by a
// deterministic scheduler. A thread runs until it exits or waits at a barrier or a warp operation;
// when every thread of the block waits, warp operations resolve (lanes at the same site form the
// active mask) and then the barrier releases, or the launch stops with a report (divergent barrier,
// threads that already returned). Blocks run one after another. Faults (a fiber's guard page, a
// wild pointer) and the watchdog leave the launch through siglongjmp (signals.cpp); nothing stays broken.
#include "executor_int.h"
#include "fiber_switch.h"
#include "fibers.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

namespace gx {

__thread Launch* cur_launch __attribute__((tls_model("initial-exec")));

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void textf(char* buf, size_t cap, const char* fmt, ...) {
    size_t n = strlen(buf);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

uint64_t pc_rel(const void* pc) {
    uintptr_t p = (uintptr_t)pc;
    return (p >= L.text_lo && p < L.text_hi) ? p - L.mod_base : 0;
}

// A round-robin thread returns (rr_run, and every arrival of the interval so far was a return, in order): its
// fiber keeps it, waiting here with its context in sps[cur], and the next thread goes on as at a barrier. The
// block's last thread goes to the scheduler, which starts the next block's threads on the same fibers
// (run_block): a barrier's fast path then starts thread t + 1 by switching to sps[t + 1], as it resumes a
// waiting one, and every thread's start and end is one switch. Resumed, the fiber runs the thread that
// the switch set (gpuenv_state), so the entry calls the kernel again.
__attribute__((noinline)) static void rr_exit() {
    Launch& l = L;
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

}  // namespace gx

using namespace gx;

// The current thread is done: start the next one on this fiber. When none is left to start, the fiber
// is free and waits here, in the module's entry (its arguments unpacked), until it is taken for a new thread:
// a thread's start and end on a fiber of a block with barriers is then a switch, not a return from the entry
// and a call into it (HIP-CPU's fibers loop the same way).
extern "C" void gpuenv_next_thread() {
    if (L.rr_run) {
        if (L.bar_where < 0) return rr_exit();  // (-1: no arrival in this interval yet; kExitSite: only returns)
        leave_rr();
    }
    catch_up(L);
    L.nlive--;  // its state stays T_RUN/T_NEW: a thread that does not wait when the block stalls has returned
    while (!start_new()) free_fiber();
}

// A barrier's arrival on the general path: every arrival records its site in its thread (for a report),
// the interval's kinds and values are counted in bar_*. Arrivals whose file pointer differs from the first
// one's are compared by name when the barrier releases (release_barrier), not here.
__attribute__((noinline)) static void arrive(const char* file, int where, int value, void* site) {
    Launch& l = L;
    int kind = gpuenv_site_flavour(where);
    if (l.wd_pending) check_watchdog_pending();
    if (l.rr_at >= 0) leave_rr();
    int cur = (int)l.st->lin;  // (wait_here: the executor catches up with the module's entry only if it must)
    Thread& th = l.threads[cur];
    th.file = file;
    th.where = where;
    if (l.nbar++ == 0) {
        l.bar_file = file;
        l.bar_where = where;
        l.bar_op = kind;
        l.bar_count = 0;
        l.bar_site = site;
    } else if (where != l.bar_where) {  // (another position or another flavour)
        l.bar_div = true;
    } else if (file != l.bar_file) {
        l.bar_fchk = true;
    }
    l.bar_count += value;  // (__syncthreads_count/_and/_or; 0 for a plain barrier)
    return wait_here(T_BAR, site, cur);
}

namespace gx {
// Hands a round-robin interval to the general path, which takes over until the barrier releases: the
// running thread's record (cur, cur_fiber), which the fast path leaves stale; the fibers of a tied block's
// threads that have not started, freed; the threads that returned in order, counted; and the arrivals
// (threads [0, nbar), at the first one's site) recorded as the general path records them.
void leave_rr() {
    Launch& l = L;
    int n = l.nthreads;
    if (l.rr_run) {  // the running thread is rr_at (executor_int.h)
        l.rr_run = false;
        l.cur = l.rr_at;
        l.cur_fiber = l.threads[l.rr_at].fiber;
        l.seq_next = l.rr_at + 1;
        if (l.tied_first) {  // the threads after rr_at start as the general path starts them, on free fibers
            l.tied_first = false;
            for (int t = n - 1; t > l.rr_at; t--) untie(t);
            l.next_new = l.rr_at + 1;
            l.seq_next = l.seq_end = 0;
        }
    }
    if (l.bar_where == kExitSite) {  // threads [0, rr_at) returned
        for (int t = 0; t < l.rr_at; t++) untie(t);
        l.nlive -= l.rr_at;
        l.rr_at = 0;
        l.bar_where = -1;
    }
    l.nbar = l.rr_at;
    for (int t = 0; t < l.nbar; t++) {
        Thread& th = l.threads[t];
        th.state = T_BAR;
        th.file = l.bar_file;
        th.where = l.bar_where;
        th.site = l.bar_site;
    }
    l.rr_at = -1;
}
}  // namespace gx

// A round-robin arrival when no released thread is left to run: a queued one, the next thread not started
// yet (the block's first interval), or the scheduler (pick_thread's order).
__attribute__((noinline)) static void rr_wait(int cur) {
    Launch& l = L;
    l.threads[cur].fiber = l.cur_fiber;
    if (l.rq_head < l.rq_tail) return park_thread(cur, take(l.runq[l.rq_head++]));
    catch_up(l);
    if (l.next_new < l.nthreads) return wait_for_new(cur);  // (the block's first interval: a fiber starts the next thread)
    return park_thread(cur, sched_ctx());
}

// The last arrival of a round-robin interval releases the barrier (release_barrier's common case) and
// resumes thread 0; every later interval of the block then runs with rr_run (executor_int.h).
__attribute__((noinline)) static void rr_release(int cur) {
    Launch& l = L;
    if (l.wd_pending) {  // (polled here, once an interval, rather than at each arrival)
        l.rr_at = cur;  // (the running thread, as fail_in_fiber's leave_rr reads it; the caller set it to n)
        check_watchdog_pending();
    }
    if (!l.rr_run) l.threads[cur].fiber = l.cur_fiber;  // (the block's first interval: its fiber is new)
    int n = l.nthreads;
    l.bar_res = barrier_result(gpuenv_site_flavour(l.bar_where), l.bar_count, n);
    l.epoch++;
    l.rr_at = 0;
    l.rr_run = true;
    l.tied_first = false;
    l.next_new = n;  // (every thread has started: a tied block's first interval left it at 1)
    l.bar_where = -1;
    l.seq_end = n;
    l.st->end = 0;  // every thread has started: none starts the next one itself
    set_tid(l, 0);
    if (cur == 0) return;  // (a one-thread block: the switch would save over the context it resumes)
    prefetch_stack(l.sps[1]);
    return park_thread(cur, thread_ctx(0));
}

// A barrier's arrival. The common case (an unchecked launch whose threads reach the barrier one after
// another, 0 to n-1, at one site) records nothing per thread but the saved context, hands over to the next
// thread directly, and the last arrival releases the barrier itself and resumes thread 0: no trip through
// the scheduler. Anything else (another order, another site) takes the general path.
// After a release (rr_run), the fast path writes only rr_at, the count of a __syncthreads_count/_and/_or,
// the next thread's ids and its own saved stack pointer: the thread after cur is cur + 1, waiting at the
// last barrier (seq_end is n), so there is nothing to look up; what the general path reads of the running
// thread is derived when it takes over (leave_rr). The watchdog is polled at the release (rr_release): a
// block whose threads only go from barrier to barrier still releases one every n arrivals.
template <bool kCounted>
static inline __attribute__((always_inline)) void barrier(const char* file, int site, int value) {
    Launch& l = L;
    unsigned cur = l.st->lin;  // (unsigned: cur + 1 and cur + 2 index sps without a sign extension)
    if (__builtin_expect(cur != (unsigned)l.rr_at, 0)) return arrive(file, site, value, __builtin_return_address(0));
    if (__builtin_expect(site != l.bar_where || file != l.bar_file, 0)) {
        if (cur || l.wd_pending) return arrive(file, site, value, __builtin_return_address(0));
        l.bar_file = file;  // the interval's first arrival (bar_where is -1 until then)
        l.bar_where = site;
        l.bar_op = gpuenv_site_flavour(site);
        l.bar_count = 0;
        l.bar_site = __builtin_return_address(0);
    }
    if (kCounted) l.bar_count += value;  // (a plain barrier passes 0: gpuenv_sync leaves the sum out)
    unsigned next = cur + 1;
    l.rr_at = next;
    // one comparison for both exceptions: seq_end is n after a release or in a tied block's first interval,
    // 0 in an untied block's first interval, where the next thread has not started (rr_wait; its fiber is
    // recorded where it may be new)
    if (__builtin_expect(next >= (unsigned)l.seq_end, 0))
        return next == (unsigned)l.nthreads ? rr_release(cur) : rr_wait(cur);  // (n: every thread waits here)
    set_tid(l, next);
    prefetch_stack(l.sps[next + 1]);
    return park_thread(cur, thread_ctx(next));
}

extern "C" int gpuenv_barrier(const char* file, int site, int value) {
    barrier<true>(file, site, value);
    return (int)L.bar_res;  // (resumed: the result of the barrier released since)
}
extern "C" void gpuenv_sync(const char* file, int site) { barrier<false>(file, site, 0); }

extern "C" uint64_t gpuenv_warp_op(int op, uint64_t value, int arg, int width, const char* file, int where) {
    Launch& l = L;
    if (l.rr_run) leave_rr();
    watchdog_poll();
    catch_up(l);
    Thread& th = l.threads[l.cur];
    th.op = op;
    th.val = value;
    th.arg = arg;
    th.width = width;
    th.file = file;
    th.where = where;
    l.nwait++;
    wait_here(T_WARP, __builtin_return_address(0), l.cur);
    return l.threads[l.cur].res;
}

namespace gx {
static void resume(int t) { from_sched(take(t)); }

// Runs one block to its end; false when the launch stopped (the report says why).
bool run_block() {
    Launch& l = L;
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

void enqueue(int t) { L.runq[L.rq_tail++] = t; }

}  // namespace gx
