// Checking mode: kernels are compiled with -fsanitize=thread and no TSan runtime; these entry points
// are called before every load and store. The current thread's stack, the executor state and the
// kernel module's own globals pass; shared memory goes through a shadow per 4-byte granule (races
// within one barrier interval, reads of memory nothing wrote in this block); argument buffers pass
// when the access lies inside one (const ones only for reads); anything else stops the launch before
// the access, naming the argument or variable, the offset, the block, the thread and the site.
#include "executor_int.h"

#include <string.h>

namespace gx {

Gran shadow_static[kGranules];
Gran shadow_dyn[kGranules];

void reset_shadow() {
    gpuenv_launch_t* d = L.d;
    size_t ns = (size_t)(d->shared_hi - d->shared_lo + 3) / 4, nd = (d->shared_bytes + 3) / 4;
    memset(shadow_static, 0, (ns < kGranules ? ns : kGranules) * sizeof(Gran));
    memset(shadow_dyn, 0, (nd < kGranules ? nd : kGranules) * sizeof(Gran));
}

__attribute__((noreturn)) static void report(int kind, int rkind, int rindex, int64_t off, uintptr_t a, size_t size,
                                             bool write, void* pc, int other) {
    gpuenv_report_t* r = L.r;
    r->kind = kind;
    r->region_kind = rkind;
    r->region_index = rindex;
    r->offset = off;
    r->addr = a;
    r->size = (int)size;
    r->is_write = write;
    r->pc = pc_rel(pc);
    r->other_thread = other;
    set_where(r);
    fail_in_fiber();
}

static inline bool synced(uint16_t u, uint16_t uws, unsigned w, uint16_t ws) {
    return u != kMany && (unsigned)(u / L.warp) == w && uws != ws;
}

static void pend_uninit(int rkind, int rindex, int64_t rel, uintptr_t a, size_t size, void* pc) {
    if (L.pend.kind) return;
    gpuenv_report_t* r = &L.pend;
    r->kind = GPUENV_UNINIT;
    r->region_kind = rkind;
    r->region_index = rindex;
    r->offset = rel;
    r->addr = a;
    r->size = (int)size;
    r->pc = pc_rel(pc);
    r->other_thread = -1;
    set_where(r);
}

// off: offset in the shadow's memory; vbase: where the named variable starts there
static void shared_access(Gran* sh, int rkind, int rindex, size_t off, size_t vbase, size_t size, uintptr_t a,
                          bool write, void* pc, bool atomic) {
    uint16_t t = (uint16_t)L.cur;
    unsigned w = L.cur / L.warp;
    uint16_t ws = L.warp_sync[w];
    uint32_t ep = L.epoch;
    size_t last = (off + size - 1) / 4;
    if (last >= kGranules) return;
    for (size_t g = off / 4; g <= last; g++) {
        size_t lo = g * 4 > off ? g * 4 : off, hi = g * 4 + 4 < off + size ? g * 4 + 4 : off + size;
        uint8_t mask = (uint8_t)(((1u << (hi - lo)) - 1) << (lo - g * 4));
        Gran& s = sh[g];
        int64_t rel = (int64_t)(off - vbase);
        if ((!write || atomic) && (s.init & mask) != mask) {
            if (atomic) report(GPUENV_UNINIT, rkind, rindex, rel, a, size, false, pc, -1);
            pend_uninit(rkind, rindex, rel, a, size, pc);  // a race if another thread writes it later
        }
        if (atomic) {
            s.init |= mask;
            continue;
        }
        bool wconf = s.wep == ep && s.wt != t && (s.wmask & mask) && !synced(s.wt, s.wws, w, ws);
        if (write) {
            if (wconf) report(GPUENV_RACE, rkind, rindex, rel, a, size, true, pc, s.wt);
            if (s.rep == ep && s.rt != t && (s.rmask & mask) && !synced(s.rt, s.rws, w, ws))
                report(GPUENV_RACE, rkind, rindex, rel, a, size, true, pc, s.rt == kMany ? -2 : s.rt);
            if (s.wep != ep || s.wt != t) s.wmask = 0;
            s.wep = ep;
            s.wt = t;
            s.wws = ws;
            s.wmask |= mask;
            s.init |= mask;
        } else {
            if (wconf) report(GPUENV_RACE, rkind, rindex, rel, a, size, false, pc, s.wt);
            if (s.rep != ep) {
                s.rep = ep;
                s.rt = t;
                s.rmask = 0;
            } else if (s.rt != t) {
                s.rt = kMany;
            }
            s.rws = ws;
            s.rmask |= mask;
        }
    }
}

static void check_static_shared(uintptr_t a, size_t size, bool write, void* pc, bool atomic) {
    gpuenv_launch_t* d = L.d;
    size_t off = a - (uintptr_t)d->shared_lo;
    int v = -1;
    for (int i = 0; i < d->nvars; i++)
        if (off >= d->vars[i].base && off < d->vars[i].base + d->vars[i].size) {
            v = i;
            break;
        }
    if (v < 0 || off + size > d->vars[v].base + d->vars[v].size) {
        if (v < 0)  // in a red zone: name the variable just before it
            for (int i = 0; i < d->nvars; i++)
                if (d->vars[i].base <= off && (v < 0 || d->vars[i].base > d->vars[v].base)) v = i;
        int64_t rel = v >= 0 ? (int64_t)off - (int64_t)d->vars[v].base : (int64_t)off;
        report(GPUENV_BOUNDS, GPUENV_R_SHARED, v, rel, a, size, write, pc, -1);
    }
    shared_access(shadow_static, GPUENV_R_SHARED, v, off, d->vars[v].base, size, a, write, pc, atomic);
}

constexpr int32_t kRedZone = 2;  // RO_REDZONE in runtime/_cpu_proto.py

static void check_other(uintptr_t a, size_t size, bool write, void* pc, bool atomic) {
    gpuenv_launch_t* d = L.d;
    if (a - (uintptr_t)gpuenv_state.dyn_shared < kDynMax + 4096) {
        size_t off = a - (uintptr_t)gpuenv_state.dyn_shared;
        if (off + size > d->shared_bytes) report(GPUENV_BOUNDS, GPUENV_R_DYN, 0, (int64_t)off, a, size, write, pc, -1);
        shared_access(shadow_dyn, GPUENV_R_DYN, 0, off, 0, size, a, write, pc, atomic);
        return;
    }
    bool ro_hit = false, red = false;
    int ro_index = -1;
    for (int i = 0; i < d->nregions; i++) {
        const gpuenv_region_t& g = d->regions[i];
        if (g.readonly == kRedZone) {  // the __device__ variables' section: between them are red zones
            red = red || (a < g.base + g.size && a + size > g.base);
            continue;
        }
        if (a >= g.base && a + size <= g.base + g.size) {
            if (!write || !g.readonly) return;
            ro_hit = true;
            ro_index = i;
        }
    }
    if (ro_hit) {
        const gpuenv_region_t& g = d->regions[ro_index];
        report(GPUENV_BOUNDS, GPUENV_R_ARG, g.index, (int64_t)(a - g.base), a, size, true, pc, -3);
    }
    for (int i = 0; i < L.nseg && !red; i++)
        if (a >= L.seg_lo[i] && a + size <= L.seg_hi[i]) return;  // the module's other data (literals, statics)
    // out of bounds: name the nearest argument buffer
    int best = -1;
    uint64_t dist = ~0ull;
    for (int i = 0; i < d->nregions; i++) {
        const gpuenv_region_t& g = d->regions[i];
        if (g.readonly == kRedZone || (red && g.index >= 0)) continue;
        uint64_t dd = a < g.base ? g.base - a : a < g.base + g.size ? 0 : a - (g.base + g.size);  // 0: a range that starts inside
        if (dd < dist) {
            dist = dd;
            best = i;
        }
    }
    if (best >= 0 && dist < (1ull << 30))
        report(GPUENV_BOUNDS, GPUENV_R_ARG, d->regions[best].index, (int64_t)(a - d->regions[best].base), a, size, write,
               pc, -1);
    report(GPUENV_BOUNDS, GPUENV_R_NONE, -1, 0, a, size, write, pc, -1);
}

void check_access(uintptr_t a, size_t size, bool write, void* pc) {
    if (a - (uintptr_t)&gpuenv_state < sizeof gpuenv_state) return;
    if (!L.active) return;  // a static initialiser of the kernel module, outside any launch
    if (a - (uintptr_t)L.cur_fiber->lo < kStack) return;
    if (L.wd_pending) {
        L.r->kind = GPUENV_WATCHDOG;
        set_where(L.r);
        L.r->pc = pc_rel(pc);
        textf(L.r->text, sizeof L.r->text, "the launch ran for more than %.3g s", L.d->watchdog_s);
        fail_in_fiber();
    }
    if (a - (uintptr_t)L.d->shared_lo < (uintptr_t)(L.d->shared_hi - L.d->shared_lo)) {
        check_static_shared(a, size, write, pc, false);
        return;
    }
    check_other(a, size, write, pc, false);
}

}  // namespace gx

