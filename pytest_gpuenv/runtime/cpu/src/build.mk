# The CPU executor's build, declared once: the Makefile here includes it and the Python build reads it
# (runtime/cpu/sources.py, rtc/_cpu.py: build_executor). Plain `NAME = words` lines (a `\` continues one).
# Both builds also generate gpuenv_layout.h from ../protocol.py into their output folder (protocol.h).

# the sources, one library (README.md says what each holds)
EXECUTOR_SOURCES = scheduler.cpp fibers.cpp barrier.cpp warps.cpp checks.cpp libc_checks.cpp coop.cpp \
    launch.cpp printf.cpp report.cpp signals.cpp death_note.cpp request.cpp
# the headers they include (with the sources, build.mk and gpuenv_layout.h: a built executor's cache key)
EXECUTOR_HEADERS = executor_int.h fibers.h fiber_switch.h protocol.h include/gpuenv_cpu.h
EXECUTOR_FLAGS = -std=c++17 -O2 -g1 -fPIC -shared -fno-exceptions
EXECUTOR_LIBS = -lrt
# added where GPUENV_CPU_UCONTEXT=1: the ucontext context switch instead of the x86-64 one (fiber_switch.h)
EXECUTOR_UCONTEXT_FLAGS = -DGPUENV_UCONTEXT
