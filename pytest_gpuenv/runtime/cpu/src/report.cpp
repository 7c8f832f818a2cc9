// What a report says (gpuenv_report_t): its text, appended piece by piece; the site, as an offset in the
// kernel module (found once a launch by its entry: its load address and segments); the block and thread.
#include "executor_int.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

namespace gx {

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

static int phdr_cb(struct dl_phdr_info* info, size_t, void* data) {
    if (info->dlpi_addr != (uintptr_t)data) return 0;
    Launch& l = current_launch();
    l.nseg = 0;
    for (int i = 0; i < info->dlpi_phnum && l.nseg < 8; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        l.seg_lo[l.nseg] = lo;
        l.seg_hi[l.nseg++] = hi;
        if (ph.p_flags & PF_X) {
            l.text_lo = lo;
            l.text_hi = hi;
        }
    }
    return 1;
}

void find_module(void* entry) {
    Launch& l = current_launch();
    Dl_info info;
    l.mod_base = l.text_lo = l.text_hi = 0;
    l.nseg = 0;
    if (dladdr(entry, &info) && info.dli_fbase) {
        l.mod_base = (uintptr_t)info.dli_fbase;
        dl_iterate_phdr(phdr_cb, info.dli_fbase);
    }
}

uint64_t pc_rel(const void* pc) {
    Launch& l = current_launch();
    uintptr_t p = (uintptr_t)pc;
    return (p >= l.text_lo && p < l.text_hi) ? p - l.mod_base : 0;
}

// (module-relative, minus one: it is a return address) where a fault inside libc (free() of a bad pointer,
// a memset in the fast mode) was called from
uint64_t caller_in_kernel() {
    void* buf[32];
    int n = backtrace(buf, 32);
    for (int i = 0; i < n; i++)
        if (uint64_t r = pc_rel(buf[i])) return r - 1;
    return 0;
}

void where_now(uint32_t block[3], uint32_t thread[3]) {
    const gpuenv_state_t* st = current_launch().st;
    block[0] = st->bid.x;
    block[1] = st->bid.y;
    block[2] = st->bid.z;
    thread[0] = st->tid.x;
    thread[1] = st->tid.y;
    thread[2] = st->tid.z;
}

void set_where(gpuenv_report_t* r) { where_now(r->block, r->thread); }

void set_thread(gpuenv_report_t* r, int t) {
    Launch& l = current_launch();
    gpuenv_launch_t* d = l.d;
    r->block[0] = l.st->bid.x;
    r->block[1] = l.st->bid.y;
    r->block[2] = l.st->bid.z;
    r->thread[0] = t % d->block[0];
    r->thread[1] = (t / d->block[0]) % d->block[1];
    r->thread[2] = t / (d->block[0] * d->block[1]);
}

}  // namespace gx
