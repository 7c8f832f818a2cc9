// Cooperative launches (gpuenv_launch_t.check & GPUENV_COOPERATIVE): every block of the grid is resident
// at once, as hipLaunchCooperativeKernel promises, so that grid.sync() can wait for all of them. Each block
// has a worker thread of its own (at most kMaxWorkers blocks), all on the one copy of the module (its
// __device__ variables are the grid's), and one block runs at a time, in block order: a block runs until its
// thread 0 reaches grid.sync() (the header's grid sync: a block barrier, thread 0 waits here, a block
// barrier), then the next block runs; once the last block has arrived, block 0 goes on. What is a block's
// own in that copy (gpuenv_state, the static __shared__ variables, the checked mode's shadow) is saved
// while it waits and restored when it goes on. So results and reports are those of one worker, whichever
// thread ran which block.
#include "executor_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

namespace gx {

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, nblocks, arrived;  // the block whose turn it is; blocks waiting at the grid barrier
static int gone;                    // the first block that returned (-1: none)
static int wait_line;               // the line of the grid.sync() the arrived blocks wait at
static bool stop;                   // a block failed: the others leave without a report of their own

void coop_start(int blocks) {
    turn = arrived = 0;
    nblocks = blocks;
    gone = -1;
    stop = false;
}

void coop_stop() {
    pthread_mutex_lock(&mu);
    stop = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

// Under mu: waits until it is block i's turn; false when the launch stopped first.
static bool wait_turn(int i) {
    while (turn != i && !stop) pthread_cond_wait(&cv, &mu);
    return !stop;
}

bool coop_turn(int i) {
    pthread_mutex_lock(&mu);
    bool go = wait_turn(i);
    pthread_mutex_unlock(&mu);
    return go;
}

// Block i ended (ok: its threads returned): the next block's turn. False when it failed, or returned while
// other blocks wait at a grid barrier (a report of its own, here).
bool coop_end(int i, bool ok) {
    Launch& l = current_launch();
    pthread_mutex_lock(&mu);
    if (ok && arrived > 0) {
        l.r->kind = GPUENV_GRID;
        where_now(l.r->block, l.r->thread);
        memset(l.r->thread, 0, sizeof l.r->thread);
        textf(l.r->text, sizeof l.r->text,
              "block %d of a cooperative launch returned without reaching the grid.sync() at line %d, where "
              "blocks 0-%d wait: every block must reach each grid.sync()", i, wait_line, i - 1);
        ok = false;
    }
    if (!ok) stop = true;
    else if (gone < 0) gone = i;
    turn = i + 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return ok;
}

// The running block's own part of the module copy, into its save buffer (grown to fit) or back from it.
static bool keep_block(bool save) {
    Launch& l = current_launch();
    if (save) {
        size_t need = sizeof *l.st + shadow_bytes();
        for (int v = 0; v < l.nsv; v++)
            if (l.vars[v].index >= 0) need += l.vars[v].hi - l.vars[v].lo;
        if (need > l.coop_cap) {
            char* p = (char*)realloc(l.coop_buf, need);
            if (!p) return false;
            l.coop_buf = p;
            l.coop_cap = need;
        }
    }
    char* p = l.coop_buf;
    auto move = [&](void* at, size_t n) {
        if (save) memcpy(p, at, n);
        else memcpy(at, p, n);
        p += n;
    };
    move(l.st, sizeof *l.st);
    for (int v = 0; v < l.nsv; v++)
        if (l.vars[v].index >= 0) move((void*)l.vars[v].lo, l.vars[v].hi - l.vars[v].lo);
    shadow_keep(p, save);
    return true;
}

}  // namespace gx

using namespace gx;

extern "C" int gpuenv_grid_valid(void) { return (current_launch().d->check & GPUENV_COOPERATIVE) != 0; }

// Thread 0 of a block at grid.sync(), after the block barrier: it waits (and with it the block, whose other
// threads wait at the barrier after) until every block has arrived.
extern "C" void gpuenv_grid_wait(const char*, int where) {
    Launch& l = current_launch();
    l.r->pc = pc_rel(__builtin_return_address(0));
    if (!(l.d->check & GPUENV_COOPERATIVE)) {
        l.r->kind = GPUENV_GRID;
        set_where(l.r);
        textf(l.r->text, sizeof l.r->text,
              "grid.sync() at @pc:%lx:L%d@ needs a cooperative launch (kernel(grid, block, ..., cooperative=True), "
              "hipLaunchCooperativeKernel): without one, no block may wait for the others",
              (unsigned long)l.r->pc, gpuenv_where_line(where));
        fail_in_fiber();
    }
    int i = l.worker;
    pthread_mutex_lock(&mu);
    int left = gone;
    if (left < 0 && !keep_block(true)) left = -2;
    if (left != -1) {
        pthread_mutex_unlock(&mu);
        l.r->kind = left == -2 ? GPUENV_USAGE : GPUENV_GRID;
        set_where(l.r);
        if (left == -2)
            textf(l.r->text, sizeof l.r->text, "grid.sync() at line %d: out of memory saving the block's state",
                  gpuenv_where_line(where));
        else
            textf(l.r->text, sizeof l.r->text,
                  "grid.sync() at @pc:%lx:L%d@: block %d of this cooperative launch returned without reaching "
                  "it: every block must reach each grid.sync()", (unsigned long)l.r->pc, gpuenv_where_line(where), left);
        fail_in_fiber();
    }
    wait_line = gpuenv_where_line(where);
    turn = ++arrived == nblocks ? 0 : i + 1;
    if (arrived == nblocks) arrived = 0;
    pthread_cond_broadcast(&cv);
    bool go = wait_turn(i);
    pthread_mutex_unlock(&mu);
    if (!go) {  // another block failed: this one leaves with no report (its kind stays 0)
        l.abandoned = true;
        fail_in_fiber();
    }
    keep_block(false);
    check_watchdog_pending();
}
