// The checks that make a ggml tensor a dfsel_tensor, shared by the public conversion (which
// also needs data) and by the graph node's set-up (which runs before a graph allocator has
// placed the data).
#pragma once

#include <string>

#include "host/status.h"

struct ggml_tensor;

namespace dfsel::ggml {

// The tensor's name as messages show it: 'logits', or (unnamed).
std::string display_name(const ggml_tensor* t);

// Type, dimensions and strides; data is not looked at.
Status check_layout(const ggml_tensor* t);

// check_layout, then data present and aligned; fills *out.
Status to_view(const ggml_tensor* t, dfsel_tensor* out);

}  // namespace dfsel::ggml
