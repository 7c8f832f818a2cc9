// Warp operations (shuffles, ballot/any/all, __syncwarp) and lockstep, resolved by the scheduler once every
// thread of the block waits. Lanes waiting at the same warp-operation site (source file, line and column)
// form the active mask; shuffles follow HIP's index rules (source lane modulo width, own value outside the
// segment); reading a lane that is not in the mask stops the launch. In lockstep mode the lanes of a wave
// waiting before a shared-memory access (checks.cpp) are released together, in lane order.
#include "executor_int.h"
#include "fiber_switch.h"
#include "fibers.h"

#include <stdio.h>
#include <string.h>

namespace gx {

static const char* op_name(int op) {
    switch (op) {
        case GPUENV_OP_SHFL: return "__shfl";
        case GPUENV_OP_UP: return "__shfl_up";
        case GPUENV_OP_DOWN: return "__shfl_down";
        case GPUENV_OP_XOR: return "__shfl_xor";
        case GPUENV_OP_BALLOT: return "__ballot";
        case GPUENV_OP_ANY: return "__any";
        case GPUENV_OP_ALL: return "__all";
        default: return "__syncwarp";
    }
}

static int src_lane(int op, int l, int arg, int width) {
    int seg = l & ~(width - 1);
    int idx = l;
    switch (op) {
        case GPUENV_OP_SHFL: idx = (arg & (width - 1)) + seg; break;
        case GPUENV_OP_UP: idx = l - arg; if (idx < seg) idx = l; break;
        case GPUENV_OP_DOWN: idx = l + arg; if ((l & (width - 1)) + arg >= width) idx = l; break;
        case GPUENV_OP_XOR: idx = l ^ arg; if (idx >= ((l + width) & ~(width - 1))) idx = l; break;
        default: break;
    }
    return idx;
}

static void warn_once(Launch& w, void* site, const char* fmt, int a, int b) {
    char line[256];
    snprintf(line, sizeof line, "@pc:%lx@: ", (unsigned long)pc_rel(site));
    size_t n = strlen(line);
    snprintf(line + n, sizeof line - n, fmt, a, b);
    if (strstr(w.r->warnings, line)) return;
    if (w.segs)  // several workers: the block that first warned (this worker's blocks come in order), for the merge
        textf(w.r->warnings, sizeof w.r->warnings, "#%llu %s\n", (unsigned long long)w.block, line);
    else
        textf(w.r->warnings, sizeof w.r->warnings, "%s\n", line);
}

// Checked mode: what ROCm's *_sync functions trap on (amd_warp_sync_functions.h, __hip_check_mask): a zero
// mask, or a mask value that is not exactly the lanes passing it among those active at the operation. Lanes
// may pass disjoint masks that together cover the active ones. False, with a report, when one is wrong.
static bool check_masks(Launch& w, int base, void* site, uint64_t active) {
    Thread* th = w.threads + base;
    int W = w.warp;
    for (int l = 0; l < W; l++) {
        if (!((active >> l) & 1) || !th[l].masked) continue;
        uint64_t m = th[l].mask, same = 0;
        for (int j = 0; j < W; j++)
            if ((active >> j) & 1 && th[j].masked && th[j].mask == m) same |= 1ull << j;
        if (m && same == m) continue;
        gpuenv_report_t* r = w.r;
        r->kind = GPUENV_WARPMASK;
        set_thread(r, base + l);
        r->pc = pc_rel(site);
        if (!m)
            textf(r->text, sizeof r->text, "%s_sync at @pc:%lx@: lane %d of warp %d passes mask 0 (ROCm traps: "
                  "\"mask must be non-zero\")", op_name(th[l].op), (unsigned long)r->pc, l, base / W);
        else
            textf(r->text, sizeof r->text,
                  "%s_sync at @pc:%lx@: lane %d of warp %d passes mask 0x%llx, but the lanes that pass it there are "
                  "0x%llx (active lanes 0x%llx of warpSize %d): ROCm traps, as every lane a mask names must execute "
                  "the same operation with the same mask (amd_warp_sync_functions.h; not with NDEBUG defined)",
                  op_name(th[l].op), (unsigned long)r->pc, l, base / W, (unsigned long long)m,
                  (unsigned long long)same, (unsigned long long)active, W);
        return false;
    }
    return true;
}

// Resolves the lanes of warp `base` waiting at `site`; false when one reads an inactive lane.
static bool resolve_group(Launch& w, int base, int nl, void* site, uint64_t mask) {
    Thread* th = w.threads + base;
    int W = w.warp;
    if (w.check && !check_masks(w, base, site, mask)) return false;
    uint64_t ballot = 0;
    for (int l = 0; l < nl; l++)
        if ((mask >> l) & 1 && th[l].val) ballot |= 1ull << l;
    for (int l = 0; l < nl; l++) {
        if (!((mask >> l) & 1)) continue;
        Thread& t = th[l];
        int op = t.op, width = t.width;
        if (width <= 0 || width > W || (width & (width - 1))) width = W;
        if (op == GPUENV_OP_SHFL || op == GPUENV_OP_UP || op == GPUENV_OP_DOWN || op == GPUENV_OP_XOR) {
            if (op != GPUENV_OP_SHFL && t.arg >= W)
                warn_once(w, site, op == GPUENV_OP_XOR ? "__shfl_xor mask %d >= warpSize %d: every lane gets its own value back (does the code assume 64-wide wavefronts?)"
                                                       : "shuffle offset %d >= warpSize %d: every lane gets its own value back (does the code assume 64-wide wavefronts?)",
                          t.arg, W);
            int idx = src_lane(op, l, t.arg, width);
            if (idx < 0 || idx >= 64 || !((mask >> idx) & 1)) {
                gpuenv_report_t* r = w.r;
                r->kind = GPUENV_WARP;
                set_thread(r, base + l);
                r->pc = pc_rel(site);
                textf(r->text, sizeof r->text,
                      "%s at @pc:%lx@: lane %d of warp %d reads lane %d, which is not active there "
                      "(active lanes: mask 0x%llx of warpSize %d)",
                      op_name(op), (unsigned long)r->pc, l, base / W, idx, (unsigned long long)mask, W);
                return false;
            }
            t.res = th[idx].val;
        } else if (op == GPUENV_OP_BALLOT) {
            t.res = ballot;
        } else if (op == GPUENV_OP_ANY) {
            t.res = ballot != 0;
        } else if (op == GPUENV_OP_ALL) {
            t.res = ballot == mask;
        }
    }
    for (int l = 0; l < nl; l++)
        if ((mask >> l) & 1) {
            th[l].state = T_RUN;
            enqueue(base + l);
        }
    w.warp_sync[base / W]++;
    return true;
}

// Lockstep: the wave's lanes waiting before a shared-memory access go on, in lane order; 0 when none waits.
static int release_lockstep(Launch& w, int base, int nl) {
    int n = 0;
    for (int l = 0; l < nl; l++)
        if (w.threads[base + l].state == T_LOCK) {
            w.threads[base + l].state = T_RUN;
            enqueue(base + l);
            n++;
        }
    return n;
}

int resolve_warps() {
    Launch& w = current_launch();
    int released = 0, W = w.warp;
    for (int base = 0; base < w.nthreads; base += W) {
        int nl = w.nthreads - base < W ? w.nthreads - base : W;
        if (w.lockstep) {  // a warp operation waits until no lane of its wave is before an access
            int n = release_lockstep(w, base, nl);
            released += n;
            if (n) continue;
        }
        for (;;) {
            const Thread* first = nullptr;
            uint64_t mask = 0;
            for (int l = 0; l < nl; l++) {
                Thread& t = w.threads[base + l];
                if (t.state != T_WARP) continue;
                if (!first) first = &t;
                if (same_site(t, first->file, first->where)) mask |= 1ull << l;
            }
            if (!first) break;
            void* site = first->site;
            if (!resolve_group(w, base, nl, site, mask)) return -1;
            released += __builtin_popcountll(mask);
        }
    }
    w.nwait -= released;
    return released;
}

}  // namespace gx

