// What the child process's Python (runtime/cpu/server.py) and the executor share beyond the kernel ABI of
// include/gpuenv_cpu.h: the death note (death_note.cpp) and the parts of a launch request (request.cpp).
// runtime/cpu/protocol.py declares them all: gpuenv_layout.h, which the build generates from it (rtc/_cpu.py,
// or the Makefile: python protocol.py), gives the constants below and checks every field's offset and size
// here and in gpuenv_cpu.h against its declarations (GPUENV_CHECK_LAYOUT).
#pragma once
#include "include/gpuenv_cpu.h"
#include "gpuenv_layout.h"

#include <stdint.h>

namespace gx __attribute__((visibility("hidden"))) {

constexpr int kFrames = PROTOCOL_NOTE_FRAMES;

// The child's last words, in the shared arena (Note in protocol.py).
struct gpuenv_note_t {
    int32_t kind, value, in_launch, nframes, forks, kmask;  // kmask: frames in a kernel module
    uint32_t block[3], thread[3];
    uint64_t addr;
    uint64_t pcs[kFrames], bases[kFrames];
};
enum { NOTE_EXIT = PROTOCOL_NOTE_EXIT, NOTE_QUICK_EXIT = PROTOCOL_NOTE_QUICK_EXIT, NOTE_SIGNAL = PROTOCOL_NOTE_SIGNAL,
       NOTE_STUCK = PROTOCOL_NOTE_STUCK };

// The parts of a launch request's payload (LAUNCH, SVAR, VAR, REGION, VALUE in protocol.py): little-endian
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
constexpr uint8_t kValueBytes = PROTOCOL_VALUE_BYTES;  // the value's own bytes
constexpr uint8_t kValueArena = PROTOCOL_VALUE_ARENA;  // an 8-byte offset in the arena, made a pointer

GPUENV_CHECK_LAYOUT;

}  // namespace gx
