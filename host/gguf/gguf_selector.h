// The DFlash2 selector view of a parsed draft (SPEC section 6.6): the three selector tensors
// as dfsel_tensor views, block types dequantised into BF16 buffers the Selector owns.
#pragma once

#include <stdint.h>

#include <vector>

#include "dfsel/dfsel.h"
#include "host/gguf/gguf_file.h"
#include "host/status.h"

namespace dfsel::gguf {

// The DFlash2 selector of a draft (SPEC section 6.6), for the vocabulary rows
// [v_begin, v_end) of the codebooks. F32, F16, BF16 and Q8_0 tensors are views into the
// file's mapping (the File must outlive the Selector); the other block types (Q4_0 .. Q5_1,
// Q2_K .. Q6_K) are dequantised into BF16 buffers the Selector owns.
class Selector {
 public:
  Selector() = default;
  Selector(Selector&&) noexcept = default;
  Selector& operator=(Selector&&) noexcept = default;
  Selector(const Selector&) = delete;
  Selector& operator=(const Selector&) = delete;

  static constexpr const char* kPredecessor = "selector_predecessor.weight";
  static constexpr const char* kSuccessor = "selector_successor.weight";
  static constexpr const char* kHidden = "selector_hidden.weight";

  // v_begin = v_end = -1 selects the whole vocabulary. A range outside [0, V) is
  // DFSEL_INVALID_ARGUMENT; a file that is not a consistent DFlash2 draft DFSEL_FORMAT_ERROR;
  // a selector tensor of a type dfsel does not read DFSEL_UNSUPPORTED.
  // copy: every tensor is copied into buffers the Selector owns, so that the File may let
  // its mapping go (File::detach).
  static Status load(const File& file, int64_t v_begin, int64_t v_end, Selector* out, bool copy = false);

  const dfsel_config& config() const { return config_; }  // max_blocks is 0
  int64_t v_begin() const { return v_begin_; }
  int64_t v_end() const { return v_end_; }
  const dfsel_tensor& e_prev() const { return e_prev_; }  // {R, v_end - v_begin}
  const dfsel_tensor& e_next() const { return e_next_; }  // {R, v_end - v_begin}
  const dfsel_tensor& w_h() const { return w_h_; }        // {n_embd, R}

 private:
  dfsel_config config_{};
  int64_t v_begin_ = 0;
  int64_t v_end_ = 0;
  dfsel_tensor e_prev_{};
  dfsel_tensor e_next_{};
  dfsel_tensor w_h_{};
  // Dequantised BF16 rows, or a copy when the stored data is not aligned for its type.
  std::vector<uint16_t> owned_[3];
};

}  // namespace dfsel::gguf
