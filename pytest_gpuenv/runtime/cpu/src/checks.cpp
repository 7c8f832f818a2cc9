// Checking mode: kernels are compiled with -fsanitize=thread and no TSan runtime; these entry points
// are called before every load and store. The current thread's stack, the executor state and the
// kernel module's own globals pass; shared memory goes through a shadow per byte (races within one
// barrier interval, reads of memory nothing wrote in this block; a conflict between lanes of one wave
// is held back as a lockstep reliance, reported at the end of the interval unless a race between waves
// comes first); in lockstep mode each shared access first waits for the wave; argument buffers pass
// when the access lies inside one (const ones only for reads); anything else stops the launch before
// the access, naming the argument or variable, the offset, the block, the thread and the site.
#include "executor_int.h"

#include <string.h>

namespace gx {

Shadow shadow_static[kShadowBytes];
Shadow shadow_dyn[kShadowBytes];
static uint32_t shadow_static_used;

// The module's __shared__ variables (found in its symbol table by their red zones, wherever declared:
// kernels, templates, inline helpers, namespace scope) at their addresses in this process.
void setup_vars() {
    Launch& l = current_launch();
    gpuenv_launch_t* d = l.d;
    l.nsv = 0;
    l.sv_lo = l.sv_hi = 0;
    uint32_t shad = 0;
    for (int i = 0; i < d->nvars && l.nsv < kMaxVars; i++) {
        const gpuenv_region_t& g = d->vars[i];
        SVar& v = l.vars[l.nsv++];
        v.lo = l.mod_base + g.base;
        v.hi = v.lo + g.size;
        v.index = g.readonly ? -1 : g.index;
        v.shad = shad;
        if (!g.readonly) shad += (uint32_t)g.size;
        if (!l.sv_lo || v.lo < l.sv_lo) l.sv_lo = v.lo;
        if (v.hi > l.sv_hi) l.sv_hi = v.hi;
    }
    shadow_static_used = shad < kShadowBytes ? shad : kShadowBytes;
    memset(l.hits, 0, sizeof l.hits);  // (this launch's regions)
    if (l.nsites) memset(l.sites, 0, sizeof l.sites);  // (a launch's sites: this module's code)
    l.nsites = 0;
}

void poison_vars() {
    Launch& l = current_launch();
    for (int i = 0; i < l.nsv; i++)
        if (l.vars[i].index >= 0) memset((void*)l.vars[i].lo, 0xFF, l.vars[i].hi - l.vars[i].lo);
}

void shadow_new_epoch() {
    Launch& l = current_launch();
    if (++l.epoch < 0xFFFF) return;
    l.epoch = 1;  // wrapped: no access of the earlier intervals may look current
    size_t nd = l.d->shared_bytes < kShadowBytes ? l.d->shared_bytes : kShadowBytes;
    for (size_t i = 0; i < shadow_static_used; i++) shadow_static[i].wep = shadow_static[i].rep = 0;
    for (size_t i = 0; i < nd; i++) shadow_dyn[i].wep = shadow_dyn[i].rep = 0;
}

static size_t dyn_shadowed(const Launch& l) { return l.d->shared_bytes < kShadowBytes ? l.d->shared_bytes : kShadowBytes; }

size_t shadow_bytes() {
    const Launch& l = current_launch();
    return l.check ? (shadow_static_used + dyn_shadowed(l)) * sizeof(Shadow) : 0;
}

void shadow_keep(char* buf, bool save) {
    Launch& l = current_launch();
    if (!l.check) return;
    size_t ns = shadow_static_used * sizeof(Shadow), nd = dyn_shadowed(l) * sizeof(Shadow);
    if (save) {
        memcpy(buf, shadow_static, ns);
        memcpy(buf + ns, shadow_dyn, nd);
    } else {
        memcpy(shadow_static, buf, ns);
        memcpy(shadow_dyn, buf + ns, nd);
    }
}

void reset_shadow() {
    Launch& l = current_launch();
    size_t nd = l.d->shared_bytes < kShadowBytes ? l.d->shared_bytes : kShadowBytes;
    memset(shadow_static, 0, shadow_static_used * sizeof(Shadow));
    memset(shadow_dyn, 0, nd * sizeof(Shadow));
    l.held.on = false;
}

// Fill `r` with one finding: what, where (region, offset, address, bytes), whose access, and the code line;
// for a race, the other access: its thread, whether it wrote, and its code line (opc).
static inline void fill(gpuenv_report_t* r, int kind, int rkind, int rindex, int64_t off, uintptr_t a, size_t size,
                        bool write, void* pc, int other, uintptr_t opc = 0, bool owrite = false) {
    r->kind = kind;
    r->region_kind = rkind;
    r->region_index = rindex;
    r->offset = off;
    r->addr = a;
    r->size = (int)size;
    r->is_write = write;
    r->pc = pc_rel(pc);
    r->other_thread = other;
    r->other_is_write = owrite;
    r->other_pc = pc_rel((void*)opc);
    set_where(r);
}

__attribute__((noreturn)) static void report(int kind, int rkind, int rindex, int64_t off, uintptr_t a, size_t size,
                                             bool write, void* pc, int other, uintptr_t opc = 0, bool owrite = false) {
    fill(current_launch().r, kind, rkind, rindex, off, a, size, write, pc, other, opc, owrite);
    fail_in_fiber();
}

static void pend(gpuenv_report_t* r, int kind, int rkind, int rindex, int64_t rel, uintptr_t a, size_t size,
                 bool write, void* pc, int other, uintptr_t opc = 0, bool owrite = false) {
    if (!r->kind) fill(r, kind, rkind, rindex, rel, a, size, write, pc, other, opc, owrite);
}

// The number of an access site (its code address), 1..kSiteSlots; 0 once the table is 3/4 full.
static inline uint16_t site_of(void* pc) {
    Launch& l = current_launch();
    uintptr_t p = (uintptr_t)pc;
    unsigned h = (unsigned)((p * 0x9E3779B97F4A7C15ull) >> 52);  // (kSiteSlots == 1 << 12)
    for (;;) {
        uintptr_t at = l.sites[h];
        if (at == p) return (uint16_t)(h + 1);
        if (!at) {
            if (l.nsites >= kSiteSlots * 3 / 4) return 0;
            l.nsites++;
            l.sites[h] = p;
            return (uint16_t)(h + 1);
        }
        h = (h + 1) & (kSiteSlots - 1);
    }
}

static inline uintptr_t site_pc(uint16_t site) { return site ? current_launch().sites[site - 1] : 0; }

enum { NO_CONFLICT, RACE, WAVE_ONLY };

// Whether an access by the current thread (wave w, warp-sync count ws) conflicts with an earlier one in
// this interval by thread u (kMany: several) of wave uwave at warp-sync count uws. Within one wave a
// warp operation between the two orders them; without one, the code relies on lockstep execution.
static inline int conflict(uint16_t u, unsigned uwave, uint8_t uws, uint16_t t, unsigned w, uint8_t ws) {
    if (u == t) return NO_CONFLICT;
    if (uwave != w) return RACE;
    if (uws != ws) return NO_CONFLICT;
    return current_launch().lockstep ? NO_CONFLICT : WAVE_ONLY;
}

// Byte i of the access at a (by thread t at pc) conflicts with the write of thread `other` at `site` only as
// a write after write: held until the store is done (HeldWrite); a race between waves outranks one within a wave.
// (out of line: the rare case, kept out of shared_access's loop)
__attribute__((noinline, cold)) static void hold(int i, int kind, int rkind, int rindex, int64_t rel, uintptr_t a,
                                                 size_t size, uint16_t t, void* pc, int other, uint16_t site) {
    HeldWrite& h = current_launch().held;
    if (!h.on) {
        h.on = true;
        h.kind = NO_CONFLICT;
        h.mask = 0;
        h.rkind = rkind;
        h.rindex = rindex;
        h.rel = rel;
        h.a = a;
        h.size = (int)size;
        h.t = t;
        h.pc = pc;
    }
    h.mask |= (uint16_t)(1u << i);
    h.old[i] = ((const uint8_t*)a)[i];
    if (h.kind == NO_CONFLICT || (kind == RACE && h.kind != RACE)) {
        h.kind = kind;
        h.other = other;
        h.other_site = site;
    }
}

// The held write is done: a race if it changed a conflicting byte. in_fiber: from an access of device code (a
// race stops the launch there); else at the interval's end (false: the launch stops).
static bool settle(bool in_fiber) {
    Launch& l = current_launch();
    HeldWrite& h = l.held;
    h.on = false;
    bool changed = false;
    for (int i = 0; i < h.size; i++)
        if ((h.mask >> i & 1) && ((const uint8_t*)h.a)[i] != h.old[i]) changed = true;
    if (!changed) return true;
    bool race = h.kind == RACE;
    gpuenv_report_t* r = race ? l.r : &l.pend_ws;
    if (!race && r->kind) return true;  // (the first lockstep reliance of the interval is the one reported)
    fill(r, race ? GPUENV_RACE : GPUENV_WARPSYNC, h.rkind, h.rindex, h.rel, h.a, (size_t)h.size, true, h.pc, h.other,
         site_pc(h.other_site), true);
    set_thread(r, h.t);
    if (!race) return true;
    if (in_fiber) fail_in_fiber();
    return false;
}

bool settle_held_write() { return !current_launch().held.on || settle(false); }

// A shadow entry is loaded and stored whole, as two integers (Shadow's packed layout, executor_int.h), its fields
// taken apart in registers: field stores followed by a whole load would stall store forwarding.
__attribute__((always_inline)) static inline Shadow unpack(uint64_t lo, uint64_t hi) {
    return Shadow{(uint16_t)lo,        (uint16_t)(lo >> 16), (uint16_t)(lo >> 32), (uint16_t)(lo >> 48),
                  (uint8_t)hi,         (uint8_t)(hi >> 8),   (uint8_t)(hi >> 16),  (uint8_t)(hi >> 24),
                  (uint16_t)(hi >> 32), (uint16_t)(hi >> 48)};
}

__attribute__((always_inline)) static inline uint64_t packed_lo(const Shadow& e) {
    return (uint64_t)e.wep | (uint64_t)e.rep << 16 | (uint64_t)e.wt << 32 | (uint64_t)e.rt << 48;
}

__attribute__((always_inline)) static inline uint64_t packed_hi(const Shadow& e) {
    return (uint64_t)e.wws | (uint64_t)e.rws << 8 | (uint64_t)e.rwave << 16 | (uint64_t)e.init << 24 |
           (uint64_t)e.wsite << 32 | (uint64_t)e.rsite << 48;
}

// thread t's write, at warp-sync count ws
__attribute__((always_inline)) static inline void note_write(Shadow& e, uint16_t ep, uint16_t t, uint8_t ws,
                                                             uint16_t site) {
    e.wep = ep;
    e.wt = t;
    e.wws = ws;
    e.wsite = site;
    e.init = 1;
}

// thread t's read, of wave w at warp-sync count ws: the interval's first reader, or one more (several threads,
// several waves, the later count)
__attribute__((always_inline)) static inline void note_read(Shadow& e, uint16_t ep, uint16_t t, unsigned w, uint8_t ws,
                                                            uint16_t site) {
    if (e.rep != ep) {
        e.rep = ep;
        e.rt = t;
        e.rwave = (uint8_t)w;
        e.rws = ws;
    } else {
        if (e.rt != t) e.rt = kMany;
        if (e.rwave != w) e.rwave = kManyWaves;
        if ((uint8_t)(ws - e.rws) < 128) e.rws = ws;  // the later count, mod 256
    }
    e.rsite = site;
}

// The fast path of an access that finds nothing to report, the usual one: a read or a write (not atomic) of bytes
// that share one shadow entry (as the last access to all of them left them: a float's four), not written in this
// interval by another thread, and for a read written before (init), for a write not read in this interval by
// another thread. The entry is updated as shared_access would update it and stored to each byte; false where
// anything else may happen (shared_access decides). Loaded and stored whole, as shared_access does; inlined into
// its two callers (a call cost stencil1d about 7% of its checked time).
__attribute__((always_inline)) static inline bool quick_access(Shadow* sh, size_t off, size_t size, bool write,
                                                               uint16_t t, unsigned w, uint8_t ws, uint16_t ep,
                                                               uint16_t site) {
    uint64_t lo, hi;
    memcpy(&lo, &sh[off], 8);
    memcpy(&hi, (char*)&sh[off] + 8, 8);
    for (size_t b = off + 1; b < off + size; b++) {
        uint64_t blo, bhi;
        memcpy(&blo, &sh[b], 8);
        memcpy(&bhi, (char*)&sh[b] + 8, 8);
        if (blo != lo || bhi != hi) return false;
    }
    Shadow e = unpack(lo, hi);
    if (e.wep == ep && e.wt != t) return false;  // another thread's write in this interval
    if (write) {
        if (e.rep == ep && e.rt != t) return false;  // another thread's read in this interval
        note_write(e, ep, t, ws, site);
    } else {
        if (!e.init) return false;  // a read of memory nothing wrote
        // already recorded: read in this interval at this site, by this thread or several, from this wave or
        // several, at this warp-sync count (stencil1d: the 3rd to 15th reads of an element): nothing changes
        if (e.rep == ep && e.rsite == site && (e.rt == t || e.rt == kMany) &&
            (e.rwave == w || e.rwave == kManyWaves) && e.rws == ws)
            return true;
        note_read(e, ep, t, w, ws, site);
    }
    uint64_t after_lo = packed_lo(e), after_hi = packed_hi(e);
    if (after_lo == lo && after_hi == hi) return true;
    for (size_t b = off; b < off + size; b++) {
        memcpy(&sh[b], &after_lo, 8);
        memcpy((char*)&sh[b] + 8, &after_hi, 8);
    }
    return true;
}

// off: the access's offset in the shadow; vbase: where the named variable starts there. Inlined into its two
// callers (static and dynamic shared memory): a call passed its ten arguments partly on the stack.
__attribute__((always_inline)) static inline void shared_access(Shadow* sh, int rkind, int rindex, size_t off,
                                                                size_t vbase, size_t size, uintptr_t a, bool write,
                                                                void* pc, bool atomic) {
    Launch& l = current_launch();
    uint16_t t = (uint16_t)l.cur;
    unsigned w = (unsigned)l.cur >> l.warp_shift;
    uint8_t ws = (uint8_t)l.warp_sync[w];
    uint16_t ep = (uint16_t)l.epoch;
    if (off + size > kShadowBytes) return;
    int64_t rel = (int64_t)(off - vbase);
    uint16_t site = atomic ? 0 : site_of(pc);
    // the fast path (check_access tried it before for static shared memory outside lockstep: here for the dynamic
    // shared memory, and in lockstep once the wave is there)
    if (!atomic && quick_access(sh, off, size, write, t, w, ws, ep, site)) return;
    // Bytes with the first byte's history (the usual case for a float) get its outcome without the work.
    uint64_t before_lo = 0, after_lo = 0, before_hi = 0, after_hi = 0;
    int waw = NO_CONFLICT, waw_other = 0;  // the last byte worked out: its write after write
    uint16_t waw_site = 0;
    for (size_t b = off; b < off + size; b++) {
        uint64_t lo, hi;
        memcpy(&lo, &sh[b], 8);
        memcpy(&hi, (char*)&sh[b] + 8, 8);
        if (b > off && lo == before_lo && hi == before_hi) {
            memcpy(&sh[b], &after_lo, 8);
            memcpy((char*)&sh[b] + 8, &after_hi, 8);
            if (waw) hold((int)(b - off), waw, rkind, rindex, rel, a, size, t, pc, waw_other, waw_site);
            continue;
        }
        before_lo = lo;
        before_hi = hi;
        Shadow e = unpack(lo, hi);
        waw = NO_CONFLICT;
        if ((!write || atomic) && !e.init) {
            if (atomic) report(GPUENV_UNINIT, rkind, rindex, rel, a, size, false, pc, -1);
            pend(&l.pend, GPUENV_UNINIT, rkind, rindex, rel, a, size, false, pc, -1);  // a race if written later
        }
        if (atomic) {
            e.init = 1;
        } else {
            int c = e.wep == ep ? conflict(e.wt, (unsigned)e.wt >> l.warp_shift, e.wws, t, w, ws) : NO_CONFLICT;
            if (write) {
                // with this interval's reads
                int cr = e.rep == ep ? conflict(e.rt, e.rwave, e.rws, t, w, ws) : NO_CONFLICT;
                int other = e.rt == kMany ? -2 : e.rt;
                if (cr == RACE)
                    report(GPUENV_RACE, rkind, rindex, rel, a, size, true, pc, other, site_pc(e.rsite), false);
                if (cr == WAVE_ONLY) pend(&l.pend_ws, GPUENV_WARPSYNC, rkind, rindex, rel, a, size, true, pc, other,
                                          site_pc(e.rsite), false);
                if (c != NO_CONFLICT && size > sizeof(HeldWrite::old)) {  // (a range too long to hold)
                    if (c == RACE)
                        report(GPUENV_RACE, rkind, rindex, rel, a, size, true, pc, e.wt, site_pc(e.wsite), true);
                    pend(&l.pend_ws, GPUENV_WARPSYNC, rkind, rindex, rel, a, size, true, pc, e.wt, site_pc(e.wsite),
                         true);
                } else if (c != NO_CONFLICT) {
                    waw = c;
                    waw_other = e.wt;
                    waw_site = e.wsite;
                    hold((int)(b - off), c, rkind, rindex, rel, a, size, t, pc, e.wt, e.wsite);
                }
                note_write(e, ep, t, ws, site);
            } else {
                if (c == RACE)
                    report(GPUENV_RACE, rkind, rindex, rel, a, size, false, pc, e.wt, site_pc(e.wsite), true);
                if (c == WAVE_ONLY) pend(&l.pend_ws, GPUENV_WARPSYNC, rkind, rindex, rel, a, size, false, pc, e.wt,
                                         site_pc(e.wsite), true);
                note_read(e, ep, t, w, ws, site);
            }
        }
        after_lo = packed_lo(e);
        after_hi = packed_hi(e);
        memcpy(&sh[b], &after_lo, 8);
        memcpy((char*)&sh[b] + 8, &after_hi, 8);
    }
}

// The variable or red zone holding a, or -1: a linear scan for the usual handful, else a binary search
// (vars are sorted by address). Inlined: it is on the path of every static shared access.
__attribute__((always_inline)) static inline int find_var(uintptr_t a) {
    const Launch& l = current_launch();
    if (l.nsv <= 12) {
        for (int i = 0; i < l.nsv; i++)
            if (a - l.vars[i].lo < l.vars[i].hi - l.vars[i].lo) return i;
        return -1;
    }
    int lo = 0, hi = l.nsv - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if (a < l.vars[m].lo) hi = m - 1;
        else if (a >= l.vars[m].hi) lo = m + 1;
        else return m;
    }
    return -1;
}

