// The child process's last words. The executor runs in a child process of pytest (runtime/cpu/server.py);
// whatever a kernel does to that process, pytest learns what it was from a note in shared memory:
// exit()/quick_exit() with the status and the call site, a fatal signal with the faulting pc and the
// stack, fork() (the new process ends at once: it would be a copy of the executor, never of pytest).
// The parent reads the note after the child is gone; nothing here ever writes to a pipe.
#include "executor_int.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr int kFrames = 24;  // NOTE_FRAMES in protocol.py

struct gpuenv_note_t {  // Note in protocol.py
    int32_t kind, value, in_launch, nframes, forks, kmask;  // kmask: frames in a kernel module
    uint32_t block[3], thread[3];
    uint64_t addr;
    uint64_t pcs[kFrames], bases[kFrames];
};

enum { NOTE_EXIT = 1, NOTE_QUICK_EXIT, NOTE_SIGNAL, NOTE_STUCK };

gpuenv_note_t* note;
const int fatal_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS};

void put_frame(int i, void* pc) {
    Dl_info info, self;
    note->pcs[i] = (uintptr_t)pc;
    note->bases[i] = dladdr(pc, &info) && info.dli_fbase ? (uintptr_t)info.dli_fbase : 0;
    // kernel modules, like this executor, are loaded from /proc/self/fd/N (a memfd)
    if (note->bases[i] && info.dli_fname && !strncmp(info.dli_fname, "/proc/self/fd/", 14) &&
        dladdr((void*)&put_frame, &self) && self.dli_fbase != info.dli_fbase)
        note->kmask |= 1 << i;
}

// frame 0 is `first` (a faulting pc) when given; then the return addresses of the stack
void record(int kind, int value, void* first) {
    if (!note || note->kind) return;
    note->kind = kind;
    note->value = value;
    note->in_launch = gx::cur_launch && L.active;
    if (note->in_launch) gx::where_now(note->block, note->thread);
    int n = 0;
    if (first) {
        put_frame(0, first);
        note->nframes = n = 1;
    }
    void* buf[kFrames];
    int got = backtrace(buf, kFrames);
    for (int i = 0; i < got && n < kFrames; i++) {
        put_frame(n, buf[i]);
        note->nframes = ++n;
    }
}

void on_exit_cb(int status, void*) { record(NOTE_EXIT, status, nullptr); }
void on_quick_exit_cb() { record(NOTE_QUICK_EXIT, 0, nullptr); }

void on_fatal(int sig, siginfo_t* si, void* uc) {
    record(NOTE_SIGNAL, sig, (void*)gx::sig_pc(uc));
    note->addr = (uintptr_t)si->si_addr;
    signal(sig, SIG_DFL);
    raise(sig);  // pending until this handler returns: the process ends by this signal
}

// SIGUSR2 from pytest at its watchdog: note where the kernel is (pytest kills the process next)
void on_stuck(int, siginfo_t*, void* uc) {
    record(NOTE_STUCK, 0, (void*)gx::sig_pc(uc));
}

void before_fork() {
    if (note) note->forks++;
}
void in_forked_child() { _exit(127); }

}  // namespace

namespace gx {
// The innermost kernel frame on this stack (module-relative, minus one: it is a return address), or 0:
// where a fault inside libc (free() of a bad pointer, a memset in the fast mode) was called from.
uint64_t caller_in_kernel() {
    void* buf[32];
    int n = backtrace(buf, 32);
    for (int i = 0; i < n; i++)
        if (uint64_t r = pc_rel(buf[i])) return r - 1;
    return 0;
}
}  // namespace gx

// The sizes of the ABI structs, in the order server.py checks its ctypes copies against them at load
// (a copy that drifted from the C struct is a clear error there, not a corrupt launch).
extern "C" __attribute__((visibility("default"))) const uint64_t gpuenv_abi_sizes[] = {
    sizeof(gpuenv_launch_t), sizeof(gpuenv_report_t), sizeof(gpuenv_region_t), sizeof(gpuenv_note_t),
    sizeof(gpuenv_worker_t), 0};

