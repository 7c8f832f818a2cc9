// __device__/__constant__ variables in one section, each after a red zone (pytest_gpuenv/rtc/_cpu_globals.py
// rewrites plain definitions to GPUENV_GLOBAL_RZ ... GPUENV_GLOBAL); checked mode reports an access that
// touches a red zone (an array overflowing into its neighbour) as out of bounds, naming the variable.
#pragma once
#define GPUENV_GCAT2(a, b) a##b
#define GPUENV_GCAT(a, b) GPUENV_GCAT2(a, b)
#define GPUENV_GLOBAL_RZ \
    static char GPUENV_GCAT(__gpuenv_grz, __COUNTER__)[64] __attribute__((__section__("gpuenv_globals"), __used__, __aligned__(16)));
#define GPUENV_GLOBAL __attribute__((__section__("gpuenv_globals"), __aligned__(16)))

extern char __start_gpuenv_globals[] __attribute__((__weak__, __visibility__("hidden")));
extern char __stop_gpuenv_globals[] __attribute__((__weak__, __visibility__("hidden")));
extern "C" __attribute__((__visibility__("default"), __used__)) void __gpuenv_globals_range(char** lo, char** hi) {
    *lo = __start_gpuenv_globals;
    *hi = __stop_gpuenv_globals;
}
