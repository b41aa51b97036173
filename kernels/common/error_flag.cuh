// Device-side error words of a run, read back by the backend's report after the run.
#pragma once

#include <stdint.h>

namespace dfsel::cuda {

// *error = 1 + the lowest block b flagged (0: none), whatever order the flags come in, so that
// every rank of a group that flags the same blocks reports the same one.
__device__ __forceinline__ void flag_lowest_block(int32_t* error, int b) {
  int cur = atomicCAS(error, 0, b + 1);
  while (cur != 0 && cur > b + 1) {
    const int prev = atomicCAS(error, cur, b + 1);
    if (prev == cur) break;
    cur = prev;
  }
}

}  // namespace dfsel::cuda
