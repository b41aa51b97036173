// The kernels after the top-K, alone, at the SelectorStep shape (V = 248320, R = 256, K = 16,
// block 16, n_embd 5120, BF16 W_h and codebooks, F32 hidden), CUDA-graph replayed:
//   Gate          g = W_h . h for every drafted row (bytes: W_h + hidden rows)
//   ScoreLattice  merge + K x K lattice + walk from S ranks' records (bytes: the merged
//                 candidates' codebook rows); replicated or sharded, greedy or sampling
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_data.cuh"
#include "bench_util.cuh"
#include "kernels/gate.cuh"
#include "kernels/pack_records.cuh"
#include "kernels/score_lattice.cuh"
#include "tests/support/case_lists.h"

namespace dfsel::bench {
namespace {

constexpr int kR = 256, kK = 16, kBlock = 16, kL = kBlock - 1;
constexpr int64_t kEmbd = 5120, kVocab = 248320;
// A ScoreLattice iteration replays up to 512 calls (one per copy) but reports one call's time,
// so the iteration count is fixed: Google Benchmark would otherwise run min_time / (one call)
// iterations, 512 times longer than min_time.
constexpr int kLatticeReplays = 20;

// W_h and the hidden rows rotate through enough copies that each call reads them from HBM, as
// in a decode step, where the draft's forward pass between two gates evicts them from L2.
void gate_bench(benchmark::State& state, int blocks, int tile, int split) {
  const int rows = blocks * kL, n_tokens = blocks * kBlock;
  const size_t w_bytes = (size_t)kR * kEmbd * 2, h_bytes = (size_t)n_tokens * kEmbd * 4;
  const int copies = rotation_copies(w_bytes + h_bytes);
  DeviceMem w, h, g;
  if (!cuda_ok(state, w.alloc(w_bytes * copies), "cudaMalloc") ||
      !cuda_ok(state, h.alloc(h_bytes * copies), "cudaMalloc") ||
      !cuda_ok(state, g.alloc((size_t)rows * kR * 4), "cudaMalloc"))
    return;
  fill_hashed(w.get(), DFSEL_TYPE_BF16, (size_t)kR * kEmbd * copies, 0.02f, 1);
  fill_hashed(h.get(), DFSEL_TYPE_F32, (size_t)n_tokens * kEmbd * copies, 1.0f, 2);
  cuda::GateArgs a{};
  a.w_type = DFSEL_TYPE_BF16;
  a.w_row_stride = (size_t)kEmbd * 2;
  a.h_type = DFSEL_TYPE_F32;
  a.h_row_stride = (size_t)kEmbd * 4;
  a.n_embd = kEmbd;
  a.R = kR;
  a.map = RowMap{kL, kBlock, 1};
  a.n_rows = rows;
  a.g = g.as<float>();
  a.w_h = w.get();
  a.hidden = h.get();
  cuda::GateDevice dev{};
  if (!cuda_ok(state, cuda::gate_device(0, &dev), "gate_device")) return;
  dev.force_tile = tile;
  dev.force_split = split;
  const cuda::GateShape shape = cuda::gate_shape(a, dev);  // rows are 16-byte aligned in every copy
  state.counters["tile"] = shape.tile;
  state.counters["cluster"] = shape.split;
  state.counters["ctas"] = (double)shape.ctas;
  state.counters["copies"] = copies;
  time_graph(state, copies, (double)w_bytes + (double)rows * kEmbd * 4, [&](int c, cudaStream_t st) {
    a.w_h = w.as<uint8_t>() + w_bytes * c;
    a.hidden = h.as<uint8_t>() + h_bytes * c;
    return cuda::gate(a, dev, st);
  });
}

// One ScoreLattice case: S simulated ranks, replicated or sharded records, greedy or sampling.
struct LatticeCase {
  int blocks, ranks;
  bool sharded;
  float temperature, p_min;
  int max_cluster;  // lattice_launch's; 0: the largest the device holds
  bool hot;         // one copy replayed: rows and records stay in L2 (the old measurement)
  bool unchecked;   // several ranks: records without the agree section a group's plans send
                    // (the lattice then compares nothing), to measure what the comparison costs
  bool general;     // the general kernel where the fast instance would run (an A/B in one run)
};

// Every call reads the records (and anchors) of the next of enough copies that their codebook
// rows, random rows of two 127 MB tables, come from HBM as in a decode step; g, written by the
// gate just before, is one copy. Rank r's candidates are K distinct ids of its vocabulary range,
// their logits interleaved with the other ranks' so that the merge has work to do. Sharded
// records carry the rows, copied into them by pack_records at set-up.
void lattice_bench(benchmark::State& state, LatticeCase lc) {
  const int rows = lc.blocks * kL, S = lc.ranks;
  const size_t row_b = (size_t)kR * 2;
  // A group's records as its plans send them: with the agree section (equal on every rank, as
  // the zeroed records leave it), unless unchecked.
  const ExchangeLayout l = make_exchange_layout(kK, lc.blocks, kBlock, lc.sharded, row_b, S > 1 && !lc.unchecked);
  const double rows_read = (double)rows * kK * 2 * row_b;  // the merged candidates' rows
  const size_t touched = (size_t)rows_read + (size_t)S * l.bytes;
  const int copies = lc.hot ? 1 : (int)std::min<size_t>((2 * kL2Bytes + touched - 1) / touched, 512);
  DeviceMem recv, ep, en, g, an, lattice, choices, err, path, n_emitted, q;
  if (!cuda_ok(state, recv.alloc(l.bytes * S * copies), "cudaMalloc") ||
      !cuda_ok(state, ep.alloc((size_t)kVocab * row_b), "cudaMalloc") ||
      !cuda_ok(state, en.alloc((size_t)kVocab * row_b), "cudaMalloc") ||
      !cuda_ok(state, g.alloc((size_t)rows * kR * 4), "cudaMalloc") ||
      !cuda_ok(state, an.alloc((size_t)lc.blocks * 4 * copies), "cudaMalloc") ||
      !cuda_ok(state, lattice.alloc((size_t)rows * kK * kK * 4), "cudaMalloc") ||
      !cuda_ok(state, choices.alloc((size_t)rows * kK * sizeof(int2)), "cudaMalloc") ||
      !cuda_ok(state, err.alloc(8), "cudaMalloc") || !cuda_ok(state, path.alloc((size_t)rows * 4), "cudaMalloc") ||
      !cuda_ok(state, n_emitted.alloc((size_t)lc.blocks * 4), "cudaMalloc") ||
      !cuda_ok(state, q.alloc((size_t)rows * kK * 4), "cudaMalloc"))
    return;
  cudaMemset(recv.get(), 0, l.bytes * S * copies);
  cudaMemset(err.get(), 0, 8);
  fill_hashed(ep.get(), DFSEL_TYPE_BF16, (size_t)kVocab * kR, 0.1f, 3);
  fill_hashed(en.get(), DFSEL_TYPE_BF16, (size_t)kVocab * kR, 0.1f, 4);
  fill_hashed(g.get(), DFSEL_TYPE_F32, (size_t)rows * kR, 1.0f, 5);
  std::mt19937_64 rng(7);
  std::vector<int32_t> anchors((size_t)lc.blocks * copies);
  for (auto& x : anchors) x = (int32_t)(rng() % kVocab);
  cudaMemcpy(an.get(), anchors.data(), anchors.size() * 4, cudaMemcpyHostToDevice);
  std::vector<uint8_t> send(l.rows_off);
  for (int c = 0; c < copies; ++c)
    for (int r = 0; r < S; ++r) {
      const int64_t vb = kVocab * r / S, ve = kVocab * (r + 1) / S;
      CandRec* cands = reinterpret_cast<CandRec*>(send.data());
      for (int d = 0; d < rows; ++d) {
        std::vector<int32_t> ids;
        while ((int)ids.size() < kK) {
          const int32_t id = (int32_t)(vb + (int64_t)(rng() % (uint64_t)(ve - vb)));
          if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
        }
        for (int j = 0; j < kK; ++j) cands[(size_t)d * kK + j] = CandRec{10.0f - (j * S + r) * 0.25f, ids[j]};
      }
      uint8_t* dst = recv.as<uint8_t>() + ((size_t)c * S + r) * l.bytes;
      cudaMemcpy(dst, send.data(), send.size(), cudaMemcpyHostToDevice);
      if (!lc.sharded) continue;
      cuda::PackRecordsArgs p{dst, l, ep.as<uint8_t>() + vb * row_b, en.as<uint8_t>() + vb * row_b, row_b, row_b,
                              vb, ve, an.as<int32_t>() + (size_t)c * lc.blocks};
      if (!cuda_ok(state, cuda::pack_records(p, nullptr), "pack_records")) return;
    }
  if (!cuda_ok(state, cudaDeviceSynchronize(), "set-up")) return;
  cuda::LatticeArgs a{};
  a.rows = RowSource{recv.as<uint8_t>(), l, S, ep.as<uint8_t>(), en.as<uint8_t>(), row_b, kVocab};
  a.k = kK;
  a.R = kR;
  a.block_size = kBlock;
  a.n_blocks = lc.blocks;
  a.transform = Transform{1.0f, 0.0f};
  a.cb_type = DFSEL_TYPE_BF16;
  a.anchors = an.as<int32_t>();
  a.g = g.as<float>();
  a.walk = WalkParams{lc.temperature, lc.p_min, 11};
  a.q = lc.temperature > 0.0f ? q.as<float>() : nullptr;
  a.path = path.as<int32_t>();
  a.n_emitted = n_emitted.as<int32_t>();
  a.n_embd = kEmbd;
  a.lattice = lattice.as<float>();
  a.choices = choices.as<int2>();
  a.error = err.as<int32_t>();
  cuda::LatticeLaunch launch{};
  if (!cuda_ok(state, cuda::lattice_launch(a, 0, &launch, lc.max_cluster), "lattice_launch")) return;
  if (lc.general) launch.fast = 0;
  state.counters["fast"] = launch.fast;
  state.counters["resident"] = launch.resident[launch.fast ? 1 : 0];
  state.counters["copies"] = copies;
  state.counters["cluster"] = launch.cluster;
  state.counters["spec"] = launch.smem.spec;
  time_graph(state, copies, rows_read, [&](int c, cudaStream_t st) {
    a.rows.recv = recv.as<uint8_t>() + (size_t)c * S * l.bytes;
    a.anchors = an.as<int32_t>() + (size_t)c * lc.blocks;
    return cuda::score_lattice(a, launch, st);
  });
}

const bool registered = [] {
  // The block counts and lattice variants the lattice test also checks (tests/support/case_lists.h).
  for (int blocks : cases::kGateBlocks) {
    const std::string shape = "/tokens:" + std::to_string(blocks * kBlock) + "/vocab:248320/k:16/bf16";
    benchmark::RegisterBenchmark(("Gate" + shape).c_str(), gate_bench, blocks, -1, 0)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    // Each lattice case twice: as plans run it, and with the general kernel ("/general").
    for (bool general : {false, true}) {
      const std::string kernel = general ? "/general" : "";
      if (blocks <= cases::kLatticeMaxBlocks)
        benchmark::RegisterBenchmark(("ScoreLattice" + shape + kernel).c_str(), lattice_bench,
                                     LatticeCase{blocks, 1, false, 0, 0, 0, false, false, general})
            ->UseManualTime()->Iterations(kLatticeReplays)->Unit(benchmark::kMicrosecond);
      if (blocks != 1) continue;
      for (const cases::LatticeVariant& v : cases::kLatticeOneBlockVariants)
        for (bool unchecked : {false, true}) {
          if (unchecked && v.ranks == 1) continue;
          benchmark::RegisterBenchmark(
              ("ScoreLattice" + shape + v.suffix + (unchecked ? "/unchecked" : "") + kernel).c_str(), lattice_bench,
              LatticeCase{blocks, v.ranks, v.sharded, v.temperature, v.p_min, v.max_cluster, false, unchecked, general})
              ->UseManualTime()->Iterations(kLatticeReplays)->Unit(benchmark::kMicrosecond);
        }
      benchmark::RegisterBenchmark(("ScoreLattice" + shape + "/hot" + kernel).c_str(), lattice_bench,
                                   LatticeCase{blocks, 1, false, 0, 0, 0, true, false, general})
          ->UseManualTime()->Iterations(200)->Unit(benchmark::kMicrosecond);
    }
    // The sweep the gate's tile choice and n_embd split are tuned on (cluster sizes over 8 are
    // non-portable; the split is clamped to the tile's n_embd stages).
    for (int tile = 0; tile < cuda::kGateTiles; ++tile)
      for (int split : {1, 2, 4, 8, 16})
        benchmark::RegisterBenchmark(("GateTiles" + shape + "/tile:" + cuda::gate_tile_name(tile) +
                                      "/split:" + std::to_string(split)).c_str(),
                                     gate_bench, blocks, tile, split)
            ->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
