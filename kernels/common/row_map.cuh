// Which logits / hidden row a selected row reads (SPEC section 1: row 0 of every block is
// the anchor position and is not read). One formula for the reference and every kernel.
#pragma once

#include <stdint.h>

#include "hd.cuh"

namespace dfsel {

// Selected row s maps to row (s / group_rows) * group_stride + group_offset + s % group_rows.
struct RowMap {
  int32_t group_rows;
  int32_t group_stride;
  int32_t group_offset;
};

DFSEL_HD int64_t map_row(RowMap m, int64_t s) {
  return (s / m.group_rows) * m.group_stride + m.group_offset + s % m.group_rows;
}

// The same for a 32-bit row index (every kernel's): 32-bit division, a 64-bit result.
DFSEL_HD int64_t map_row(RowMap m, int32_t s) {
  return (int64_t)(s / m.group_rows) * m.group_stride + m.group_offset + s % m.group_rows;
}

// A selector step: drafted row d = b * L + (p - 1) reads token row b * block_size + p.
DFSEL_HD RowMap drafted_rows(int32_t block_size) { return RowMap{block_size - 1, block_size, 1}; }

}  // namespace dfsel
