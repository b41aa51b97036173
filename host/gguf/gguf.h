// GGUF v2/v3 reader and the DFlash2 selector view of a draft file (SPEC section 6.6).
//
// gguf_file.h: File maps a GGUF file read-only and validates every field before anything
// reads it; a malformed file yields DFSEL_FORMAT_ERROR, an unknown version or ggml type
// DFSEL_UNSUPPORTED, and a message that names the section, the field, its value and its byte
// offset.
// gguf_selector.h: Selector picks the three selector tensors out of a parsed file and exposes
// them as dfsel_tensor views, dequantising the widened block types (dequant.h) into BF16 buffers it owns.
// gguf_dspark.h: DSparkDraft, the same for a DSpark draft's Markov head (docs/dspark.md).
#pragma once

#include "host/gguf/gguf_dspark.h"
#include "host/gguf/gguf_file.h"
#include "host/gguf/gguf_selector.h"
#include "host/gguf/dequant.h"