// Called once by the child before anything else is loaded; `area` is the note in the shared arena.
extern "C" __attribute__((visibility("default"))) int gpuenv_server_init(void* area) {
    note = (gpuenv_note_t*)area;
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // pytest gone: so is its executor
    prctl(PR_SET_CHILD_SUBREAPER, 1);  // a kernel's grandchildren stay ours to find
    if (getppid() == 1) _exit(0);
    setvbuf(stdout, nullptr, _IOLBF, 0);  // a kernel's puts()/std::cout reaches pytest after its launch
    void* warm[2];
    backtrace(warm, 2);  // loads libgcc_s now, not inside a signal handler
    on_exit(on_exit_cb, nullptr);
    at_quick_exit(on_quick_exit_cb);
    pthread_atfork(before_fork, nullptr, in_forked_child);
    static char* alt = (char*)mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {};
    ss.ss_sp = alt;
    ss.ss_size = 1 << 16;
    sigaltstack(&ss, nullptr);
    struct sigaction sa = {};
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int s : fatal_sigs) sigaction(s, &sa, nullptr);
    sa.sa_sigaction = on_stuck;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigaction(SIGUSR2, &sa, nullptr);
    return 0;
}

// What a request left behind, checked before its reply: the fork() calls since the last call (each new
// process ended at once), at least 1 while a process of ours exists (a raw fork or clone) or one ended and
// was reaped since (system(), popen()); else minus the threads beyond `threads` (what fstat of the open
// directory /proc/self/task, `task_dir`, counted in links before any request ran); 0 when neither.
extern "C" __attribute__((visibility("default"))) int gpuenv_server_after(int task_dir, int64_t threads) {
    int forks = note ? note->forks : 0;
    if (note) note->forks = 0;
    int status;
    if (waitpid(-1, &status, WNOHANG) >= 0 && forks < 1) forks = 1;
    // a child already waited for (system(), popen(): posix_spawn runs no fork handlers) left its context
    // switches in RUSAGE_CHILDREN; every process switches at least once, when it ends
    static long switches;
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0 && ru.ru_nvcsw + ru.ru_nivcsw != switches) {
        switches = ru.ru_nvcsw + ru.ru_nivcsw;
        if (forks < 1) forks = 1;
    }
    if (forks) return forks;
    // A worker thread the launch joined can still be listed for a moment after pthread_join returned (the
    // kernel wakes the joiner when the thread releases its memory, before the thread leaves the thread group):
    // look again for up to 50 ms before taking an extra thread for one that the kernel left running. The
    // first 2 ms yield to it (it leaves within microseconds; a sleep would add its own half millisecond or
    // more to every launch on several workers), then sleep.
    struct stat st;
    double t0 = gx::now(), waited = 0;
    for (;;) {
        if (fstat(task_dir, &st) != 0 || (int64_t)st.st_nlink <= threads) return 0;
        if (waited >= 0.050) break;
        if (waited < 0.002) sched_yield();
        else usleep(500);
        waited = gx::now() - t0;
    }
    return -(int)((int64_t)st.st_nlink - threads);
}

