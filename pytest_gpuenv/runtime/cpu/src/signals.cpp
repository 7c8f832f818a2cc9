// Faults and the watchdog: a fault handler on an alternate stack turns a fiber's guard page or a wild
// pointer into a report and leaves the launch through siglongjmp (to work(), launch.cpp); a timer signal
// every 100 ms stops a launch that ran past its watchdog (at once in kernel code, else at the next executor
// call). Also the kernel's other ways out of a launch: a device assert and __trap.
#include "executor_int.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

namespace gx {

// a is in a fiber's guard page
static bool fiber_guard_hit(uintptr_t a) {
    Launch& l = current_launch();
    for (int i = 0; i < l.npool; i++)
        if (a >= (uintptr_t)l.pool[i]->map && a < (uintptr_t)l.pool[i]->lo) return true;
    return false;
}

void watchdog_text(gpuenv_report_t* r) {
    Launch& l = current_launch();
    // a cooperative launch's blocks take turns at grid.sync() only (coop.cpp): one that spins until another
    // block writes never lets that block run
    textf(r->text, sizeof r->text, "the launch ran for more than %.3g s%s", l.d->watchdog_s,
          l.d->check & GPUENV_COOPERATIVE ? " (a cooperative launch runs one block at a time between grid.sync() calls: "
                                           "a block that spins until another block writes waits for ever)" : "");
}

void check_watchdog_pending() {
    Launch& l = current_launch();
    if (l.wd_pending && !l.aborted) {
        l.r->kind = GPUENV_WATCHDOG;
        set_where(l.r);
        watchdog_text(l.r);
        fail_in_fiber();
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

uintptr_t sig_pc(void* uc) {
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t*)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)((ucontext_t*)uc)->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

static void on_fault(int sig, siginfo_t* si, void* uc) {
    if (!cur_launch || !current_launch().active) {
        for (int i = 0; i < 4; i++)
            if (fault_sigs[i] == sig) sigaction(sig, &old_act[i], nullptr);
        return;  // the instruction faults again and the previous handler sees it
    }
    Launch& l = current_launch();
    // a non-canonical address (a wild pointer far off) raises #GP, SIGSEGV, or #SS, SIGBUS, where the compiler
    // happened to address it through rbp or rsp; both come from the kernel (SI_KERNEL) with no address: one report
    if (sig == SIGBUS && si->si_code == SI_KERNEL) sig = SIGSEGV;
    uintptr_t a = (uintptr_t)si->si_addr;
    gpuenv_report_t* r = l.r;
    r->kind = fiber_guard_hit(a) ? GPUENV_STACK : GPUENV_FAULT;
    set_where(r);
    r->addr = a;
    r->pc = pc_rel((void*)sig_pc(uc));
    if (!r->pc) r->pc = caller_in_kernel();  // the fault is in a library the kernel called
    const char* what = sig == SIGSEGV ? "segmentation fault" : sig == SIGBUS ? "bus error"
                     : sig == SIGILL ? "illegal instruction (__builtin_trap?)" : "arithmetic exception (integer division by zero?)";
    if (r->kind == GPUENV_STACK)
        textf(r->text, sizeof r->text, "stack overflow: the thread used more than its %zu KiB stack (unbounded recursion, or a huge local array)", kStack / 1024);
    else
        textf(r->text, sizeof r->text, "%s at address 0x%lx", what, (unsigned long)a);
    siglongjmp(l.jb, 1);
}

static pthread_t helper_tids[kMaxWorkers];
static volatile sig_atomic_t nhelpers, helper_done[kMaxWorkers];

// n > 0: the helpers' threads, for the watchdog to forward its signal to; 0 (before they start and after
// they were joined): none. A helper marks itself done before it ends (a joined thread is never signalled).
void wake_workers(const pthread_t* tids, int n) {
    if (n == 0) {
        nhelpers = 0;
        for (int i = 0; i < kMaxWorkers; i++) helper_done[i] = 0;
        return;
    }
    for (int i = 0; i < n; i++) helper_tids[i] = tids[i];
    nhelpers = n;
}

static void on_watchdog(int, siginfo_t*, void* uc) {
    if (!cur_launch) return;
    Launch& l = current_launch();
    // the timer's thread: the helper workers see the same deadline in their own context (also once this
    // worker's own blocks are done and it waits for theirs; nhelpers is 0 outside a launch)
    if (l.worker == 0 && nhelpers && now() - l.t0 >= l.d->watchdog_s)
        for (int i = 0; i < nhelpers; i++)
            if (!helper_done[i]) pthread_kill(helper_tids[i], kWdSig);
    if (!l.active || now() - l.t0 < l.d->watchdog_s) return;
    uintptr_t pc = sig_pc(uc);
    if (pc >= l.text_lo && pc < l.text_hi) {  // in kernel code: no lock is held, leave at once
        l.r->kind = GPUENV_WATCHDOG;
        set_where(l.r);
        l.r->pc = pc - l.mod_base;
        watchdog_text(l.r);
        siglongjmp(l.jb, 1);
    }
    l.wd_pending = 1;  // in the executor or a library: the next executor call stops the launch
}

void install_signals() {
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

void worker_signals(bool on) {
    Launch& l = current_launch();
    stack_t ss = {};
    if (on) {
        if (!l.alt_stack) l.alt_stack = (char*)mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ss.ss_sp = l.alt_stack;
        ss.ss_size = 1 << 16;
    } else {
        ss.ss_flags = SS_DISABLE;
        helper_done[l.worker - 1] = 1;
    }
    sigaltstack(&ss, nullptr);
}

void uninstall_signals() {
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

}  // namespace gx

using namespace gx;

extern "C" void gpuenv_assert_fail(const char* expr, const char* file, unsigned line, const char* fn) {
    Launch& l = current_launch();
    l.r->kind = GPUENV_ASSERT;
    set_where(l.r);
    l.r->pc = pc_rel(__builtin_return_address(0));
    textf(l.r->text, sizeof l.r->text, "device assertion `%s` failed at %s:%u in %s", expr, file, line, fn);
    fail_in_fiber();
}

extern "C" void gpuenv_trap(void) {
    Launch& l = current_launch();
    l.r->kind = GPUENV_ASSERT;
    set_where(l.r);
    l.r->pc = pc_rel(__builtin_return_address(0));
    textf(l.r->text, sizeof l.r->text, "__trap() called");
    fail_in_fiber();
}
