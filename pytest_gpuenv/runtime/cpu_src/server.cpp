// The child process's last words. The executor runs in a child process of pytest (runtime/_cpu_server.py);
// whatever a kernel does to that process, pytest learns what it was from a note in shared memory:
// exit()/quick_exit() with the status and the call site, a fatal signal with the faulting pc and the
// stack, fork() (the new process ends at once: it would be a copy of the executor, never of pytest).
// The parent reads the note after the child is gone; nothing here ever writes to a pipe.
#include "executor_int.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace {

constexpr int kFrames = 24;  // NOTE_FRAMES in _cpu_proto.py

struct gpuenv_note_t {  // Note in _cpu_proto.py
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

// The sizes of the ABI structs, in the order _cpu_server.py checks its ctypes copies against them at load
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

// The number of fork() calls since the last call (each new process ended at once).
extern "C" __attribute__((visibility("default"))) int gpuenv_server_forks() {
    int n = note ? note->forks : 0;
    if (note) note->forks = 0;
    return n;
}
