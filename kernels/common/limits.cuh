// The sizes the kernels are built for: one constant each, read by validation and kernels.
#pragma once

namespace dfsel {

constexpr int kMaxTopK = 64;            // K: the largest template bucket (kernels/dispatch.cuh)
constexpr int kMaxCodebookRank = 1024;  // R: the lattice stages one R chunk of every row

}  // namespace dfsel
