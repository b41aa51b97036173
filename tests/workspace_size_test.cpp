// dfsel_workspace_size answers a size that plan creation takes: for every codebook and W_h
// type, both placements and one to three ranks of an in-process group, plans given workspaces
// of exactly the size answered are created and run, bitwise as plans that own their workspace.
// Before, a sharded K-quant codebook on several ranks was sized by its quantised rows while
// creation widens them to BF16 and exchanges those: creation refused the size answered (70,720
// bytes answered, 181,120 asked for one Q4_K case).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/common/numeric.cuh"
#include "support/gguf_writer.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

// Each rank's workspace of exactly the size dfsel_workspace_size answers for its description,
// set by RunOpts::edit_desc (a plain function: its state lives here for one run_case).
struct ExactWorkspaces {
  std::vector<std::vector<uint64_t>> buffers;  // operator new's 16-byte alignment, as the CPU needs
  std::string error;
};
ExactWorkspaces* g_exact = nullptr;

void give_exact_workspace(int shard, dfsel_plan_desc* desc) {
  size_t bytes = 0;
  char msg[512] = "";
  if (dfsel_workspace_size(desc, &bytes, msg, sizeof msg) != DFSEL_SUCCESS) {
    g_exact->error = "rank " + std::to_string(shard) + ": " + msg;
    return;
  }
  std::vector<uint64_t>& ws = g_exact->buffers[(size_t)shard];
  ws.assign(bytes / 8 + 1, 0);
  desc->workspace = ws.data();
  desc->workspace_bytes = bytes;
}

// rows x cols F32 weights as type t, row by row.
std::vector<uint8_t> quantized(dfsel_type t, const std::vector<uint8_t>& f32, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    const auto q = quantize(t, reinterpret_cast<const float*>(f32.data()) + r * cols, cols);
    out.insert(out.end(), q.begin(), q.end());
  }
  return out;
}

// The data of c, whose codebooks and W_h are of type c.cb_t (block types quantised from F32).
Data data_of(const Case& c, uint64_t seed) {
  if (!is_widened_type(c.cb_t)) return make_data(c, seed);
  Case f = c;
  f.cb_t = f.wh_t = DFSEL_TYPE_F32;
  Data d = make_data(f, seed);
  d.e_prev = quantized(c.cb_t, d.e_prev, c.V, c.R);
  d.e_next = quantized(c.cb_t, d.e_next, c.V, c.R);
  d.w_h = quantized(c.cb_t, d.w_h, c.R, c.E);
  return d;
}

TEST(WorkspaceSize, TheSizeAnsweredIsTakenForEveryTypePlacementAndRankCount) {
  const dfsel_type types[] = {DFSEL_TYPE_F32,  DFSEL_TYPE_F16,  DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0, DFSEL_TYPE_Q4_0,
                              DFSEL_TYPE_Q4_1, DFSEL_TYPE_Q5_0, DFSEL_TYPE_Q5_1, DFSEL_TYPE_Q2_K, DFSEL_TYPE_Q3_K,
                              DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q5_K, DFSEL_TYPE_Q6_K};
  for (dfsel_type t : types) {
    Case c;
    c.V = 600;
    c.R = c.E = 256;  // rows are whole blocks of every type (32 or 256)
    c.K = 8;
    c.block = 4;
    c.cb_t = c.wh_t = t;
    const Data d = data_of(c, 17);
    for (dfsel_placement placement : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
      for (int ranks = 1; ranks <= 3; ++ranks) {
        SCOPED_TRACE(std::string(dfsel_type_name(t)) + (placement == DFSEL_CODEBOOKS_SHARDED ? " sharded, " : " replicated, ") +
                     std::to_string(ranks) + " ranks");
        RunOpts r;
        r.placement = placement;
        for (int s = 0; s <= ranks; ++s) r.bounds.push_back(c.V * s / ranks);
        const Result owned = run_case(c, d, r);
        ASSERT_EQ(owned.status, DFSEL_SUCCESS) << owned.error;
        ExactWorkspaces exact;
        exact.buffers.resize((size_t)ranks);
        g_exact = &exact;
        r.edit_desc = give_exact_workspace;
        const Result given = run_case(c, d, r);
        g_exact = nullptr;
        ASSERT_EQ(exact.error, "");
        ASSERT_EQ(given.status, DFSEL_SUCCESS) << given.error;
        EXPECT_EQ(bitwise_diff(owned, given), "");
      }
    }
  }
}

}  // namespace
}  // namespace dfsel::test
