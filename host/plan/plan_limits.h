// Limits of a plan's config that no kernel is built for (those are kernels/common/limits.cuh):
// validation and the dfsel command's flags read them here, so both name one range.
#pragma once

namespace dfsel {

constexpr int kMaxBlockSize = 1024;  // B: the anchor and its drafted positions (SPEC section 1)

}  // namespace dfsel
