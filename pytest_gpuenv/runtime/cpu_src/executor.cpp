// The CPU executor: every GPU thread of a block is a fiber on this one OS thread, run by a
// deterministic scheduler. A thread runs until it exits or waits at a barrier or a warp operation;
// when every thread of the block waits, warp operations resolve (lanes at the same site form the
// active mask) and then the barrier releases, or the launch stops with a report (divergent barrier,
// threads that already returned). Blocks run one after another. Faults (a fiber's guard page, a
// wild pointer) and the watchdog leave the launch through siglongjmp (signals.cpp); nothing stays broken.
#include "executor_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef GPUENV_UCONTEXT
#include <ucontext.h>
#endif

extern "C" {
gpuenv_state_t gpuenv_state;
}

namespace gx {

Launch L;
static Fiber* pool[kMaxThreads + 1];
static int npool, nfree;
static Fiber* freelist[kMaxThreads + 1];
char* dyn_buf;
static size_t page;

bool fiber_guard_hit(uintptr_t a) {
    for (int i = 0; i < npool; i++)
        if (a >= (uintptr_t)pool[i]->map && a < (uintptr_t)pool[i]->lo) return true;
    return false;
}

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

// ------------------------------------------------------------------ context switch
static void fiber_main();

#if defined(__x86_64__) && !defined(GPUENV_UCONTEXT)
extern "C" void gpuenv_switch(void** save, void* to);
asm(R"(
.text
.globl gpuenv_switch
.type gpuenv_switch,@function
gpuenv_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size gpuenv_switch,.-gpuenv_switch
)");

// Stack colouring: the stacks are kStack + a page apart, so their tops would all fall on the same L1
// cache sets and the few lines a waiting thread keeps hot (saved registers, the kernel's frame) would
// evict each other at every switch; each fiber's stack starts a different number of cache lines down.
static inline uintptr_t stack_top(const Fiber* f) {
    return ((uintptr_t)(f->lo + kStack) - f->color) & ~(uintptr_t)63;
}

static void ctx_init(Fiber* f) {
    uintptr_t top = stack_top(f);
    void** sp = (void**)top;
    *--sp = nullptr;              // fake return address of fiber_main
    *--sp = (void*)&fiber_main;   // gpuenv_switch returns here
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    f->sp = sp;
}
static inline void to_fiber(Fiber* f) { gpuenv_switch(&L.sched_sp, f->sp); }
static inline void to_sched(Fiber* f) { gpuenv_switch(&f->sp, L.sched_sp); }
static inline void fiber_to_fiber(Fiber* from, Fiber* to) { gpuenv_switch(&from->sp, to->sp); }
#else
static void ctx_init(Fiber* f) {
    if (!f->uc) f->uc = new ucontext_t;
    ucontext_t* u = (ucontext_t*)f->uc;
    getcontext(u);
    u->uc_stack.ss_sp = f->lo;
    u->uc_stack.ss_size = kStack;
    u->uc_link = nullptr;
    makecontext(u, fiber_main, 0);
}
static inline void to_fiber(Fiber* f) {
    if (!L.sched_uc) L.sched_uc = new ucontext_t;
    swapcontext((ucontext_t*)L.sched_uc, (ucontext_t*)f->uc);
}
static inline void to_sched(Fiber* f) { swapcontext((ucontext_t*)f->uc, (ucontext_t*)L.sched_uc); }
static inline void fiber_to_fiber(Fiber* from, Fiber* to) { swapcontext((ucontext_t*)from->uc, (ucontext_t*)to->uc); }
#endif

static Fiber* new_fiber() {
    size_t len = kStack + page;
    char* m = (char*)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    mprotect(m, page, PROT_NONE);
    Fiber* f = new Fiber();
    f->map = m;
    f->lo = m + page;
    f->fresh = true;
    f->color = (size_t)(npool % 61) * 5 * 64;  // 61 prime, 5 lines apart: 305 lines before a repeat
    pool[npool++] = f;
    return f;
}

// The lines a waiting thread's fiber resumes on (saved registers, then the frames of the executor call,
// the kernel and the entry): fetched one thread ahead, they are in L1 when the switch pops them (a block
// of 256 waiting threads keeps more stack lines than L1 holds).
static inline void prefetch_stack(const Fiber* f) {
    const char* sp = (const char*)f->sp;
    for (int i = 0; i < 5; i++) __builtin_prefetch(sp + 64 * i);
}

static Fiber* acquire() {
    Fiber* f = nfree ? freelist[--nfree] : new_fiber();
    if (nfree) prefetch_stack(freelist[nfree - 1]);  // the next block's next thread
    if (f && f->fresh) {
        ctx_init(f);
        f->fresh = false;
    }
    return f;
}

// ------------------------------------------------------------------ threads
static inline void set_current(int t) {
    L.cur = t;
    gpuenv_state.tid = L.threads[t].tid;
    gpuenv_state.lin = t;
}

// The fiber to run next without going through the scheduler: the first queued thread, else the next
// thread a barrier released, else a fresh fiber for the next thread not started yet; nullptr when the
// scheduler must decide (warp operations, barriers, the end of the block). The order is the scheduler's,
// so runs stay deterministic.
static inline Fiber* next_fiber() {
    if (__builtin_expect(L.aborted, 0)) return nullptr;
    int t;
    if (L.rq_head < L.rq_tail) t = L.runq[L.rq_head++];
    else if (L.seq_next < L.seq_end) {
        t = L.seq_next++;
        if (L.seq_next + 1 < L.seq_end) prefetch_stack(L.threads[L.seq_next + 1].fiber);
    } else if (L.next_new < L.nthreads) {
        Fiber* f = acquire();
        if (f) L.cur_fiber = f;
        return f;
    } else return nullptr;
    Thread& th = L.threads[t];
    th.state = T_RUN;
    set_current(t);
    return L.cur_fiber = th.fiber;
}

// Starts the next thread not started yet on the current fiber; false when none is left.
static inline bool start_new() {
    if (L.next_new >= L.nthreads || L.aborted) return false;
    int t = L.next_new++;
    L.threads[t].fiber = L.cur_fiber;
    L.threads[t].state = T_RUN;
    set_current(t);
    return true;
}

// A fiber takes the next thread not started yet and runs it; the kernel module's entry then goes on to
// the next ones through gpuenv_next_thread, so a block without barriers is one loop on one fiber.
static void fiber_main() {
    for (;;) {
        Fiber* f = L.cur_fiber;
        if (start_new()) L.d->entry(L.d->args);
        freelist[nfree++] = f;  // resumed from here when taken again: the loop starts its next thread
        Fiber* n = L.rq_head < L.rq_tail || L.seq_next < L.seq_end ? next_fiber() : nullptr;
        if (n) fiber_to_fiber(f, n);
        else to_sched(f);
    }
}

void set_where(gpuenv_report_t* r) {
    r->block[0] = gpuenv_state.bid.x;
    r->block[1] = gpuenv_state.bid.y;
    r->block[2] = gpuenv_state.bid.z;
    r->thread[0] = gpuenv_state.tid.x;
    r->thread[1] = gpuenv_state.tid.y;
    r->thread[2] = gpuenv_state.tid.z;
}

void fail_in_fiber() {
    L.aborted = true;
    to_sched(L.cur_fiber);
    __builtin_unreachable();
}

// The current thread waits (barrier, warp operation, lockstep); the next runnable one goes on directly:
// one switch per thread per barrier, not two through the scheduler.
static inline void wait_here(uint8_t st, void* site) {
    Thread& th = L.threads[L.cur];
    th.state = st;
    th.site = site;
    Fiber* me = L.cur_fiber;
    Fiber* n = next_fiber();
    if (n) fiber_to_fiber(me, n);
    else to_sched(me);
}

void block_here(uint8_t st, void* site) {
    if (st != T_BAR) L.nwait++;
    wait_here(st, site);
}

static inline void watchdog_poll() {
    if (__builtin_expect(L.wd_pending, 0)) check_watchdog_pending();
}

}  // namespace gx

