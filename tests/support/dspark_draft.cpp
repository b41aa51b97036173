#include "dspark_draft.h"

#include <cstring>
#include <numeric>
#include <string>

#include "gguf_writer.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::test {

namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& x) {
  std::vector<uint8_t> out(x.size() * 4);
  std::memcpy(out.data(), x.data(), out.size());
  return out;
}

std::vector<float> values(const DSparkDraftOptions& o, int which, int64_t n, float lo, float hi) {
  std::vector<float> x((size_t)n);
  for (int64_t i = 0; i < n; ++i) x[(size_t)i] = lo + (hi - lo) * 0.5f * (draft_value(o.seed, which, i) + 1.0f);
  return x;
}

}  // namespace

int64_t dspark_draft_target(const DSparkDraftOptions& o, int64_t draft_id) {
  const int64_t vt = o.n_target_vocab ? o.n_target_vocab : o.n_vocab;
  // A stride coprime with V_target scatters the draft ids over distinct target ids.
  int64_t stride = 7919;
  while (std::gcd(stride, vt) != 1) ++stride;
  return (draft_id * stride + 3) % vt;
}

std::vector<uint8_t> make_dspark_draft(const DSparkDraftOptions& o) {
  using V = GgufValue;
  using D = DSparkDefect;
  const int64_t R = o.rank, NV = o.n_vocab, NT = o.n_target_vocab ? o.n_target_vocab : o.n_vocab;
  std::vector<GgufKv> kvs = {
      {"general.architecture", V::str(o.defect == D::kWrongArchitecture ? "llama" : "dflash")},
      {"general.name", V::str("dfsel test DSpark draft")},
      {"dflash.block_size", V::u32(uint32_t(o.defect == D::kBlockOneAfterAnchor ? 1 : o.block_size))},
  };
  if (o.defect == D::kNoBlockSize) kvs.pop_back();
  if (o.sample_from_anchor || o.defect == D::kBlockOneAfterAnchor)
    kvs.push_back({"dflash.sample_from_anchor", V::boolean(o.defect == D::kBlockOneAfterAnchor ? false : *o.sample_from_anchor)});
  if (o.defect == D::kAnchorKeyType) kvs.push_back({"dflash.sample_from_anchor", V::u32(1)});
  if (o.n_embd > 0 || o.defect == D::kConfKeyNoTensor) {
    kvs.push_back({"dflash.has_confidence_head", V::boolean(true)});
    kvs.push_back({"dflash.embedding_length", V::u32(uint32_t(o.n_embd + (o.defect == D::kConfEmbd ? 1 : 0)))});
  }
  std::vector<GgufTensor> tensors;
  const int64_t w1_rows = NT + (o.defect == D::kVocabMismatch ? 1 : 0);
  tensors.push_back({"markov_w1.weight", o.defect == D::kW1Type ? 20u : uint32_t(o.w1_type), {uint64_t(R), uint64_t(w1_rows)},
                     draft_rows(o.seed, 0, o.defect == D::kW1Type ? DFSEL_TYPE_Q8_0 : o.w1_type, R, w1_rows, o.row_period), {}});
  if (o.defect == D::kW1Type) tensors.back().data.resize(size_t(w1_rows * R / 32 * 18));  // iq4_nl blocks: 18 bytes
  const int64_t w2_cols = R + (o.defect == D::kRankMismatch ? 1 : 0);
  if (o.defect != D::kMissingW2)
    tensors.push_back({"markov_w2.weight", uint32_t(o.w2_type), {uint64_t(w2_cols), uint64_t(NV)},
                       draft_rows(o.seed, 1, o.w2_type, w2_cols, NV, o.row_period), {}});
  if (o.scale || o.defect == D::kScaleShape || o.defect == D::kScaleType) {
    const int64_t n = o.defect == D::kScaleShape ? 2 : o.scale == 1 ? 1 : NV;
    std::vector<uint8_t> bytes = f32_bytes(values(o, 3, n, 0.5f, 1.5f));
    if (o.defect == D::kScaleType) bytes.resize(size_t(n) * 2);
    tensors.push_back({"markov_w2.scale", o.defect == D::kScaleType ? 1u : 0u, {uint64_t(n)}, bytes, {}});
  }
  if (o.n_embd > 0) {
    const int64_t width = o.defect == D::kConfShape ? R : o.n_embd + R;
    tensors.push_back({"conf_proj.weight", uint32_t(o.conf_type), {uint64_t(width)},
                       draft_rows(o.seed, 4, o.conf_type, width, 1), {}});
    if (o.conf_bias) tensors.push_back({"conf_proj.bias", 0, {1}, f32_bytes(values(o, 5, 1, -1.0f, 1.0f)), {}});
  }
  if (o.d2t) {
    const int64_t n = NV + (o.defect == D::kD2tShape ? 1 : 0);
    std::vector<uint8_t> bytes(size_t(n) * (o.d2t_i32 ? 4 : 8));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = o.defect == D::kD2tRange && i == 1 ? NT : dspark_draft_target(o, i);
      if (o.d2t_i32) {
        const int32_t v = int32_t(id);
        std::memcpy(&bytes[size_t(i) * 4], &v, 4);
      } else {
        std::memcpy(&bytes[size_t(i) * 8], &id, 8);
      }
    }
    const uint32_t type = o.defect == D::kD2tType ? 0u : o.d2t_i32 ? 26u : 27u;
    if (o.defect == D::kD2tType) bytes.resize(size_t(n) * 4);
    tensors.push_back({"d2t", type, {uint64_t(n)}, bytes, {}});
  }
  GgufLayout layout;
  return write_gguf(o.version, kvs, tensors, 32, &layout);
}

}  // namespace dfsel::test
