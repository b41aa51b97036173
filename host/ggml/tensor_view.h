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

// Refuses t when the address of its data is known and not a multiple of `align` bytes: data
// set, or a view into a tensor not placed yet at an offset that no buffer's alignment (every
// ggml buffer is aligned to 32 bytes or more) can make one.
Status check_alignment(const ggml_tensor* t, size_t align);

// The alignment dfsel reads a float tensor's elements at: F32 4 bytes, F16 and BF16 2; I32 4.
size_t element_alignment(const ggml_tensor* t);

// check_layout, then data present and aligned; fills *out.
Status to_view(const ggml_tensor* t, dfsel_tensor* out);

}  // namespace dfsel::ggml