using namespace gx;

// The current thread is done: start the next one on this fiber (1), or 0 when none is left.
extern "C" int gpuenv_next_thread() {
    L.threads[L.cur].state = T_EXIT;
    L.nlive--;
    return start_new();
}

extern "C" int gpuenv_barrier(const char* file, int where, int kind, int value) {
    watchdog_poll();
    Thread& th = L.threads[L.cur];
    th.file = file;
    th.where = where;
    th.op = kind;
    th.val = value != 0;
    if (L.nbar++ == 0) {
        L.bar_file = file;
        L.bar_where = where;
        L.bar_op = kind;
        L.bar_count = 0;
    } else if (where != L.bar_where || kind != L.bar_op || (file != L.bar_file && strcmp(file, L.bar_file))) {
        L.bar_div = true;
    }
    L.bar_count += value != 0;
    wait_here(T_BAR, __builtin_return_address(0));
    return (int)L.bar_res;
}

extern "C" uint64_t gpuenv_warp_op(int op, uint64_t value, int arg, int width, const char* file, int where) {
    watchdog_poll();
    Thread& th = L.threads[L.cur];
    th.op = op;
    th.val = value;
    th.arg = arg;
    th.width = width;
    th.file = file;
    th.where = where;
    L.nwait++;
    wait_here(T_WARP, __builtin_return_address(0));
    return L.threads[L.cur].res;
}

