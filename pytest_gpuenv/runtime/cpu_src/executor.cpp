// The CPU executor: every GPU thread of a block is a fiber on this one OS thread, run by a
// deterministic scheduler. A thread runs until it exits or waits at a barrier or a warp operation;
// when every thread of the block waits, warp operations resolve (lanes at the same site form the
// active mask) and then the barrier releases, or the launch stops with a report (divergent barrier,
// threads that already returned). Blocks run one after another. Faults (a fiber's guard page, a
// wild pointer) and the watchdog leave the launch through siglongjmp; nothing stays broken.
#include "executor_int.h"

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
static char* dyn_buf;
static size_t page;

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

static void ctx_init(Fiber* f) {
    uintptr_t top = ((uintptr_t)(f->lo + kStack)) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = nullptr;              // fake return address of fiber_main
    *--sp = (void*)&fiber_main;   // gpuenv_switch returns here
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    f->sp = sp;
}
static inline void to_fiber(Fiber* f) { gpuenv_switch(&L.sched_sp, f->sp); }
static inline void to_sched(Fiber* f) { gpuenv_switch(&f->sp, L.sched_sp); }
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
    pool[npool++] = f;
    return f;
}

static Fiber* acquire() {
    Fiber* f = nfree ? freelist[--nfree] : new_fiber();
    if (f && f->fresh) {
        ctx_init(f);
        f->fresh = false;
    }
    return f;
}

// ------------------------------------------------------------------ threads
static void set_current(int t) {
    gpuenv_launch_t* d = L.d;
    L.cur = t;
    unsigned bx = d->block[0], by = d->block[1];
    gpuenv_state.tid.x = t % bx;
    gpuenv_state.tid.y = (t / bx) % by;
    gpuenv_state.tid.z = t / (bx * by);
    gpuenv_state.lin = t;
}

