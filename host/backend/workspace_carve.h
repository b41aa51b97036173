// Buffers carved one after another from a workspace, each at a 16-byte offset. The total
// saturates at SIZE_MAX when the buffers cannot fit in the address space (large max_blocks
// times n_embd), so that plan creation can refuse the description instead of wrapping.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/exchange_layout.cuh"

namespace dfsel {

struct WorkspaceCarve {
  size_t total = 0;
  // The offset of a new buffer of `bytes`.
  size_t take(size_t bytes) {
    const size_t at = total;
    if (bytes > SIZE_MAX - 15 || __builtin_add_overflow(total, align16(bytes), &total)) total = SIZE_MAX;
    return at;
  }
  // a * b, or SIZE_MAX when it overflows.
  static size_t product(size_t a, size_t b) {
    size_t p;
    return __builtin_mul_overflow(a, b, &p) ? SIZE_MAX : p;
  }
};

}  // namespace dfsel
