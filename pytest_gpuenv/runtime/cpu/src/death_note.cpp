// The death note: the child process's last words. The executor runs in a child process of pytest (runtime/cpu/server.py);
// whatever a kernel does to that process, pytest learns what it was from a note in shared memory:
// exit()/quick_exit() with the status and the call site, a fatal signal with the faulting pc and the
// stack, fork() (the new process ends at once: it would be a copy of the executor, never of pytest).
// The parent reads the note after the child is gone; nothing here ever writes to a pipe. Also what a
// request left behind (gpuenv_server_after): fork() calls, processes, threads still running.
#include "executor_int.h"
#include "protocol.h"

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

using namespace gx;

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
    note->in_launch = cur_launch && current_launch().active;
    if (note->in_launch) where_now(note->block, note->thread);
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
    record(NOTE_SIGNAL, sig, (void*)sig_pc(uc));
    note->addr = (uintptr_t)si->si_addr;
    signal(sig, SIG_DFL);
    raise(sig);  // pending until this handler returns: the process ends by this signal
}

// SIGUSR2 from pytest at its watchdog: note where the kernel is (pytest kills the process next)
void on_stuck(int, siginfo_t*, void* uc) {
    record(NOTE_STUCK, 0, (void*)sig_pc(uc));
}

void before_fork() {
    if (note) note->forks++;
}
void in_forked_child() { _exit(127); }

}  // namespace

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