namespace gx {
static void push(int t) { L.runq[L.rq_tail++] = t; }

static void resume(int t) {
    Thread& th = L.threads[t];
    L.cur_fiber = th.fiber;
    th.state = T_RUN;
    set_current(t);
    to_fiber(th.fiber);
}

// Runs one block to its end; false when the launch stopped (the report says why).
static bool run_block() {
    L.next_new = 0;
    L.nlive = L.nthreads;
    L.rq_head = L.rq_tail = 0;
    L.seq_next = L.seq_end = 0;
    L.nwait = L.nbar = 0;
    L.bar_div = false;
    L.epoch = 1;
    L.pend.kind = 0;
    L.pend_ws.kind = 0;
    memset(L.warp_sync, 0, sizeof L.warp_sync);
    for (;;) {
        for (;;) {
            if (L.rq_head < L.rq_tail) {
                resume(L.runq[L.rq_head++]);
            } else if (L.seq_next < L.seq_end) {
                resume(L.seq_next++);
            } else if (L.next_new < L.nthreads) {
                Fiber* f = acquire();
                if (!f) {
                    L.r->kind = GPUENV_USAGE;
                    textf(L.r->text, sizeof L.r->text, "out of memory for fiber stacks");
                    return false;
                }
                L.cur_fiber = f;
                to_fiber(f);
            } else {
                break;
            }
            if (L.aborted) return false;
        }
        L.rq_head = L.rq_tail = 0;
        int n = L.nlive && L.nwait ? resolve_warps() : 0;
        if (n < 0) return false;
        if (n > 0) continue;
        if (L.pend_ws.kind) {  // a conflict within one wave, and no race between waves in the interval
            memcpy(L.pend_ws.warnings, L.r->warnings, sizeof L.pend_ws.warnings);
            memcpy(L.r, &L.pend_ws, sizeof L.pend_ws);
            return false;
        }
        if (L.pend.kind) {  // an uninitialised read no later write in the interval explained as a race
            memcpy(L.pend.warnings, L.r->warnings, sizeof L.pend.warnings);
            memcpy(L.r, &L.pend, sizeof L.pend);
            return false;
        }
        if (L.nlive == 0) return true;
        if (!release_barrier()) return false;
    }
}

void enqueue(int t) { push(t); }

// ------------------------------------------------------------------ module, signals, watchdog
static void after_abort() {
    // fibers left mid-thread are re-initialised before their next use
    nfree = 0;
    for (int i = 0; i < npool; i++) {
        pool[i]->fresh = true;
        freelist[nfree++] = pool[i];
    }
}

static void poison_block() {
    gpuenv_launch_t* d = L.d;
    poison_vars();
    if (d->shared_bytes) memset(dyn_buf, 0xFF, d->shared_bytes);
    if (L.check) reset_shadow();
}

static bool run_grid() {
    gpuenv_launch_t* d = L.d;
    for (unsigned z = 0; z < d->grid[2]; z++)
        for (unsigned y = 0; y < d->grid[1]; y++)
            for (unsigned x = 0; x < d->grid[0]; x++) {
                gpuenv_state.bid = {x, y, z};
                poison_block();
                if (!run_block()) return false;
                if (L.wd_pending) {
                    L.r->kind = GPUENV_WATCHDOG;
                    set_where(L.r);
                    textf(L.r->text, sizeof L.r->text, "the launch ran for more than %.3g s", d->watchdog_s);
                    return false;
                }
            }
    return true;
}

}  // namespace gx

extern "C" int gpuenv_launch(gpuenv_launch_t* d, gpuenv_report_t* r) {
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    if (!dyn_buf) {
        dyn_buf = (char*)mmap(nullptr, kDynMax + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mprotect(dyn_buf + kDynMax, page, PROT_NONE);
    }
    memset(r, 0, sizeof *r);
    unsigned n = d->block[0] * d->block[1] * d->block[2];
    if (n == 0 || n > (unsigned)kMaxThreads || d->shared_bytes > kDynMax || (d->warp_size != 32 && d->warp_size != 64)) {
        r->kind = GPUENV_USAGE;
        textf(r->text, sizeof r->text, "bad launch: %u threads per block (limit %d), %lu bytes of dynamic shared memory (limit %zu)",
              n, kMaxThreads, (unsigned long)d->shared_bytes, kDynMax);
        return r->kind;
    }
    L.d = d;
    L.r = r;
    L.nthreads = (int)n;
    L.warp = d->warp_size;
    L.warp_shift = d->warp_size == 64 ? 6 : 5;
    for (unsigned t = 0; t < n; t++) {
        unsigned bx = d->block[0], by = d->block[1];
        L.threads[t].tid = {t % bx, (t / bx) % by, t / (bx * by)};
    }
    L.aborted = false;
    L.wd_pending = 0;
    L.check = d->check & GPUENV_CHECK_ACCESS;
    L.lockstep = d->check & GPUENV_LOCKSTEP;
    find_module((void*)d->entry);
    setup_vars();
    gpuenv_state.bdim = {d->block[0], d->block[1], d->block[2]};
    gpuenv_state.gdim = {d->grid[0], d->grid[1], d->grid[2]};
    gpuenv_state.dyn_shared = dyn_buf;
    L.t0 = now();
    install_signals();
    L.active = true;
    bool ok = false;
    if (sigsetjmp(L.jb, 1) == 0) ok = run_grid();
    L.active = false;
    uninstall_signals();
    if (!ok) after_abort();
    return r->kind;
}