static void fiber_main() {
    for (;;) {
        Fiber* f = L.cur_fiber;
        while (L.next_new < L.nthreads && !L.aborted) {
            int t = L.next_new++;
            L.threads[t].fiber = f;
            L.threads[t].state = T_RUN;
            set_current(t);
            L.d->entry(L.d->args);
            L.threads[t].state = T_EXIT;
            L.nlive--;
        }
        freelist[nfree++] = f;
        to_sched(f);
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

static void block_here(uint8_t st, void* site) {
    Thread& th = L.threads[L.cur];
    th.state = st;
    th.site = site;
    to_sched(L.cur_fiber);
}

static void check_watchdog_pending() {
    if (L.wd_pending && !L.aborted) {
        L.r->kind = GPUENV_WATCHDOG;
        set_where(L.r);
        textf(L.r->text, sizeof L.r->text, "the launch ran for more than %.3g s", L.d->watchdog_s);
        fail_in_fiber();
    }
}

}  // namespace gx

using namespace gx;

extern "C" void gpuenv_syncthreads(int line) {
    check_watchdog_pending();
    L.threads[L.cur].arg = line;  // with the call site: calls the compiler merged stay distinct
    block_here(T_BAR, __builtin_return_address(0));
}

extern "C" uint64_t gpuenv_warp_op(int op, uint64_t value, int arg, int width) {
    check_watchdog_pending();
    Thread& th = L.threads[L.cur];
    th.op = op;
    th.val = value;
    th.arg = arg;
    th.width = width;
    block_here(T_WARP, __builtin_return_address(0));
    return L.threads[L.cur].res;
}

extern "C" void gpuenv_assert_fail(const char* expr, const char* file, unsigned line, const char* fn) {
    L.r->kind = GPUENV_ASSERT;
    set_where(L.r);
    L.r->pc = pc_rel(__builtin_return_address(0));
    textf(L.r->text, sizeof L.r->text, "device assertion `%s` failed at %s:%u in %s", expr, file, line, fn);
    fail_in_fiber();
}

extern "C" void gpuenv_trap(void) {
    L.r->kind = GPUENV_ASSERT;
    set_where(L.r);
    L.r->pc = pc_rel(__builtin_return_address(0));
    textf(L.r->text, sizeof L.r->text, "__trap() called");
    fail_in_fiber();
}

extern "C" int gpuenv_printf(const char* fmt, ...) {
    gpuenv_launch_t* d = L.d;
    if (!d || !d->out) return 0;
    va_list ap;
    va_start(ap, fmt);
    uint64_t room = d->out_len < d->out_cap ? d->out_cap - d->out_len : 0;
    int n = vsnprintf(d->out + d->out_len, room, fmt, ap);
    va_end(ap);
    if (n > 0) d->out_len += (uint64_t)n < room ? (uint64_t)n : room ? room - 1 : 0;
    return n;
}

namespace gx {
int resolve_warps();                  // warps.cpp
bool release_barrier();               // warps.cpp

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
    L.epoch = 1;
    L.pend.kind = 0;
    memset(L.warp_sync, 0, sizeof L.warp_sync);
    for (;;) {
        for (;;) {
            if (L.rq_head < L.rq_tail) {
                resume(L.runq[L.rq_head++]);
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
        int n = L.nlive ? resolve_warps() : 0;
        if (n < 0) return false;
        if (n > 0) continue;
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
static int phdr_cb(struct dl_phdr_info* info, size_t, void* data) {
    if (info->dlpi_addr != (uintptr_t)data) return 0;
    L.nseg = 0;
    for (int i = 0; i < info->dlpi_phnum && L.nseg < 8; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        L.seg_lo[L.nseg] = lo;
        L.seg_hi[L.nseg++] = hi;
        if (ph.p_flags & PF_X) {
            L.text_lo = lo;
            L.text_hi = hi;
        }
    }
    return 1;
}

static void find_module(void* entry) {
    Dl_info info;
    L.mod_base = L.text_lo = L.text_hi = 0;
    L.nseg = 0;
    if (dladdr(entry, &info) && info.dli_fbase) {
        L.mod_base = (uintptr_t)info.dli_fbase;
        dl_iterate_phdr(phdr_cb, info.dli_fbase);
    }
}

static struct sigaction old_act[4];
static const int fault_sigs[4] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
static struct sigaction old_wd;
static const int kWdSig = 37;  // a real-time signal nothing else here uses
static timer_t wd_timer;
static bool wd_timer_ok;
static stack_t old_ss;
static char* alt_stack;

static uintptr_t sig_pc(void* uc) {
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t*)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)((ucontext_t*)uc)->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

uint64_t caller_in_kernel();  // server.cpp

static void on_fault(int sig, siginfo_t* si, void* uc) {
    if (!L.active) {
        for (int i = 0; i < 4; i++)
            if (fault_sigs[i] == sig) sigaction(sig, &old_act[i], nullptr);
        return;  // the instruction faults again and the previous handler sees it
    }
    uintptr_t a = (uintptr_t)si->si_addr;
    gpuenv_report_t* r = L.r;
    r->kind = GPUENV_FAULT;
    for (int i = 0; i < npool; i++)
        if (a >= (uintptr_t)pool[i]->map && a < (uintptr_t)pool[i]->lo) r->kind = GPUENV_STACK;
    set_where(r);
    r->addr = a;
    r->pc = pc_rel((void*)sig_pc(uc));
    if (!r->pc) r->pc = caller_in_kernel();  // server.cpp: the fault is in a library the kernel called
    const char* what = sig == SIGSEGV ? "segmentation fault" : sig == SIGBUS ? "bus error"
                     : sig == SIGILL ? "illegal instruction (__builtin_trap?)" : "arithmetic exception (integer division by zero?)";
    if (r->kind == GPUENV_STACK)
        textf(r->text, sizeof r->text, "stack overflow: the thread used more than its %zu KiB stack (unbounded recursion, or a huge local array)", kStack / 1024);
    else
        textf(r->text, sizeof r->text, "%s at address 0x%lx", what, (unsigned long)a);
    siglongjmp(L.jb, 1);
}

static void on_watchdog(int, siginfo_t*, void* uc) {
    if (!L.active || now() - L.t0 < L.d->watchdog_s) return;
    uintptr_t pc = sig_pc(uc);
    if (pc >= L.text_lo && pc < L.text_hi) {  // in kernel code: no lock is held, leave at once
        L.r->kind = GPUENV_WATCHDOG;
        set_where(L.r);
        L.r->pc = pc - L.mod_base;
        textf(L.r->text, sizeof L.r->text, "the launch ran for more than %.3g s", L.d->watchdog_s);
        siglongjmp(L.jb, 1);
    }
    L.wd_pending = 1;  // in the executor or a library: the next executor call stops the launch
}

static void install() {
    if (!alt_stack) alt_stack = (char*)mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {};
    ss.ss_sp = alt_stack;
    ss.ss_size = 1 << 16;
    sigaltstack(&ss, &old_ss);
    struct sigaction sa = {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++) sigaction(fault_sigs[i], &sa, &old_act[i]);
    sa.sa_sigaction = on_watchdog;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigaction(kWdSig, &sa, &old_wd);
    if (!wd_timer_ok) {
        sigevent ev = {};
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = kWdSig;
        ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
        wd_timer_ok = timer_create(CLOCK_MONOTONIC, &ev, &wd_timer) == 0;
    }
    if (wd_timer_ok) {
        itimerspec its = {};
        its.it_value.tv_nsec = its.it_interval.tv_nsec = 100 * 1000 * 1000;
        timer_settime(wd_timer, 0, &its, nullptr);
    }
}

static void uninstall() {
    if (wd_timer_ok) {
        itimerspec its = {};
        timer_settime(wd_timer, 0, &its, nullptr);
    }
    for (int i = 0; i < 4; i++) sigaction(fault_sigs[i], &old_act[i], nullptr);
    sigaction(kWdSig, &old_wd, nullptr);
    if (!(old_ss.ss_flags & SS_DISABLE)) sigaltstack(&old_ss, nullptr);
    else {
        stack_t off = {};
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, nullptr);
    }
}

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
    if (d->shared_hi > d->shared_lo) memset(d->shared_lo, 0xFF, d->shared_hi - d->shared_lo);
    if (d->shared_bytes) memset(dyn_buf, 0xFF, d->shared_bytes);
    if (d->check) reset_shadow();
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
    L.aborted = false;
    L.wd_pending = 0;
    find_module((void*)d->entry);
    gpuenv_state.bdim = {d->block[0], d->block[1], d->block[2]};
    gpuenv_state.gdim = {d->grid[0], d->grid[1], d->grid[2]};
    gpuenv_state.dyn_shared = dyn_buf;
    L.t0 = now();
    install();
    L.active = true;
    bool ok = false;
    if (sigsetjmp(L.jb, 1) == 0) ok = run_grid();
    L.active = false;
    uninstall();
    if (!ok) after_abort();
    return r->kind;
}
