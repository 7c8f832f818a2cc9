// The fibers of one worker (Launch::pool): each a stack of kStack bytes with a guard page below it, started
// at fiber_main, which starts the block's threads one after another on it. Also the context switch's own
// code (x86-64), a fiber's start, and the ways a thread leaves the running state out of line: waiting for a
// fiber not started yet, the launch stopping (fail_in_fiber), waiting at a warp operation or in lockstep.
#include "executor_int.h"
#include "fiber_switch.h"
#include "fibers.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace gx {

#if defined(__x86_64__) && !defined(GPUENV_UCONTEXT)
// gpuenv_switch(save, to): saves the callee-saved registers and the stack pointer in *save and continues on
// stack `to`: a barrier's fast path is a tail call with no frame of its own (a resumed thread whose barrier
// returns a value reads it from Launch::bar_res, which the next release alone changes).
// It leaves through an indirect jump to the popped return address, not `ret`: the return-stack predictor
// always misses a switch's `ret` (the address belongs to another stack), while the jump's target, a
// waiting thread's barrier call site, is mostly the same from one switch to the next and is predicted.
asm(R"(
.text
.globl gpuenv_switch
.hidden gpuenv_switch
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
    popq %rcx
    jmpq *%rcx
.size gpuenv_switch,.-gpuenv_switch
)");
#endif

// A fiber takes the next thread not started yet and runs it; the kernel module's entry then goes on to
// the next ones through gpuenv_next_thread, so a block without barriers is one loop on one fiber. The
// entry does not return within a launch: a fiber enters it once (work() starts every fiber afresh at a launch).
static void fiber_main() {
    for (;;) {
        if (start_new()) current_launch().entry(current_launch().d->args);
        free_fiber();
    }
}

#if defined(__x86_64__) && !defined(GPUENV_UCONTEXT)
// f's context: the start of fiber_main
static void ctx_init(Fiber* f) {
    uintptr_t top = stack_top(f);
    void** sp = (void**)top;
    *--sp = nullptr;              // fake return address of fiber_main
    *--sp = (void*)&fiber_main;   // gpuenv_switch returns here
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    f->sp = sp;
}
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
#endif

__attribute__((noinline)) Fiber* new_fiber() {
    Launch& l = current_launch();
    static size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = kStack + page;
    char* m = (char*)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    mprotect(m, page, PROT_NONE);
    Fiber* f = new Fiber();
    f->map = m;
    f->lo = m + page;
    f->color = (size_t)(l.npool % 61) * 5 * 64;  // 61 prime, 5 lines apart: 305 lines before a repeat
    ctx_init(f);
    l.pool[l.npool++] = f;
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
    Launch& l = current_launch();
    l.tied = false;
    l.nfree = 0;
    for (int i = 0; i < l.npool; i++) {
        ctx_init(l.pool[i]);
        l.freelist[l.nfree++] = l.pool[i];
    }
}

// A fiber that waited for its thread of the next block (Launch::tied) or for one that never started is free.
void untie(int t) {
    Launch& l = current_launch();
    Fiber* f = l.threads[t].fiber;
    ctx_init(f);
    l.freelist[l.nfree++] = f;
}

// The current thread waits for a fiber not started yet: out of line, so that wait_here's common paths make
// no call but the switch.
__attribute__((noinline)) void wait_for_new(int me) {
    Fiber* f = acquire();
    if (f) current_launch().cur_fiber = f;
    return park_thread(me, f ? fiber_ctx(f) : sched_ctx());
}

void fail_in_fiber() {
    if (current_launch().rr_run) leave_rr();  // (cur_fiber)
    Launch& l = current_launch();
    l.aborted = true;
    park_fiber(l.cur_fiber, sched_ctx());
    __builtin_unreachable();
}

void block_here(uint8_t st, void* site) {
    if (current_launch().rr_run) leave_rr();
    Launch& l = current_launch();
    if (st != T_BAR) l.nwait++;
    wait_here(st, site, l.cur);
}

}  // namespace gx