static void lockstep_wait() {
    check_watchdog_pending();
    block_here(T_LOCK, nullptr);
}

// true when a is static shared memory (checked here), false for anything else
static bool check_static_shared(uintptr_t a, size_t size, bool write, void* pc, bool atomic) {
    Launch& l = current_launch();
    int i = find_var(a);
    if (i < 0) return false;
    const SVar& v = l.vars[i];
    // out of bounds: reported as the lane arrives, before a lockstep wait (which would let the wave's later
    // lanes run first: their accesses further out, past the red zones, were blamed on an argument)
    if (l.check && (v.index < 0 || a + size > v.hi)) {
        int n = i;  // in a red zone: name the variable just before it
        while (n >= 0 && l.vars[n].index < 0) n--;
        int64_t rel = n >= 0 ? (int64_t)(a - l.vars[n].lo) : 0;
        report(GPUENV_BOUNDS, GPUENV_R_SHARED, n >= 0 ? l.vars[n].index : -1, rel, a, size, write, pc, -1);
    }
    if (l.lockstep && !atomic) lockstep_wait();
    if (!l.check) return true;
    shared_access(shadow_static, GPUENV_R_SHARED, v.index, v.shad + (a - v.lo), v.shad, size, a, write, pc, atomic);
    return true;
}

