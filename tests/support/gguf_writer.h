// GGUF fixtures: a small GGUF writer, valid DFlash2 drafts of any size and type, and (through
// DraftOptions::defect and truncate_to) the malformed files the reader must refuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel::test {

// GGUF metadata value type ids.
enum GgufType : uint32_t {
  kGgufU8 = 0,
  kGgufI8 = 1,
  kGgufU16 = 2,
  kGgufI16 = 3,
  kGgufU32 = 4,
  kGgufI32 = 5,
  kGgufF32 = 6,
  kGgufBool = 7,
  kGgufString = 8,
  kGgufArray = 9,
  kGgufU64 = 10,
  kGgufI64 = 11,
  kGgufF64 = 12
};

// One metadata value of any GGUF type; arrays nest.
class GgufValue {
 public:
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue str(const std::string& v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f64(double v);
  // Elements must all have type elem_type.
  static GgufValue array(uint32_t elem_type, std::vector<GgufValue> elems);

  uint32_t type() const { return type_; }
  // Appends the value as stored after its type field.
  void encode(std::vector<uint8_t>* out) const;

 private:
  uint32_t type_ = kGgufU8;
  std::vector<uint8_t> bytes_;  // a scalar or a string, encoded
  uint32_t elem_type_ = kGgufU8;
  std::vector<GgufValue> elems_;
};

struct GgufKv {
  std::string key;
  GgufValue value;
};

struct GgufTensor {
  std::string name;
  uint32_t type = 0;               // ggml type id, written as is
  std::vector<uint64_t> ne;        // written as is; n_dims = ne.size()
  std::vector<uint8_t> data;       // laid out at the next aligned offset of the data section
  std::optional<uint64_t> offset;  // written instead of the real offset (data stays in place)
};

// Byte offsets of the parts write_gguf wrote.
struct GgufLayout {
  size_t kv_begin = 0;     // first key/value pair (the header ends here)
  size_t infos_begin = 0;  // first tensor info
  size_t infos_end = 0;    // end of the last tensor info
  size_t data_begin = 0;   // start of the data section
  size_t data_end = 0;     // end of the last tensor's data (trailing padding follows)
  size_t size = 0;
  std::vector<size_t> kv_at;     // each pair's key length field
  std::vector<size_t> value_at;  // each pair's value (after its type field)
  std::vector<size_t> info_at;   // each tensor info's name length field
  std::vector<size_t> data_at;   // each tensor's data, absolute
};

// A GGUF file: "GGUF", version, counts, the pairs, the infos, the data padded to alignment
// (also after the last tensor, as ggml's writer does).
std::vector<uint8_t> write_gguf(uint32_t version, const std::vector<GgufKv>& kvs,
                                const std::vector<GgufTensor>& tensors, uint32_t alignment,
                                GgufLayout* layout);

// n values stored as type: F32, F16, BF16 converted, Q8_0 and the widened block types
// quantised by a straightforward rounding quantiser (n a multiple of the block size).
std::vector<uint8_t> quantize(dfsel_type type, const float* x, int64_t n);

// A deterministic value in [-1, 1) for element i of fixture tensor `which`.
float draft_value(uint64_t seed, int which, int64_t i);

// rows x ne0 values of draft tensor `which` (draft_value(seed, which, row * ne0 + col)),
// stored as type one row at a time; with period > 0, rows from `period` on repeat.
std::vector<uint8_t> draft_rows(uint64_t seed, int which, dfsel_type type, int64_t ne0, int64_t rows,
                                int64_t period = 0);

enum class Defect {
  kNone,
  // header
  kBadMagic,
  kHugeTensorCount,  // 2^62
  kHugeKvCount,      // 2^62
  // metadata
  kKeyPastEof,     // key length runs past the end of the file
  kStringPastEof,  // general.architecture's length is 2^62
  kHugeArray,      // an array of 2^62 u32
  kBadValueType,   // value type 13
  kBadArrayType,   // array element type 13
  kBadBool,        // a bool stored as 2
  kDeepArrays,     // arrays nested 9 deep
  kEmptyKey,
  kDuplicateKey,
  kBadAlignment,   // general.alignment = 48
  kAlignmentType,  // general.alignment stored as u64
  // tensor infos
  kNamePastEof,
  kUnknownTensorType,  // selector_hidden.weight has ggml type 200
  kNDims0,
  kNDims5,
  kNeZero,            // selector_successor.weight ne[1] = 0
  kNeOverflow,        // selector_successor.weight ne[1] = 2^62
  kRaggedBlock,       // a Q8_0 selector_successor.weight with ne[0] = R + 1
  kMisalignedOffset,  // selector_successor.weight offset + 16
  kOffsetPastEof,     // selector_hidden.weight offset 2^40
  kDuplicateTensor,   // a second selector_predecessor.weight
  // the DFlash2 draft
  kUnsupportedSelectorType,  // selector_hidden.weight stored as IQ4_NL
  kMissingTensor,            // no selector_hidden.weight
  kRankMismatch,             // dflash.selector_rank = R + 1
  kVocabMismatch,            // selector_successor.weight has V + 1 rows
  kHiddenShape,              // selector_hidden.weight is {n_embd + 1, R}
  kWrongArchitecture,        // "llama"
  kMissingArchitecture,
  kMissingKey,        // no dflash.block_size
  kKeyWrongType,      // dflash.selector_top_k is a string
  kRankZero,          // dflash.selector_rank = 0
  kBlockSizeOne,      // dflash.block_size = 1
  kTopKTooLarge,      // dflash.selector_top_k = V + 1
  kBadLogitScale,     // dflash.logit_scale = -1
  kSoftcapNotFinite,  // dflash.final_logit_softcapping = inf
};

struct DraftOptions {
  int64_t n_vocab = 64;
  int64_t rank = 32;
  int64_t n_embd = 32;
  int64_t top_k = 4;
  int64_t block_size = 16;
  dfsel_type codebook_type = DFSEL_TYPE_F16;  // e_prev and e_next
  dfsel_type hidden_type = DFSEL_TYPE_F16;    // w_h
  uint32_t version = 3;
  uint32_t alignment = 32;  // written as general.alignment when not 32
  std::optional<double> logit_scale;  // written as f32 (rounded), or as f64 with f64_scalars
  std::optional<double> softcap;
  bool f64_scalars = false;
  std::string name = "dfsel test draft";  // general.name; its length shifts every later byte
  bool every_value_type = false;          // test.* metadata of every GGUF type, nested arrays too
  bool other_tensors = false;  // unrelated tensors (q5_K, f32, i32) before the selector's
  uint64_t seed = 1;
  int64_t row_period = 0;  // > 0: codebook row v repeats row v % row_period (cheap huge drafts)
  Defect defect = Defect::kNone;
  size_t truncate_to = SIZE_MAX;
};

struct Draft {
  std::vector<uint8_t> bytes;
  GgufLayout layout;
  size_t e_prev_at = 0, e_next_at = 0, w_h_at = 0;  // absolute offsets of the selector data
};

Draft make_draft(const DraftOptions& o);

// The value the writer stored (before rounding to the tensor's type) at (row, col) of draft
// tensor `which`: 0 e_prev, 1 e_next (row = token id), 2 w_h (row = rank index).
float draft_element(const DraftOptions& o, int which, int64_t row, int64_t col);

// A fresh directory under the system temp directory, removed with its contents at the end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes the first min(n, bytes.size()) bytes to path; false on an I/O error.
bool write_file(const std::string& path, const std::vector<uint8_t>& bytes, size_t n = SIZE_MAX);

}  // namespace dfsel::test