using namespace gx;

// A lane's warp operation: it waits until every thread of the block waits (resolve_warps), then returns
// the operation's result.
static inline __attribute__((always_inline)) uint64_t warp_op(int op, uint64_t value, int arg, int width, bool masked,
                                                               uint64_t mask, const char* file, int where, void* site) {
    Launch& l = current_launch();
    if (l.rr_run) leave_rr();
    watchdog_poll();
    catch_up(l);
    Thread& th = l.threads[l.cur];
    th.masked = masked;
    th.mask = mask;
    th.op = op;
    th.val = value;
    th.arg = arg;
    th.width = width;
    th.file = file;
    th.where = where;
    l.nwait++;
    wait_here(T_WARP, site, l.cur);
    return l.threads[l.cur].res;
}

extern "C" uint64_t gpuenv_warp_op(int op, uint64_t value, int arg, int width, const char* file, int where) {
    return warp_op(op, value, arg, width, false, 0, file, where, __builtin_return_address(0));
}

// A *_sync function's operation: the lane's mask goes with it (check_masks)
extern "C" uint64_t gpuenv_warp_op_mask(int op, uint64_t value, int arg, int width, uint64_t mask, const char* file,
                                        int where) {
    return warp_op(op, value, arg, width, true, mask, file, where, __builtin_return_address(0));
}
