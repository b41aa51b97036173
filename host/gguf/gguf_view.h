// What the views of a parsed draft share (gguf_selector.h for DFlash2, gguf_dspark.h for
// DSpark): metadata reads that explain what is wrong, the lookup of a weight tensor of a type
// dfsel reads, and rows of a tensor as a dfsel_tensor view.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "host/gguf/gguf_file.h"
#include "host/status.h"

namespace dfsel::gguf {

Status format_error(std::string what);

// A required integer key within [lo, hi].
Status required_int(const File& f, const char* key, int64_t lo, int64_t hi, int64_t* out);
// An optional float key, left as it is when absent: FORMAT_ERROR unless it is 0 or a finite
// normal float in magnitude (what it narrows to in dfsel_config).
Status optional_float(const File& f, const char* key, double* out);

// Whether dfsel reads a ggml type as a weight (f32, f16, bf16, q8_0, q4_K, q6_K).
bool weight_type(uint32_t t);
// A two-dimensional weight tensor of a type dfsel reads: DFSEL_FORMAT_ERROR when it is missing
// or not two-dimensional, DFSEL_UNSUPPORTED for another type.
Status find_weight_tensor(const File& f, const char* name, const TensorInfo** out);

// Rows [r0, r1) of a two-dimensional tensor as a view: into the file where the stored type is
// read directly and the data is aligned for it, else into *owned (block types but Q8_0 widened to BF16;
// copy: every type copied, so that the File may let its mapping go).
void view_rows(const File& f, const TensorInfo& t, int64_t r0, int64_t r1, std::vector<uint16_t>* owned, dfsel_tensor* v,
               bool copy);

}  // namespace dfsel::gguf