// ---- a launch request, parsed here: the server's Python only reads the pipe and picks the workers ----
namespace {

// The parts of a launch request's payload (protocol.py: LAUNCH, SVAR, VAR, REGION, VALUE): little-endian
// with no padding, read with memcpy (the payload is a Python bytes object, aligned to nothing in particular).
struct __attribute__((packed)) launch_head_t {
    uint32_t grid[3], block[3];
    uint64_t shared_bytes, arena_bytes;
    double watchdog_s;
    int32_t warp_size, check, nvars, nregions, nvalues, nglobals, nwrites, nreads;
};
struct __attribute__((packed)) svar_t {
    uint64_t off, size;
    int32_t index, pad;
};
struct __attribute__((packed)) var_t {
    uint64_t off, size;
};
struct __attribute__((packed)) region_in_t {
    uint64_t off, size;
    int32_t readonly, index;
};
struct __attribute__((packed)) value_t {
    uint8_t kind, pad[3];
    uint32_t size, align;
};
static_assert(sizeof(launch_head_t) == 80 && sizeof(svar_t) == 24 && sizeof(var_t) == 16 &&
              sizeof(region_in_t) == 24 && sizeof(value_t) == 12, "the request's layout (protocol.py)");

constexpr int32_t kValueArena = 1;          // VALUE_ARENA: an 8-byte offset in the arena, made a pointer
constexpr size_t kBlobAlign = 64;           // the argument values' storage (a larger alignment: kept modulo this)

// Buffers kept from request to request (the server serves one at a time).
gpuenv_region_t *vars_buf, *regions_buf;
void** argv_buf;
char* blob_buf;
size_t vars_cap, regions_cap, argv_cap, blob_cap;

template <class T>
T* room(T*& buf, size_t& cap, size_t n) {
    if (n <= cap) return buf;
    free(buf);
    cap = n < 16 ? 16 : n;
    if (posix_memalign((void**)&buf, kBlobAlign, cap * sizeof(T))) {
        buf = nullptr;
        cap = 0;
    }
    return buf;
}

// The bytes that bring `used` to a multiple of `align` (at most kBlobAlign: the storage's own alignment).
uint64_t pad(uint64_t used, uint32_t align) {
    uint64_t a = align < 1 ? 1 : align > kBlobAlign ? kBlobAlign : align;
    return (a - used % a) % a;
}

// `n` items of `size` bytes at *pos, within len: their start, and *pos moved past them; nullptr if they overrun.
const uint8_t* take(const uint8_t* p, uint64_t len, uint64_t* pos, uint64_t n, uint64_t size) {
    if (n > len || *pos > len || size * n > len - *pos) return nullptr;
    const uint8_t* at = p + *pos;
    *pos += size * n;
    return at;
}

}  // namespace

// The sizes of those parts, which server.py compares with protocol.py's struct formats at load.
extern "C" __attribute__((visibility("default"))) const uint64_t gpuenv_request_sizes[] = {
    sizeof(launch_head_t), sizeof(svar_t), sizeof(var_t), sizeof(region_in_t), sizeof(value_t), 0};