static void check_other(uintptr_t a, size_t size, bool write, void* pc, bool atomic) {
    Launch& l = current_launch();
    gpuenv_launch_t* d = l.d;
    if (a - (uintptr_t)l.st->dyn_shared < kDynMax + 4096) {
        size_t off = a - (uintptr_t)l.st->dyn_shared;
        if (l.lockstep && !atomic) lockstep_wait();
        if (!l.check) return;
        if (off + size > d->shared_bytes) report(GPUENV_BOUNDS, GPUENV_R_DYN, 0, (int64_t)off, a, size, write, pc, -1);
        shared_access(shadow_dyn, GPUENV_R_DYN, 0, off, 0, size, a, write, pc, atomic);
        return;
    }
    if (!l.check) return;
    bool ro_hit = false, red = false;
    int ro_index = -1;
    for (int i = 0; i < d->nregions; i++) {
        const gpuenv_region_t& g = d->regions[i];
        if (g.readonly == kRoRedzone) {  // the __device__ variables' section: between them are red zones
            red = red || (a < g.base + g.size && a + size > g.base);
            continue;
        }
        if (a >= g.base && a + size <= g.base + g.size) {
            if (!write || !g.readonly) {
                memmove(&l.hits[1], &l.hits[0], sizeof l.hits - sizeof l.hits[0]);
                l.hits[0] = {g.base, g.base + g.size, !g.readonly};
                return;
            }
            ro_hit = true;
            ro_index = i;
        }
    }
    if (ro_hit) {
        const gpuenv_region_t& g = d->regions[ro_index];
        report(GPUENV_BOUNDS, GPUENV_R_ARG, g.index, (int64_t)(a - g.base), a, size, true, pc, -3);
    }
    for (int i = 0; i < l.nseg && !red; i++)
        if (a >= l.seg_lo[i] && a + size <= l.seg_hi[i]) return;  // the module's other data (literals, statics)
    // out of bounds: name the nearest argument buffer
    int best = -1;
    uint64_t dist = ~0ull;
    for (int i = 0; i < d->nregions; i++) {
        const gpuenv_region_t& g = d->regions[i];
        if (g.readonly == kRoRedzone || (red && g.index >= 0)) continue;
        uint64_t dd = a < g.base ? g.base - a : a < g.base + g.size ? 0 : a - (g.base + g.size);  // 0: a range that starts inside
        if (dd < dist) {
            dist = dd;
            best = i;
        }
    }
    // (or a static __shared__ variable, when one is nearer: past its red zones)
    int sbest = -1;
    uint64_t sdist = ~0ull;
    for (int i = 0; i < l.nsv; i++) {
        const SVar& v = l.vars[i];
        uint64_t dd = a < v.lo ? v.lo - a : a < v.hi ? 0 : a - v.hi;
        if (v.index >= 0 && dd < sdist) {
            sdist = dd;
            sbest = i;
        }
    }
    if (sbest >= 0 && sdist < dist && sdist < 4096)
        report(GPUENV_BOUNDS, GPUENV_R_SHARED, l.vars[sbest].index, (int64_t)(a - l.vars[sbest].lo), a, size, write,
               pc, -1);
    // (or the dynamic shared memory, when it is nearer: a negative index, or one far past the end)
    uintptr_t dyn = (uintptr_t)l.st->dyn_shared;
    uint64_t ddyn = a < dyn ? dyn - a : a - (dyn + d->shared_bytes);
    if (ddyn < dist && ddyn < (1ull << 30)) report(GPUENV_BOUNDS, GPUENV_R_DYN, 0, (int64_t)(a - dyn), a, size, write, pc, -1);
    if (best >= 0 && dist < (1ull << 30))
        report(GPUENV_BOUNDS, GPUENV_R_ARG, d->regions[best].index, (int64_t)(a - d->regions[best].base), a, size, write,
               pc, -1);
    report(GPUENV_BOUNDS, GPUENV_R_NONE, -1, 0, a, size, write, pc, -1);
}

