// The context switch between fibers, inline for the scheduler's primitives (fibers.h): the hand-written
// x86-64 switch (its code and ctx_init are in fibers.cpp), or ucontext where there is none
// (GPUENV_UCONTEXT=1 builds it anywhere).
#pragma once
#include "executor_int.h"

#ifdef GPUENV_UCONTEXT
#include <ucontext.h>
#endif

namespace gx __attribute__((visibility("hidden"))) {

#if defined(__x86_64__) && !defined(GPUENV_UCONTEXT)
// Saves the callee-saved registers and the stack pointer in *save and continues on stack `to` (fibers.cpp).
extern "C" void gpuenv_switch(void** save, void* to);

// Stack colouring: the stacks are kStack + a page apart, so their tops would all fall on the same L1
// cache sets and the few lines a waiting thread keeps hot (saved registers, the kernel's frame) would
// evict each other at every switch; each fiber's stack starts a different number of cache lines down.
static inline uintptr_t stack_top(const Fiber* f) {
    return ((uintptr_t)(f->lo + kStack) - f->color) & ~(uintptr_t)63;
}

// Contexts: a waiting thread t's is saved in sps[t], a free fiber's (one no thread waits on) in the Fiber,
// the scheduler's in sched_sp. park_*: save the current one there and continue at `to`.
static inline void* thread_ctx(unsigned t) { return current_launch().sps[t]; }
static inline void* fiber_ctx(const Fiber* f) { return f->sp; }
static inline void* sched_ctx() { return current_launch().sched_sp; }
static inline void park_thread(unsigned me, void* to) { gpuenv_switch(&current_launch().sps[me], to); }
static inline void park_fiber(Fiber* me, void* to) { gpuenv_switch(&me->sp, to); }
static inline void from_sched(void* to) { gpuenv_switch(&current_launch().sched_sp, to); }
#else
// (a ucontext stays with its fiber: a waiting thread's is its fiber's)
static inline void* thread_ctx(unsigned t) { return current_launch().threads[t].fiber->uc; }
static inline void* fiber_ctx(const Fiber* f) { return f->uc; }
static inline void* sched_ctx() {
    Launch& l = current_launch();
    if (!l.sched_uc) l.sched_uc = new ucontext_t;
    return l.sched_uc;
}
static inline void park_fiber(Fiber* me, void* to) { swapcontext((ucontext_t*)me->uc, (ucontext_t*)to); }
static inline void park_thread(unsigned me, void* to) { park_fiber(current_launch().threads[me].fiber, to); }
static inline void from_sched(void* to) { swapcontext((ucontext_t*)sched_ctx(), (ucontext_t*)to); }
#endif

}  // namespace gx