using namespace gx;

extern "C" void gpuenv_atomic_check(void* p, int size, void* pc) {
    uintptr_t a = (uintptr_t)p;
    if (!L.active) return;
    if (L.wd_pending) check_access(a, (size_t)size, true, pc);
    if (a - (uintptr_t)L.cur_fiber->lo < kStack) return;
    if (a - (uintptr_t)L.d->shared_lo < (uintptr_t)(L.d->shared_hi - L.d->shared_lo))
        check_static_shared(a, (size_t)size, true, pc, true);
    else
        check_other(a, (size_t)size, true, pc, true);
}

#define GX_PC __builtin_return_address(0)
#define GX_RW(n)                                                                                  \
    extern "C" void __tsan_read##n(void* p) { check_access((uintptr_t)p, n, false, GX_PC); }         \
    extern "C" void __tsan_write##n(void* p) { check_access((uintptr_t)p, n, true, GX_PC); }         \
    extern "C" void __tsan_unaligned_read##n(void* p) { check_access((uintptr_t)p, n, false, GX_PC); } \
    extern "C" void __tsan_unaligned_write##n(void* p) { check_access((uintptr_t)p, n, true, GX_PC); } \
    extern "C" void __tsan_volatile_read##n(void* p) { check_access((uintptr_t)p, n, false, GX_PC); }  \
    extern "C" void __tsan_volatile_write##n(void* p) { check_access((uintptr_t)p, n, true, GX_PC); }