// The usual access to a static __shared__ variable, done before anything else: in bounds, in a checked launch
// without lockstep, with nothing to report (quick_access). false: check_static_shared decides.
static inline bool quick_static(Launch& l, uintptr_t a, size_t size, bool write, void* pc) {
    if (!l.check || l.lockstep) return false;
    int i = find_var(a);
    if (i < 0) return false;
    const SVar& v = l.vars[i];
    size_t off = v.shad + (a - v.lo);
    if (v.index < 0 || a + size > v.hi || off + size > kShadowBytes) return false;
    unsigned w = (unsigned)l.cur >> l.warp_shift;
    return quick_access(shadow_static, off, size, write, (uint16_t)l.cur, w, (uint8_t)l.warp_sync[w],
                        (uint16_t)l.epoch, site_of(pc));
}

// Whether a lies in a region an access passed lately (the usual case: a few buffers in a loop), where check_other
// would pass it
static inline bool recent_region(const Launch& l, uintptr_t a, size_t size, bool write) {
    for (const RegionHit& h : l.hits)
        if (a >= h.lo && a + size <= h.hi && (!write || h.writable)) return true;
    return false;
}

// check_access past its first tests: a held write settled, the watchdog's signal, then the access checked
__attribute__((noinline)) static void check_access_rest(Launch& l, uintptr_t a, size_t size, bool write, void* pc,
                                                        bool shared) {
    if (l.held.on) settle(true);
    if (l.wd_pending) {
        l.r->kind = GPUENV_WATCHDOG;
        set_where(l.r);
        l.r->pc = pc_rel(pc);
        watchdog_text(l.r);
        fail_in_fiber();
    }
    if (shared) {
        if (quick_static(l, a, size, write, pc)) return;
        if (check_static_shared(a, size, write, pc, false)) return;
    } else if (recent_region(l, a, size, write)) {
        return;
    }
    check_other(a, size, write, pc, false);
}

