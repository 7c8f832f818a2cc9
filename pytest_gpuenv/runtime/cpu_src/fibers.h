// The fibers of one worker (Launch::pool), included by executor.cpp only (after fiber_switch.h): a free
// fiber (on Launch::freelist) waits at the start of fiber_main, or, within a launch, in the module's entry
// (gpuenv_next_thread) for the next thread it starts; every fiber starts afresh at a launch's start.
#pragma once
#include "executor_int.h"
#include "fiber_switch.h"

#include <sys/mman.h>
#include <unistd.h>

namespace gx {

__attribute__((noinline)) static Fiber* new_fiber() {
    static size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = kStack + page;
    char* m = (char*)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    mprotect(m, page, PROT_NONE);
    Fiber* f = new Fiber();
    f->map = m;
    f->lo = m + page;
    f->color = (size_t)(L.npool % 61) * 5 * 64;  // 61 prime, 5 lines apart: 305 lines before a repeat
    ctx_init(f);
    L.pool[L.npool++] = f;
    return f;
}

// The lines a waiting thread's fiber resumes on (saved registers, then the frames of the executor call,
// the kernel and the entry): fetched one thread ahead, they are in L1 when the switch pops them (a block
// of 256 waiting threads keeps more stack lines than L1 holds).
static inline void prefetch_stack(const void* at) {
    const char* sp = (const char*)at;
    for (int i = 0; i < 5; i++) __builtin_prefetch(sp + 64 * i);
}

// A free fiber, or nullptr when no stack can be mapped.
static inline Fiber* acquire() {
    Launch& l = L;
    if (__builtin_expect(!l.nfree, 0)) return new_fiber();
    Fiber* f = l.freelist[--l.nfree];
    if (l.nfree) prefetch_stack(l.freelist[l.nfree - 1]->sp);  // the next block's next thread
    return f;
}

// Every fiber free and at the start of fiber_main, at each launch's start: they wait in the last launch's entry,
// or last ran on another OS thread, or an aborted launch left some mid-thread.
void reset_fibers() {
    Launch& l = L;
    l.tied = false;
    l.nfree = 0;
    for (int i = 0; i < l.npool; i++) {
        ctx_init(l.pool[i]);
        l.freelist[l.nfree++] = l.pool[i];
    }
}

// A fiber that waited for its thread of the next block (Launch::tied) or for one that never started is free.
static void untie(int t) {
    Launch& l = L;
    Fiber* f = l.threads[t].fiber;
    ctx_init(f);
    l.freelist[l.nfree++] = f;
}

}  // namespace gx
