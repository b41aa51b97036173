// GGUF files read by ggml (gguf.h) and by dfsel (dfsel/gguf.h), compared: metadata keys, types
// and values in file order, and every tensor's name, type, shape, offset and bytes.
#pragma once

#include <gguf.h>

#include <string>
#include <vector>

#include "dfsel/gguf.h"

namespace dfsel::test {

// Value `id` of a ggml GGUF context written the way dfsel_gguf_metadata_value_string renders
// values (numbers, "true"/"false", quoted escaped strings, the first 8 array elements), so
// that equal strings mean equal values.
std::string render_ggml_value(const gguf_context* g, int64_t id);

// "" when dfsel's handle and ggml's context hold the same metadata (count, order, keys, types,
// array element types and lengths, values) and the same tensors (names, types, ne, absolute
// data offsets, sizes inside `file`), else the first difference. With `data` (the context
// gguf_init_from_file loaded the tensors into), ggml's loaded bytes must be the file's.
// offsets false: a writer's context, which knows tensor offsets only relative to the data.
std::string compare_gguf(const dfsel_gguf* d, const gguf_context* g, const std::vector<uint8_t>& file,
                         ggml_context* data, bool offsets = true);

// The whole file.
std::vector<uint8_t> read_all(const std::string& path);

// Silences ggml's log (its reader reports every refused file) for the life of the object.
class QuietGgmlLog {
 public:
  QuietGgmlLog();
  ~QuietGgmlLog();
};

}  // namespace dfsel::test