// The usual accesses pass here without a call (the executor's state, the stack, a recent region, with no held write
// or watchdog signal to see to): a call would make this function save registers at every access.
void check_access(uintptr_t a, size_t size, bool write, void* pc) {
    Launch& l = current_launch();
    if (a - (uintptr_t)l.st < sizeof *l.st) return;
    if (!l.active) return;  // a static initialiser of the kernel module, outside any launch
    // (no fiber's stack holds the module's __shared__ variables or a region: their accesses skip the test of the
    // stack, which loads the running fiber's bounds through its pointer)
    bool shared = a - l.sv_lo < l.sv_hi - l.sv_lo;
    if (!shared && !l.held.on && !l.wd_pending && recent_region(l, a, size, write)) return;
    if (!shared && a - (uintptr_t)l.cur_fiber->lo < kStack) return;
    return check_access_rest(l, a, size, write, pc, shared);
}

}  // namespace gx

using namespace gx;

extern "C" void gpuenv_atomic_check(void* p, int size, void* pc) {
    Launch& l = current_launch();
    uintptr_t a = (uintptr_t)p;
    if (!l.active) return;
    if (l.wd_pending) check_access(a, (size_t)size, true, pc);
    if (a - (uintptr_t)l.cur_fiber->lo < kStack) return;
    if (l.held.on) settle(true);
    if (a - l.sv_lo < l.sv_hi - l.sv_lo && check_static_shared(a, (size_t)size, true, pc, true)) return;
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
