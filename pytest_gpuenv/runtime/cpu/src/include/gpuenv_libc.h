// Checked mode: libc's memory and string functions called from device code are checked too. g++ calls
// libc for them (not the __tsan_mem* entry points), so the kernel module defines them here, once (a
// kernel module is one translation unit) and binds its own calls to them (-Wl,-Bsymbolic; the module is
// compiled with -fno-builtin-<name> so none is expanded inline). Each checks its whole range before the
// real function runs (src/libc_checks.cpp); the launch stops on the first byte out of bounds.
#pragma once
#if GPUENV_CHECK
#include <stdarg.h>
#include <stddef.h>

extern "C" {
void* gpuenv_memset(void* d, int c, size_t n, void* pc);
void* gpuenv_memcpy(void* d, const void* s, size_t n, void* pc);
void* gpuenv_memmove(void* d, const void* s, size_t n, void* pc);
char* gpuenv_strcpy(char* d, const char* s, void* pc);
char* gpuenv_strncpy(char* d, const char* s, size_t n, void* pc);
size_t gpuenv_strlen(const char* s, void* pc);
int gpuenv_vsnprintf(char* d, size_t n, bool bounded, const char* fmt, va_list ap, void* pc);

#define GPUENV_LIBC __attribute__((__visibility__("default"), __no_sanitize__("thread"), __noinline__))
#define GPUENV_PC __builtin_return_address(0)
GPUENV_LIBC void* memset(void* d, int c, size_t n) noexcept { return gpuenv_memset(d, c, n, GPUENV_PC); }
GPUENV_LIBC void* memcpy(void* __restrict d, const void* __restrict s, size_t n) noexcept {
    return gpuenv_memcpy(d, s, n, GPUENV_PC);
}
GPUENV_LIBC void* memmove(void* d, const void* s, size_t n) noexcept { return gpuenv_memmove(d, s, n, GPUENV_PC); }
GPUENV_LIBC char* strcpy(char* __restrict d, const char* __restrict s) noexcept { return gpuenv_strcpy(d, s, GPUENV_PC); }
GPUENV_LIBC char* strncpy(char* __restrict d, const char* __restrict s, size_t n) noexcept {
    return gpuenv_strncpy(d, s, n, GPUENV_PC);
}
GPUENV_LIBC size_t strlen(const char* s) noexcept { return gpuenv_strlen(s, GPUENV_PC); }
GPUENV_LIBC int vsnprintf(char* __restrict d, size_t n, const char* __restrict f, va_list ap) noexcept {
    return gpuenv_vsnprintf(d, n, true, f, ap, GPUENV_PC);
}
GPUENV_LIBC int vsprintf(char* __restrict d, const char* __restrict f, va_list ap) noexcept {
    return gpuenv_vsnprintf(d, 0, false, f, ap, GPUENV_PC);
}
GPUENV_LIBC int snprintf(char* __restrict d, size_t n, const char* __restrict f, ...) noexcept {
    va_list ap;
    va_start(ap, f);
    int r = gpuenv_vsnprintf(d, n, true, f, ap, GPUENV_PC);
    va_end(ap);
    return r;
}
GPUENV_LIBC int sprintf(char* __restrict d, const char* __restrict f, ...) noexcept {
    va_list ap;
    va_start(ap, f);
    int r = gpuenv_vsnprintf(d, 0, false, f, ap, GPUENV_PC);
    va_end(ap);
    return r;
}
#undef GPUENV_LIBC
#undef GPUENV_PC
}
#endif
