// Buffers carved one after another from a workspace, each at a 16-byte offset. The total
// saturates at SIZE_MAX when the buffers cannot fit in the address space (large max_blocks
// times n_embd), so that plan creation can refuse the description instead of wrapping.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

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

// Where a carve's buffers go: the caller's workspace, or `owned` sized for total bytes.
inline uint8_t* workspace_base(void* given, size_t total, std::vector<uint8_t>* owned) {
  if (given) return static_cast<uint8_t*>(given);
  owned->resize(total + 16);
  return owned->data();
}

}  // namespace dfsel
