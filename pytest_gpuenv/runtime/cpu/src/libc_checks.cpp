// Checked mode: the kernel module's memset/memcpy/memmove/strcpy/strncpy/strlen/(v)s(n)printf
// (include/gpuenv_libc.h) call these, with the call site in the kernel. The whole range is checked
// like any load or store before the real libc function runs (outside a launch, as in a static
// initialiser, nothing is checked).
#include "executor_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

using gx::check_access;

static inline void rd(const void* p, size_t n, void* pc) {
    if (n) check_access((uintptr_t)p, n, false, pc);
}
static inline void wr(void* p, size_t n, void* pc) {
    if (n) check_access((uintptr_t)p, n, true, pc);
}

extern "C" {
void* gpuenv_memset(void* d, int c, size_t n, void* pc) {
    wr(d, n, pc);
    return memset(d, c, n);
}
void* gpuenv_memcpy(void* d, const void* s, size_t n, void* pc) {
    rd(s, n, pc);
    wr(d, n, pc);
    return memcpy(d, s, n);
}
void* gpuenv_memmove(void* d, const void* s, size_t n, void* pc) {
    rd(s, n, pc);
    wr(d, n, pc);
    return memmove(d, s, n);
}
size_t gpuenv_strlen(const char* s, void* pc) {
    size_t n = strlen(s);
    rd(s, n + 1, pc);
    return n;
}
char* gpuenv_strcpy(char* d, const char* s, void* pc) {
    size_t n = gpuenv_strlen(s, pc) + 1;
    wr(d, n, pc);
    return (char*)memcpy(d, s, n);
}
char* gpuenv_strncpy(char* d, const char* s, size_t n, void* pc) {
    size_t len = strnlen(s, n);
    rd(s, len < n ? len + 1 : n, pc);
    wr(d, n, pc);
    return strncpy(d, s, n);
}
// bounded: snprintf's size n is the room; else sprintf (no room given)
int gpuenv_vsnprintf(char* d, size_t n, bool bounded, const char* fmt, va_list ap, void* pc) {
    va_list ap2;
    va_copy(ap2, ap);
    int len = vsnprintf(nullptr, 0, fmt, ap2);
    va_end(ap2);
    if (len >= 0) {
        size_t need = (size_t)len + 1;
        wr(d, bounded && n < need ? n : need, pc);
    }
    return bounded ? vsnprintf(d, n, fmt, ap) : vsprintf(d, fmt, ap);
}
}
