// Warp operations and barriers, resolved by the scheduler once every thread of the block waits.
// Lanes waiting at the same warp-operation site (source file, line and column) form the active mask;
// shuffles follow HIP's index rules (source lane modulo width, own value outside the segment); reading a
// lane that is not in the mask stops the launch. A barrier releases only when every thread waits at the
// same site: the source position, so a call the compiler duplicated (-O2 tail duplication) is still one
// barrier, while two __syncthreads() in if/else are two. In lockstep mode the lanes of a wave waiting
// before a shared-memory access are released together, in lane order.
#include "executor_int.h"

#include <stdio.h>
#include <string.h>

namespace gx {

static inline bool same_site(const Thread& a, const char* file, int where) {
    return a.where == where && (a.file == file || (a.file && file && !strcmp(a.file, file)));
}

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

void where_now(uint32_t block[3], uint32_t thread[3]) {
    block[0] = L.st->bid.x;
    block[1] = L.st->bid.y;
    block[2] = L.st->bid.z;
    thread[0] = L.st->tid.x;
    thread[1] = L.st->tid.y;
    thread[2] = L.st->tid.z;
}

void set_where(gpuenv_report_t* r) { where_now(r->block, r->thread); }

void set_thread(gpuenv_report_t* r, int t) {
    gpuenv_launch_t* d = L.d;
    r->block[0] = L.st->bid.x;
    r->block[1] = L.st->bid.y;
    r->block[2] = L.st->bid.z;
    r->thread[0] = t % d->block[0];
    r->thread[1] = (t / d->block[0]) % d->block[1];
    r->thread[2] = t / (d->block[0] * d->block[1]);
}

static void warn_once(void* site, const char* fmt, int a, int b) {
    char line[256];
    snprintf(line, sizeof line, "@pc:%lx@: ", (unsigned long)pc_rel(site));
    size_t n = strlen(line);
    snprintf(line + n, sizeof line - n, fmt, a, b);
    if (strstr(L.r->warnings, line)) return;
    if (L.segs)  // several workers: the block that first warned (this worker's blocks come in order), for the merge
        textf(L.r->warnings, sizeof L.r->warnings, "#%llu %s\n", (unsigned long long)L.block, line);
    else
        textf(L.r->warnings, sizeof L.r->warnings, "%s\n", line);
}

// Resolves the lanes of warp `base` waiting at `site`; false when one reads an inactive lane.
static bool resolve_group(int base, int nl, void* site, uint64_t mask) {
    Thread* th = L.threads + base;
    int W = L.warp;
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
                warn_once(site, op == GPUENV_OP_XOR ? "__shfl_xor mask %d >= warpSize %d: every lane gets its own value back (does the code assume 64-wide wavefronts?)"
                                                    : "shuffle offset %d >= warpSize %d: every lane gets its own value back (does the code assume 64-wide wavefronts?)",
                          t.arg, W);
            int idx = src_lane(op, l, t.arg, width);
            if (idx < 0 || idx >= 64 || !((mask >> idx) & 1)) {
                gpuenv_report_t* r = L.r;
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
    L.warp_sync[base / W]++;
    return true;
}

// Lockstep: the wave's lanes waiting before a shared-memory access go on, in lane order; 0 when none waits.
static int release_lockstep(int base, int nl) {
    int n = 0;
    for (int l = 0; l < nl; l++)
        if (L.threads[base + l].state == T_LOCK) {
            L.threads[base + l].state = T_RUN;
            enqueue(base + l);
            n++;
        }
    return n;
}

// Number of lanes released (0: no warp waits), -1 when the launch stops.
int resolve_warps() {
    int released = 0, W = L.warp;
    for (int base = 0; base < L.nthreads; base += W) {
        int nl = L.nthreads - base < W ? L.nthreads - base : W;
        if (L.lockstep) {  // a warp operation waits until no lane of its wave is before an access
            int n = release_lockstep(base, nl);
            released += n;
            if (n) continue;
        }
        for (;;) {
            const Thread* first = nullptr;
            uint64_t mask = 0;
            for (int l = 0; l < nl; l++) {
                Thread& t = L.threads[base + l];
                if (t.state != T_WARP) continue;
                if (!first) first = &t;
                if (same_site(t, first->file, first->where)) mask |= 1ull << l;
            }
            if (!first) break;
            void* site = first->site;
            if (!resolve_group(base, nl, site, mask)) return -1;
            released += __builtin_popcountll(mask);
        }
    }
    L.nwait -= released;
    return released;
}

static void ranges(char* out, size_t cap, const uint8_t* sel) {
    int n = L.nthreads, first = 1, shown = 0, total = 0;
    for (int i = 0; i < n; i++) total += sel[i];
    for (int i = 0; i < n;) {
        if (!sel[i]) { i++; continue; }
        int j = i;
        while (j + 1 < n && sel[j + 1]) j++;
        if (shown == 6) {
            textf(out, cap, ", ... (%d threads)", total);
            return;
        }
        if (j > i) textf(out, cap, "%s%d-%d", first ? "" : ", ", i, j);
        else textf(out, cap, "%s%d", first ? "" : ", ", i);
        first = 0;
        shown++;
        i = j + 1;
    }
}

// Releases the barrier every live thread waits at; false (with a report) when it cannot. The arrivals
// were counted as they came (gpuenv_barrier): when every thread of the block waits at one site, the
// release is O(1) (the threads run next in order); otherwise the scan below says why not.
bool release_barrier() {
    int n = L.nthreads;
    if (L.rr_at >= 0) leave_rr();  // (a round-robin interval that did not complete: its last arrival releases it itself)
    if (L.nbar == n && !L.bar_div && L.bar_fchk) {  // one site by line and kind: the file names must match too
        for (int t = 0; t < n; t++)
            if (!same_site(L.threads[t], L.bar_file, L.bar_where)) L.bar_div = true;
        L.bar_fchk = false;
    }
    if (L.nbar == n && !L.bar_div) {
        L.bar_res = barrier_result(L.bar_op, L.bar_count, n);
        if (L.check) shadow_new_epoch();
        else L.epoch++;
        L.nbar = 0;
        L.seq_next = 0;
        L.seq_end = n;
        if (L.rr_ok) {  // the next interval may go round robin: no recorded state above T_RUN
            for (int t = 0; t < n; t++) L.threads[t].state = T_RUN;
            L.rr_at = 0;
            L.rr_run = true;  // (the scheduler resumes thread 0 first: it is rr_at)
            L.bar_where = -1;
        }
        return true;
    }
    const Thread* f = nullptr;
    int first = -1;
    for (int t = 0; t < n && !f; t++)
        if (L.threads[t].state == T_BAR) {
            f = &L.threads[t];
            first = t;
        }
    void* site = f->site;
    gpuenv_report_t* r = L.r;
    r->kind = GPUENV_BARRIER;
    set_thread(r, first);
    r->pc = pc_rel(site);
    uint8_t sel[kMaxThreads];  // (on the stack: workers may report at once)
    const char* lin = (L.d->block[1] > 1 || L.d->block[2] > 1) ? " (linear thread ids)" : "";
    textf(r->text, sizeof r->text, "__syncthreads() does not converge in block (%u,%u,%u)%s:", L.st->bid.x,
          L.st->bid.y, L.st->bid.z, lin);
    for (;;) {  // each waiting site with its threads
        const Thread* s = nullptr;
        for (int t = 0; t < n && !s; t++)
            if (L.threads[t].state == T_BAR) s = &L.threads[t];
        if (!s) break;
        const char* file = s->file;
        int where = s->where;
        void* pc = s->site;
        for (int t = 0; t < n; t++) {
            sel[t] = L.threads[t].state == T_BAR && same_site(L.threads[t], file, where);
            if (sel[t]) L.threads[t].state = T_EXIT + 1;  // listed
        }
        textf(r->text, sizeof r->text, " threads ");
        ranges(r->text, sizeof r->text, sel);
        textf(r->text, sizeof r->text, " wait at the barrier at @pc:%lx:L%d@;", (unsigned long)pc_rel(pc), gpuenv_site_line(where));
    }
    int nexit = 0;
    for (int t = 0; t < n; t++) nexit += (sel[t] = L.threads[t].state <= T_RUN);  // no longer waiting: returned
    if (nexit) {
        textf(r->text, sizeof r->text, " threads ");
        ranges(r->text, sizeof r->text, sel);
        textf(r->text, sizeof r->text, " already returned and never reach it (every thread of a block must reach the same __syncthreads)");
    } else {
        textf(r->text, sizeof r->text, " the threads wait at different barriers (a __syncthreads under a condition that differs within the block)");
    }
    return false;
}

}  // namespace gx
