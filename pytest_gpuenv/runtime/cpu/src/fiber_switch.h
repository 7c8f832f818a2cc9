// The context switch between fibers, included by executor.cpp only (its statics are that file's): the
// hand-written x86-64 switch, or ucontext where there is none (GPUENV_UCONTEXT=1 builds it anywhere).
#pragma once
#include "executor_int.h"

#ifdef GPUENV_UCONTEXT
#include <ucontext.h>
#endif

namespace gx {

static void fiber_main();

#if defined(__x86_64__) && !defined(GPUENV_UCONTEXT)
// Saves the callee-saved registers and the stack pointer in *save and continues on stack `to`: a
// barrier's fast path is a tail call with no frame of its own (a resumed thread whose barrier returns a
// value reads it from L.bar_res, which the next release alone changes).
// It leaves through an indirect jump to the popped return address, not `ret`: the return-stack predictor
// always misses a switch's `ret` (the address belongs to another stack), while the jump's target, a
// waiting thread's barrier call site, is mostly the same from one switch to the next and is predicted.
extern "C" void gpuenv_switch(void** save, void* to);
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
// Contexts: a waiting thread t's is saved in L.sps[t], a free fiber's (one no thread waits on) in the Fiber,
// the scheduler's in L.sched_sp. park_*: save the current one there and continue at `to`.
static inline void* thread_ctx(unsigned t) { return L.sps[t]; }
static inline void* fiber_ctx(const Fiber* f) { return f->sp; }
static inline void* sched_ctx() { return L.sched_sp; }
static inline void park_thread(unsigned me, void* to) { gpuenv_switch(&L.sps[me], to); }
static inline void park_fiber(Fiber* me, void* to) { gpuenv_switch(&me->sp, to); }
static inline void from_sched(void* to) { gpuenv_switch(&L.sched_sp, to); }
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
// (a ucontext stays with its fiber: a waiting thread's is its fiber's)
static inline void* thread_ctx(unsigned t) { return L.threads[t].fiber->uc; }
static inline void* fiber_ctx(const Fiber* f) { return f->uc; }
static inline void* sched_ctx() {
    if (!L.sched_uc) L.sched_uc = new ucontext_t;
    return L.sched_uc;
}
static inline void park_fiber(Fiber* me, void* to) { swapcontext((ucontext_t*)me->uc, (ucontext_t*)to); }
static inline void park_thread(unsigned me, void* to) { park_fiber(L.threads[me].fiber, to); }
static inline void from_sched(void* to) { swapcontext((ucontext_t*)sched_ctx(), (ucontext_t*)to); }
#endif

}  // namespace gx