// Runs the launch request `p` (`len` bytes, its symbol sections already handled: `pos` is where the
// SVAR section starts) on the module whose workers are given (workers[0] is the module itself), its
// argument copies at `base` (the arena in this process). Returns the device printf bytes written, or -1 if
// the request is malformed (nothing ran). The report is at `report`, the printf output at `out`.
extern "C" __attribute__((visibility("default"))) int64_t gpuenv_server_launch(
    const uint8_t* p, uint64_t len, uint64_t pos, char* base, gpuenv_report_t* report, char* out, uint64_t out_cap,
    char* shared_lo, char* shared_hi, uint64_t glo, uint64_t ghi, const gpuenv_worker_t* workers, int32_t nworkers) {
    launch_head_t h;
    if (len < sizeof h || nworkers < 1) return -1;
    memcpy(&h, p, sizeof h);
    if (h.nvars < 0 || h.nregions < 0 || h.nvalues < 0 || h.nglobals < 0 ||
        (uint64_t)h.nvalues * sizeof(value_t) > len)
        return -1;
    const uint8_t* svars = take(p, len, &pos, h.nvars, sizeof(svar_t));
    const uint8_t* gvars = take(p, len, &pos, h.nglobals, sizeof(var_t));
    const uint8_t* regs = take(p, len, &pos, h.nregions, sizeof(region_in_t));
    if (!svars || !gvars || !regs) return -1;
    // __device__ variables (parameter index -1 - i) and, after them, their section's red zones
    uint64_t nextra = ghi > glo && h.nglobals ? (uint64_t)h.nglobals + 1 : 0;
    gpuenv_region_t* vars = room(vars_buf, vars_cap, h.nvars ? h.nvars : 1);
    gpuenv_region_t* rs = room(regions_buf, regions_cap, h.nregions + nextra + 1);
    void** argv = room(argv_buf, argv_cap, h.nvalues ? h.nvalues : 1);
    if (!vars || !rs || !argv) return -1;
    for (int32_t i = 0; i < h.nvars; i++) {
        svar_t v;
        memcpy(&v, svars + i * sizeof v, sizeof v);
        vars[i] = {v.off, v.size, v.index < 0, v.index};
    }
    int32_t nr = 0;
    for (int32_t i = 0; i < h.nregions; i++) {
        region_in_t r;
        memcpy(&r, regs + i * sizeof r, sizeof r);
        if (r.off > h.arena_bytes || r.size > h.arena_bytes - r.off) return -1;  // (offsets in the arena)
        rs[nr++] = {(uint64_t)(uintptr_t)(base + r.off), r.size, r.readonly, r.index};
    }
    for (uint64_t i = 0; i + 1 < nextra; i++) {
        var_t v;
        memcpy(&v, gvars + i * sizeof v, sizeof v);
        if (v.off > ghi - glo || v.size > ghi - glo - v.off) return -1;  // (offsets in the globals section)
        rs[nr++] = {glo + v.off, v.size, 0, -1 - (int32_t)i};
    }
    if (nextra) rs[nr++] = {glo, ghi - glo, gx::kRoRedzone, -1};
    // the argument values, each at its alignment in one block of storage
    uint64_t start = pos, used = 0;
    for (int32_t i = 0; i < h.nvalues; i++) {
        const uint8_t* at = take(p, len, &pos, 1, sizeof(value_t));
        value_t v;
        if (!at) return -1;
        memcpy(&v, at, sizeof v);
        const uint8_t* data = take(p, len, &pos, 1, v.size);
        uint64_t off = 0;
        if (data && v.kind == kValueArena) {
            if (v.size == 8) memcpy(&off, data, 8);
            if (v.size != 8 || off > h.arena_bytes) return -1;
        }
        if (!data) return -1;
        used += pad(used, v.align) + v.size;
    }
    char* blob = room(blob_buf, blob_cap, used + 1);
    if (!blob) return -1;
    pos = start;
    used = 0;
    for (int32_t i = 0; i < h.nvalues; i++) {
        value_t v;
        memcpy(&v, p + pos, sizeof v);
        pos += sizeof v;
        used += pad(used, v.align);
        argv[i] = blob + used;
        if (v.kind == kValueArena) {
            uint64_t off;
            memcpy(&off, p + pos, 8);
            char* ptr = base + off;
            memcpy(blob + used, &ptr, 8);
        } else {
            memcpy(blob + used, p + pos, v.size);
        }
        pos += v.size;
        used += v.size;
    }
    blob[used++] = 0;
    // read-only and registered: a struct passed by value may be copied from here with memcpy
    rs[nr++] = {(uint64_t)(uintptr_t)blob, used, 1, gx::kArgsIndex};
    gpuenv_launch_t d = {};
    d.entry = workers[0].entry;
    d.args = argv;
    memcpy(d.grid, h.grid, sizeof d.grid);
    memcpy(d.block, h.block, sizeof d.block);
    d.shared_bytes = h.shared_bytes;
    d.warp_size = h.warp_size;
    d.check = h.check & 0xFF;
    d.shared_lo = shared_lo;
    d.shared_hi = shared_hi;
    d.regions = rs;
    d.nregions = nr;
    d.nvars = h.nvars;
    d.vars = vars;
    d.watchdog_s = h.watchdog_s;
    d.out = out;
    d.out_cap = out_cap;
    d.nworkers = nworkers;
    d.workers = workers;
    gpuenv_launch(&d, report);
    return (int64_t)d.out_len;
}
