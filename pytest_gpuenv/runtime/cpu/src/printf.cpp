// Device printf: a kernel's printf writes into the launch's output buffer (gpuenv_launch_t.out), the
// caller's with one worker; with several, each worker writes into its own buffer, marking where each
// block's output starts, and merge_output puts them together in block order after the launch, so the output
// is the same whichever thread ran which block.
#include "executor_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace gx {

// Device printf of several workers: each block's output, in block order, into the caller's buffer; none of
// a block after `upto`, the one that failed (one worker would not have run it; others may have, or not, by
// timing), except in a cooperative launch (every block ran up to the failure's grid.sync(), in turn).
void merge_output(Launch** ws, int n, gpuenv_launch_t* d, uint64_t upto) {
    int at[kMaxWorkers] = {};
    for (;;) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (at[i] < ws[i]->nsegs && (best < 0 || ws[i]->segs[2 * at[i]] < ws[best]->segs[2 * at[best]])) best = i;
        if (best < 0 || ws[best]->segs[2 * at[best]] > upto) return;
        Launch& w = *ws[best];
        uint64_t lo = w.segs[2 * at[best] + 1], hi = ++at[best] < w.nsegs ? w.segs[2 * at[best] + 1] : w.out_len;
        uint64_t room = d->out_cap > d->out_len + 1 ? d->out_cap - d->out_len - 1 : 0;
        uint64_t len = hi - lo < room ? hi - lo : room;
        memcpy(d->out + d->out_len, w.out + lo, len);
        d->out_len += len;
        if (d->out_len < d->out_cap) d->out[d->out_len] = 0;
    }
}

}  // namespace gx

using namespace gx;

// A kernel's printf: appended to this worker's output (what does not fit is cut); with several workers, a
// block's first output starts a segment (the block, where it starts), for merge_output.
extern "C" int gpuenv_printf(const char* fmt, ...) {
    if (!cur_launch || !current_launch().out) return 0;  // (outside a launch: none)
    Launch& l = current_launch();
    if (l.segs && (l.nsegs == 0 || l.segs[2 * l.nsegs - 2] != l.block)) {  // several workers: a new block's output
        if (l.nsegs == l.segs_cap) {
            l.segs_cap *= 2;
            l.segs = l.own_segs = (uint64_t*)realloc(l.segs, sizeof(uint64_t) * 2 * l.segs_cap);
        }
        l.segs[2 * l.nsegs] = l.block;
        l.segs[2 * l.nsegs++ + 1] = l.out_len;
    }
    va_list ap;
    va_start(ap, fmt);
    uint64_t room = l.out_len < l.out_cap ? l.out_cap - l.out_len : 0;
    int n = vsnprintf(l.out + l.out_len, room, fmt, ap);
    va_end(ap);
    if (n > 0) l.out_len += (uint64_t)n < room ? (uint64_t)n : room ? room - 1 : 0;
    return n;
}
