// Limits the kernels are built for, shared with host-side validation.
#pragma once

namespace dfsel {

constexpr int kMaxTopKLimit = 64;  // K
constexpr int kMaxRank = 1024;     // R

}  // namespace dfsel
