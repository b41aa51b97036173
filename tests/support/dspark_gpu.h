// DSpark problems (dspark_problem.h) on the CUDA backend: every weight, input, output and
// workspace copied to device memory, the ranks' plans made there, one chain run through
// dfsel_dspark_run_group and waited for with dfsel_dspark_plan_wait. Built into
// dfsel_gpu_tests only (it calls the CUDA runtime).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "dspark_problem.h"

namespace dfsel::test {

struct DSparkCudaOpts {
  int device = 0;
  bool caller_workspace = false;  // each plan gets a workspace carved from one device buffer
  size_t workspace_offset = 0;    // bytes into that buffer (a multiple of 256)
  bool stream_per_rank = false;   // false: every rank on one stream
  cudaStream_t stream = nullptr;  // that one stream when set (the caller's; not destroyed here)
  // Ranks that disagree: rank other_rank reads other_data's logits, hidden rows and anchors,
  // and its plan other_data's conf_w (the other weights are d's on every rank).
  int other_rank = -1;
  const DSparkData* other_data = nullptr;
};

// One problem's ranks on the device: weights and inputs uploaded once, plans made once, the
// chain enqueued, waited for and read back as often as a test asks. Any step that fails
// leaves status/error set, and the later steps do nothing.
class DSparkCudaSession {
 public:
  DSparkCudaSession(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, const DSparkCudaOpts& o = {});
  ~DSparkCudaSession();
  DSparkCudaSession(const DSparkCudaSession&) = delete;
  DSparkCudaSession& operator=(const DSparkCudaSession&) = delete;

  bool ok() const { return status == DFSEL_SUCCESS; }
  // New logits, hidden rows and anchors of a problem of the same case, written into the same
  // device buffers (so that a captured graph reads them); d2t too, which the plans read in
  // place (a d2t changed after creation, which a run must catch).
  void upload_inputs(const DSparkData& d);
  // Every output buffer filled with 0xff bytes (-1 ids, NaN floats).
  void poison_outputs();
  // dfsel_dspark_run_group on the session's streams (streams[s] for rank s); nothing waited for.
  // n_blocks (0: the case's) runs the first blocks alone: their anchors, and their logits and
  // hidden rows, a prefix of the case's, into the first blocks of the same outputs.
  dfsel_status enqueue(int n_blocks = 0);
  // dfsel_dspark_plan_wait of every rank; the first failure's status and message are kept.
  dfsel_status wait();
  // Every rank's outputs copied back; ranks that differ from rank 0 make an INTERNAL_ERROR.
  DSparkResult download() const;
  // poison_outputs, enqueue(n_blocks), wait, download: one run, its result carrying the
  // status and message of the first step that failed.
  DSparkResult run_once(int n_blocks = 0);

  int ranks() const { return (int)plans.size(); }
  size_t workspace_bytes(int s) const { return ws_bytes[s]; }

  dfsel_status status = DFSEL_SUCCESS;
  std::string error;
  std::vector<dfsel_dspark_plan*> plans;
  std::vector<cudaStream_t> streams;  // one per rank (the same stream repeated by default)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<size_t> ws_bytes;
};

// Whether a CUDA plan of c computes W2[v] . e on tensor cores (BF16 mma.sync, F32 sums) rather
// than in the eight chains, as plan creation decides from DFSEL_DSPARK_PRODUCT: never for
// "chains"; otherwise (unset, empty, "auto", "mma", "mma-steps") where W2 as the device holds
// it is BF16 (a BF16 W2, or a Q4_K or Q6_K one, which creation widens to BF16) and R is a
// multiple of 32 up to 256: on one rank as one launch for the whole chain, on several ranks (or
// with "mma-steps") a launch a step.
// Its results are not bitwise the CPU backend's (the sums round differently), but they are
// bitwise the same for every shard count, placement, stream, batching, replay and workspace.
bool dspark_cuda_uses_mma(const DSparkCase& c);

// Poison, enqueue, wait, download: one chain of every rank on the CUDA backend, as run_dspark
// runs it on the CPU backend.
DSparkResult run_dspark_cuda(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r,
                             const DSparkCudaOpts& o = {});

}  // namespace dfsel::test