GX_RW(1)
GX_RW(2)
GX_RW(4)
GX_RW(8)
GX_RW(16)

extern "C" {
void __tsan_read_range(void* p, size_t n) { if (n) check_access((uintptr_t)p, n, false, GX_PC); }
void __tsan_write_range(void* p, size_t n) { if (n) check_access((uintptr_t)p, n, true, GX_PC); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_init() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}
void* __tsan_memcpy(void* d, const void* s, size_t n) {
    if (n) { check_access((uintptr_t)s, n, false, GX_PC); check_access((uintptr_t)d, n, true, GX_PC); }
    return memcpy(d, s, n);
}
void* __tsan_memmove(void* d, const void* s, size_t n) {
    if (n) { check_access((uintptr_t)s, n, false, GX_PC); check_access((uintptr_t)d, n, true, GX_PC); }
    return memmove(d, s, n);
}
void* __tsan_memset(void* d, int c, size_t n) {
    if (n) check_access((uintptr_t)d, n, true, GX_PC);
    return memset(d, c, n);
}
void __tsan_atomic_thread_fence(int) {}
void __tsan_atomic_signal_fence(int) {}
}

// __atomic builtins in device code (std::atomic): checked like atomics, done plainly (one OS thread)
#define GX_ATOMIC(bits, T)                                                                                      \
    extern "C" T __tsan_atomic##bits##_load(const volatile T* p, int) {                                         \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); return *p; }                                            \
    extern "C" void __tsan_atomic##bits##_store(volatile T* p, T v, int) {                                      \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); *p = v; }                                               \
    extern "C" T __tsan_atomic##bits##_exchange(volatile T* p, T v, int) {                                      \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); T o = *p; *p = v; return o; }                           \
    extern "C" T __tsan_atomic##bits##_fetch_add(volatile T* p, T v, int) {                                     \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); T o = *p; *p = o + v; return o; }                       \
    extern "C" T __tsan_atomic##bits##_fetch_sub(volatile T* p, T v, int) {                                     \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); T o = *p; *p = o - v; return o; }                       \
    extern "C" T __tsan_atomic##bits##_fetch_and(volatile T* p, T v, int) {                                     \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); T o = *p; *p = o & v; return o; }                       \
    extern "C" T __tsan_atomic##bits##_fetch_or(volatile T* p, T v, int) {                                      \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); T o = *p; *p = o | v; return o; }                       \
    extern "C" T __tsan_atomic##bits##_fetch_xor(volatile T* p, T v, int) {                                     \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); T o = *p; *p = o ^ v; return o; }                       \
    extern "C" int __tsan_atomic##bits##_compare_exchange_strong(volatile T* p, T* e, T v, int, int) {          \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); if (*p == *e) { *p = v; return 1; } *e = *p; return 0; } \
    extern "C" int __tsan_atomic##bits##_compare_exchange_weak(volatile T* p, T* e, T v, int, int) {            \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); if (*p == *e) { *p = v; return 1; } *e = *p; return 0; } \
    extern "C" T __tsan_atomic##bits##_compare_exchange_val(volatile T* p, T e, T v, int, int) {                \
        gpuenv_atomic_check((void*)p, sizeof(T), GX_PC); T o = *p; if (o == e) *p = v; return o; }
GX_ATOMIC(8, uint8_t)
GX_ATOMIC(16, uint16_t)
GX_ATOMIC(32, uint32_t)
GX_ATOMIC(64, uint64_t)
