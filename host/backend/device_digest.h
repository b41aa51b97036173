// The digest of weights a CUDA plan holds in device memory (kernels/common/digest.cuh), taken
// once at set-up for a group's ranks to compare: the rows are copied to the host and digested
// there, as a CPU plan digests its own.
#pragma once

#include <stdint.h>

#include <vector>

#include "dfsel/dfsel.h"
#include "host/backend/device_memory.h"
#include "kernels/common/digest.cuh"
#include "kernels/common/numeric.cuh"

namespace dfsel {

// matrix_digest of t's rows (device memory of `device`); `what` names them in a failure.
inline Status device_matrix_digest(const dfsel_tensor& t, int device, const char* what, uint64_t* out) {
  const size_t n = row_bytes(t.type, t.ne[0]);
  std::vector<uint8_t> rows(n * (size_t)t.ne[1]);
  DFSEL_TRY(device_rows_to_host(t.data, t.nb[1], n, t.ne[1], device, rows.data(), what));
  *out = matrix_digest(rows.data(), n, t.ne[1], n);
  return Status::success();
}

}  // namespace dfsel
