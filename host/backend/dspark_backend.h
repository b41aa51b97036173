// A DSpark backend runs one rank's part of the chain (dspark.h) on its memory. A run is a
// sequence of exchanges (kernels/common/dspark_record.cuh); around each the plan asks every
// rank to send (write its records) and then to receive (read every rank's records). Plan
// creation validates and sizes everything; a run allocates nothing.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <memory>

#include "dfsel/dspark.h"
#include "host/backend/backend.h"
#include "host/status.h"
#include "kernels/common/dspark_record.cuh"
#include "kernels/common/row_map.cuh"
#include "kernels/common/selector_math.cuh"

namespace dfsel {

// Sizes and resolved defaults every layer derives from a validated DSpark description.
struct DSparkShape {
  int32_t R, N, rows;  // rows: logits rows a block (N, or N + 1 without sample_from_anchor)
  bool sample_from_anchor, sharded_w1, conf, d2t;
  int32_t scale_rows;  // 0: no markov_w2.scale, 1: one scale, else one per row
  int64_t n_vocab, n_target_vocab, n_embd, v_begin, v_end;
  int32_t n_ranks;
  size_t w1_row_bytes;
  Transform transform;  // of the base logits; logit_scale 0 resolved to 1
  RowMap row_map;       // the row drafted step d = b * N + (k - 1) reads
  DSparkLayout layout_for(int32_t n_blocks) const { return make_dspark_layout(n_blocks, sharded_w1, w1_row_bytes); }
  // The exchanges of a run, first_exchange() .. last_exchange(): exchange 0 brings the
  // anchors' W1 rows (sharded W1 only), N + 1 the last step's normaliser (sampling only).
  int32_t first_exchange() const { return sharded_w1 ? 0 : 1; }
  int32_t last_exchange(bool sampling) const { return N + (sampling ? 1 : 0); }
};

// A run whose chosen draft id maps through d2t outside W1 (d2t changed after plan creation):
// the same status and message on every rank and backend (step k of block b).
inline Status bad_d2t_entry(int32_t draft_id, int32_t target_id, int32_t block, int32_t step, int64_t n_target_vocab) {
  return fail(DFSEL_INVALID_ARGUMENT,
              "d2t maps draft id %d (block %d, step %d) to %d, outside [0, config.n_target_vocab = %lld); d2t is checked "
              "at plan creation and must not change while the plan lives",
              draft_id, block, step, target_id, (long long)n_target_vocab);
}

// Block b's records of a group's first exchange (recv: n ranks' records) say the ranks were
// given different inputs (dspark_inputs_agree): the same status and message on every rank and
// backend, naming the first rank that differs from rank 0.
inline Status ranks_given_different_inputs(const DSparkLayout& lay, const uint8_t* recv, int n, int32_t b) {
  int rank = 0;
  if (dspark_inputs_agree(lay, recv, n, b, &rank)) return Status::success();
  const DSparkRecord& a = *dspark_record(lay, (void*)recv, b);
  const DSparkRecord& o = *dspark_record(lay, (void*)(recv + (size_t)rank * lay.bytes), b);
  if (a.anchor != o.anchor)
    return fail(DFSEL_INVALID_ARGUMENT, "the ranks of this chain were given different inputs: inputs.anchors[%d] is %d on rank 0"
                " and %d on rank %d; every rank must get the same anchors", b, a.anchor, o.anchor, rank);
  return fail(DFSEL_INVALID_ARGUMENT, "the ranks of this chain were given different inputs for block %d: rank %d's inputs.hidden"
              " rows, temperature, p_min, seed, n_blocks or conf_w differ from rank 0's; every rank must get the same", b, rank);
}

class DSparkBackend {
 public:
  virtual ~DSparkBackend() = default;
  virtual dfsel_backend kind() const = 0;
  virtual Endpoint endpoint() = 0;
  // Checks what only a run can see (anchor ids) and sets up the chain of every block; `sharers`
  // plans of the call (this one among them) run on this plan's device.
  virtual Status begin(const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out, void* stream, int sharers) = 0;
  virtual Status send(int32_t exchange, void* stream) = 0;
  virtual Status receive(int32_t exchange, void* stream) = 0;
  virtual Status query(void* stream, bool* done) = 0;
  virtual Status wait(void* stream) = 0;
  virtual Status report() = 0;
};

Status make_cpu_dspark_backend(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape,
                               std::unique_ptr<DSparkBackend>* out);
// SIZE_MAX when the workspace does not fit in the address space (creation refuses it).
size_t cpu_dspark_workspace_bytes(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape);
// The CUDA backend (host/backend/cuda_dspark.cu; DFSEL_UNSUPPORTED in builds without CUDA).
// Every pointer of the description is device memory on desc.device.
Status make_cuda_dspark_backend(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape,
                                std::unique_ptr<DSparkBackend>* out);
Status cuda_dspark_workspace_bytes(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape, size_t* bytes);

}  // namespace dfsel
