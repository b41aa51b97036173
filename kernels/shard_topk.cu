// shard_topk: per selected logits row, the top-K with global ids in candidate order
// (SPEC section 3 for the order, section 4.2 for the role), launched through the vendorable
// top-K (kernels/topk/topk_device.cuh: the kernel, its split rule and its scratch rule). What the
// step adds here: the selected rows of the row map (each block's anchor row skipped), the
// records written in candidate order, the grid sized to leave the gate room on each SM, and the
// chained launch.
#include "kernels/shard_topk.cuh"

#include <algorithm>

#include "kernels/dispatch.cuh"
#include "kernels/policy.cuh"
#include "kernels/topk/topk_device.cuh"

namespace dfsel::cuda {
namespace {

// The logits row of selected row sel (SPEC section 1's row map).
struct MappedRows {
  const uint8_t* base;
  size_t stride;  // bytes
  RowMap map;
  __device__ __forceinline__ const uint8_t* row(int32_t sel) const {
    return base + map_row(map, sel) * (int64_t)stride;
  }
};

topk::Problem problem(const ShardTopKArgs& a) {
  return topk::Problem{a.n_rows, a.n_cols, a.k, a.id_offset};
}

topk::Options options(const ShardTopKArgs& a, int num_sms) {
  topk::Options o;
  o.num_sms = num_sms;
  o.splits = a.splits;
  o.ctas_per_sm = a.shares_sms ? kTopKCtasBesideGate : kTopKCtasPerSm;
  o.pdl = a.chained != 0;
  // Beside the gate, ask for the most shared memory (the least L1, which streaming reads do not
  // use): an SM's split is set by the kernel that reaches it first, and the default for this one
  // (about 64 KB) leaves no room for the gate's CTA.
  o.prefer_shared = a.shares_sms != 0;
  o.scratch = a.scratch;
  return o;
}

int elem_bytes(dfsel_type t) { return (int)row_bytes(t, 1); }

}  // namespace

size_t shard_topk_scratch_bytes(int32_t n_rows, int32_t k, int64_t n_cols, int num_sms) {
  if (n_rows <= 0 || k < 1 || k > kMaxTopK) return 0;
  // A run may select fewer rows than planned, and fewer rows split further: size the partial
  // lists for the worst row count up to n_rows, beside the gate or alone. Only split rows use
  // them, and those number at most num_sms * kTopKCtasPerSm / 2, so the loop is short. F32 rows
  // split the most (4-byte elements: the most vectors a row).
  const int64_t stop = std::min<int64_t>(n_rows, (int64_t)std::max(num_sms, 1) * kTopKCtasPerSm);
  size_t bytes = 0;
  for (int64_t n = 1; n <= stop; ++n)
    for (int shares : {0, 1}) {
      ShardTopKArgs a{};
      a.n_rows = (int32_t)n;
      a.k = k;
      a.n_cols = n_cols;
      a.shares_sms = shares;
      bytes = std::max(bytes, topk::scratch_bytes(problem(a), 4, options(a, num_sms)));
    }
  return bytes;
}

size_t shard_topk_scratch_bytes_split(int32_t n_rows, int32_t k, int32_t splits, int num_sms) {
  topk::Options o;
  o.num_sms = num_sms;
  return topk::counter_bytes(o) + (size_t)n_rows * splits * k * sizeof(CandRec);
}

int shard_topk_splits(const ShardTopKArgs& a, int num_sms) {
  return topk::splits(problem(a), elem_bytes(a.type), options(a, num_sms));
}

bool shard_topk_one_wave(const ShardTopKArgs& a, int num_sms) {
  return topk::one_wave(problem(a), elem_bytes(a.type), options(a, num_sms));
}

cudaError_t shard_topk(const ShardTopKArgs& a, int num_sms, cudaStream_t stream) {
  // The plan validated the arguments (shard_topk_splits > 0 for them) and sized the scratch;
  // the top-K refuses them otherwise, launching nothing.
  const topk::Problem p = problem(a);
  const topk::Options o = options(a, num_sms);
  const MappedRows rows{static_cast<const uint8_t*>(a.logits), a.row_stride, a.map};
  const topk::RecordWriter out{a.out, a.out_stride};
  return dispatch_float_type(a.type, [&](auto T) {
    using E = std::conditional_t<T.value == DFSEL_TYPE_F32, float,
                                 std::conditional_t<T.value == DFSEL_TYPE_F16, __half, __nv_bfloat16>>;
    return topk::batched_topk<E>(p, rows, out, o, stream);
  });
}

}  // namespace dfsel::cuda
