// __syncthreads() and its _count/_and/_or flavours: a thread's arrival, the round-robin fast path, and the
// release once every live thread of the block waits. A barrier releases only when every thread that has not
// returned waits at the same site: the source position, so a call the compiler duplicated (-O2 tail
// duplication) is still one barrier, while two __syncthreads() in if/else are two; otherwise the launch stops
// with a report (divergent barrier). Threads that returned before it do not hold it: AMD GPUs do not wait for
// wavefronts that have ended, NVIDIA GPUs since Volta count exited threads as arrived; checked mode warns,
// as the HIP and CUDA programming guides leave it undefined (release_barrier).
#include "executor_int.h"
#include "fiber_switch.h"
#include "fibers.h"

#include <stdio.h>
#include <string.h>

namespace gx {

// A barrier's arrival on the general path: every arrival records its site in its thread (for a report),
// the interval's kinds and values are counted in bar_*. Arrivals whose file pointer differs from the first
// one's are compared by name when the barrier releases (release_barrier), not here.
__attribute__((noinline)) static void arrive(const char* file, int where, int value, void* site) {
    Launch& l = current_launch();
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

// Hands a round-robin interval to the general path, which takes over until the barrier releases: the
// running thread's record (cur, cur_fiber), which the fast path leaves stale; the fibers of a tied block's
// threads that have not started, freed; the threads that returned in order, counted; and the arrivals
// (threads [0, nbar), at the first one's site) recorded as the general path records them.
void leave_rr() {
    Launch& l = current_launch();
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

// A round-robin arrival when no released thread is left to run: a queued one, the next thread not started
// yet (the block's first interval), or the scheduler (pick_thread's order).
__attribute__((noinline)) static void rr_wait(int cur) {
    Launch& l = current_launch();
    l.threads[cur].fiber = l.cur_fiber;
    if (l.rq_head < l.rq_tail) return park_thread(cur, take(l.runq[l.rq_head++]));
    catch_up(l);
    if (l.next_new < l.nthreads) return wait_for_new(cur);  // (the block's first interval: a fiber starts the next thread)
    return park_thread(cur, sched_ctx());
}

// The last arrival of a round-robin interval releases the barrier (release_barrier's common case) and
// resumes thread 0; every later interval of the block then runs with rr_run (executor_int.h).
__attribute__((noinline)) static void rr_release(int cur) {
    Launch& l = current_launch();
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
    Launch& l = current_launch();
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

// "threads 0-3, 7, ..." of the selected threads, appended to out
static void ranges(Launch& l, char* out, size_t cap, const uint8_t* sel) {
    int n = l.nthreads, first = 1, shown = 0, total = 0;
    for (int i = 0; i < n; i++) total += sel[i];
    for (int i = 0; i < n;) {
        if (!sel[i]) { i++; continue; }
        int j = i;
        while (j + 1 < n && sel[j + 1]) j++;
        if (shown == 6) {
            textf(out, cap, ", ... (%d threads)", total);
            return;
        }
        if (j > i) textf(out, cap, "%s%d-%d", first ? "" : ", ", i, j);
        else textf(out, cap, "%s%d", first ? "" : ", ", i);
        first = 0;
        shown++;
        i = j + 1;
    }
}

// The barrier releases the threads that wait at it while others of the block have returned, as the hardware
// does; they go on in order through the run queue (the round-robin fast path needs the whole block). Checked
// mode warns once per barrier site and launch, naming the first block where it happened.
static bool release_without_returned() {
    Launch& l = current_launch();
    int n = l.nthreads, first = -1;
    uint8_t sel[kMaxThreads];  // (on the stack: workers may report at once)
    for (int t = 0; t < n; t++) {
        sel[t] = l.threads[t].state != T_BAR;
        if (!sel[t] && first < 0) first = t;
    }
    if (l.check) {
        char site[64], line[512] = "";
        snprintf(site, sizeof site, "@pc:%lx:L%d@", (unsigned long)pc_rel(l.threads[first].site),
                 gpuenv_site_line(l.threads[first].where));
        if (!strstr(l.r->warnings, site)) {
            textf(line, sizeof line, "%s threads ", kBarrierWarning);
            ranges(l, line, sizeof line, sel);
            textf(line, sizeof line, " of block (%u,%u,%u) returned before the __syncthreads() at %s, which released "
                  "the other threads without them as GPUs do (AMD GPUs do not wait for wavefronts that ended; NVIDIA "
                  "GPUs since Volta count exited threads as arrived); the HIP and CUDA programming guides leave a "
                  "barrier that not every thread of the block reaches undefined", l.st->bid.x, l.st->bid.y,
                  l.st->bid.z, site);
            if (l.segs) textf(l.r->warnings, sizeof l.r->warnings, "#%llu ", (unsigned long long)l.block);
            textf(l.r->warnings, sizeof l.r->warnings, "%s\n", line);
        }
    }
    for (int t = 0; t < n; t++)
        if (!sel[t]) {
            l.threads[t].state = T_RUN;
            enqueue(t);
        }
    l.seq_next = l.seq_end = 0;
    return true;
}

// Releases the barrier every live thread waits at; false (with a report) when it cannot. The arrivals
// were counted as they came (arrive): when every thread of the block waits at one site, the release is
// O(1) (the threads run next in order); otherwise the scan below says why not.
bool release_barrier() {
    Launch& l = current_launch();
    int n = l.nthreads;
    if (l.rr_at >= 0) leave_rr();  // (a round-robin interval that did not complete: its last arrival releases it itself)
    bool all = l.nbar == l.nlive;  // every live thread waits (the others returned)
    if (all && !l.bar_div && l.bar_fchk) {  // one site by line and kind: the file names must match too
        for (int t = 0; t < n; t++)
            if (l.threads[t].state == T_BAR && !same_site(l.threads[t], l.bar_file, l.bar_where)) l.bar_div = true;
        l.bar_fchk = false;
    }
    if (all && !l.bar_div) {
        l.bar_res = barrier_result(l.bar_op, l.bar_count, l.nbar);
        if (l.check) shadow_new_epoch();
        else l.epoch++;
        l.nbar = 0;
        if (l.nlive < n) return release_without_returned();
        l.seq_next = 0;
        l.seq_end = n;
        if (l.rr_ok) {  // the next interval may go round robin: no recorded state above T_RUN
            for (int t = 0; t < n; t++) l.threads[t].state = T_RUN;
            l.rr_at = 0;
            l.rr_run = true;  // (the scheduler resumes thread 0 first: it is rr_at)
            l.bar_where = -1;
        }
        return true;
    }
    const Thread* f = nullptr;
    int first = -1;
    for (int t = 0; t < n && !f; t++)
        if (l.threads[t].state == T_BAR) {
            f = &l.threads[t];
            first = t;
        }
    void* site = f->site;
    gpuenv_report_t* r = l.r;
    r->kind = GPUENV_BARRIER;
    set_thread(r, first);
    r->pc = pc_rel(site);
    uint8_t sel[kMaxThreads];  // (on the stack: workers may report at once)
    const char* lin = (l.d->block[1] > 1 || l.d->block[2] > 1) ? " (linear thread ids)" : "";
    textf(r->text, sizeof r->text, "__syncthreads() does not converge in block (%u,%u,%u)%s:", l.st->bid.x,
          l.st->bid.y, l.st->bid.z, lin);
    for (;;) {  // each waiting site with its threads
        const Thread* s = nullptr;
        for (int t = 0; t < n && !s; t++)
            if (l.threads[t].state == T_BAR) s = &l.threads[t];
        if (!s) break;
        const char* file = s->file;
        int where = s->where;
        void* pc = s->site;
        for (int t = 0; t < n; t++) {
            sel[t] = l.threads[t].state == T_BAR && same_site(l.threads[t], file, where);
            if (sel[t]) l.threads[t].state = T_EXIT + 1;  // listed
        }
        textf(r->text, sizeof r->text, " threads ");
        ranges(l, r->text, sizeof r->text, sel);
        textf(r->text, sizeof r->text, " wait at the barrier at @pc:%lx:L%d@;", (unsigned long)pc_rel(pc), gpuenv_site_line(where));
    }
    int nexit = 0;
    for (int t = 0; t < n; t++) nexit += (sel[t] = l.threads[t].state <= T_RUN);  // no longer waiting: returned
    textf(r->text, sizeof r->text, " the threads wait at different barriers (a __syncthreads under a condition that differs within the block)");
    if (nexit) {
        textf(r->text, sizeof r->text, "; threads ");
        ranges(l, r->text, sizeof r->text, sel);
        textf(r->text, sizeof r->text, " already returned");
    }
    return false;
}

}  // namespace gx

using namespace gx;

extern "C" int gpuenv_barrier(const char* file, int site, int value) {
    barrier<true>(file, site, value);
    return (int)current_launch().bar_res;  // (resumed: the result of the barrier released since)
}
extern "C" void gpuenv_sync(const char* file, int site) { barrier<false>(file, site, 0); }
