// Whole selector steps through the public API, CUDA-graph replayed (SPEC sections 4 and 7):
//   SelectorStep     one GPU, one shard: top-K + gate, lattice + walk
//   SimulatedShards  S shards on one GPU with the in-process exchange (record size, merge cost)
//   DistributedStep  S GPUs, one NCCL all-gather of the candidate records
//   ExchangeFloor    the step's all-gather alone (NCCL), for the records of one step
//   LsaExchangeFloor the same exchange written by a kernel through NCCL's device API: stores
//                    into every peer's symmetric window, one LSA barrier, a local copy-out
//   FullLogitGather  the peer engines use today: all-gather the logits, then a top-K of the
//                    whole rows on every GPU (dfsel's shard_topk, or CUB's segmented sort)
// V = 248320, R = 256, K = 16, block 16, n_embd 5120, F32 logits (bf16 in the names that say
// so) and hidden, BF16 codebooks and W_h, greedy; the outputs path and n_emitted only, or
// (/all_outputs) every output a greedy step writes: cand_ids, unary, scores and the packed rows
// too (q is written only when sampling). bytes = logits rows read + W_h + hidden rows + codebook
// rows gathered (+ the outputs written). StepTimeline (step_timeline.cu) traces the same step
// kernel by kernel. The PyTorch selector is timed beside the step, with the same inputs, by
// bench/python/bench_step.py, which reports the ratio; nothing here holds a peer's figure.
#include <cub/device/device_segmented_radix_sort.cuh>

#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#if defined(DFSEL_WITH_NCCL)
#include <nccl.h>
#if __has_include(<nccl_device.h>) && NCCL_VERSION_CODE >= 22800
#include <nccl_device.h>
#define DFSEL_BENCH_LSA 1  // NCCL's device API: symmetric windows, LSA pointers and barriers
#endif
#endif

#include "bench_data.cuh"
#include "bench_util.cuh"
#include "kernels/shard_topk.cuh"
#include "step_setup.cuh"
#include "tests/support/case_lists.h"

namespace dfsel::bench {
namespace {

size_t record_bytes(const StepShape& s) {
  const int64_t rows = s.rows();
  size_t b = (size_t)rows * kK * 8;
  if (s.placement == DFSEL_CODEBOOKS_SHARDED) b += (size_t)rows * kK * 2 * kR * 2 + (size_t)s.blocks * (16 + kR * 2);
  return b;
}

void selector_step(benchmark::State& state, StepShape s) {
  const int copies = rotation_copies((size_t)s.blocks * s.block * s.vocab * elem_bytes(s.logits));
  Rank r;
  if (!setup_rank(state, s, 0, 0, copies, nullptr, &r)) return;
  time_graph(state, copies, s.bytes(), [&](int c, cudaStream_t st) {
    return dfsel_plan_run(r.plan, &r.in[c], &r.out, st) == DFSEL_SUCCESS ? cudaSuccess : cudaErrorUnknown;
  });
  state.counters["workspace_bytes"] = (double)r.workspace;
}

// S shards driven by one thread on one GPU: S top-K launches, S*S record copies, S lattices.
void simulated_shards(benchmark::State& state, StepShape s) {
  const int copies = rotation_copies((size_t)s.blocks * s.block * s.vocab * 4);
  SimulatedGroup g;
  if (!g.setup(state, s, copies)) return;
  time_graph(state, copies, s.bytes(),
             [&](int c, cudaStream_t st) { return g.enqueue(c, st) ? cudaSuccess : cudaErrorUnknown; });
  state.counters["record_bytes"] = (double)record_bytes(s);
}

#if defined(DFSEL_WITH_NCCL)
// Captures, on every GPU at once, `calls` steps (input copy c = call % copies) into one graph
// per GPU; each iteration replays them all and reports the slowest GPU's time per call.
void time_multi_gpu(benchmark::State& state, int n, int copies, double bytes,
                    const std::function<bool(int copy, std::vector<cudaStream_t>&)>& enqueue,
                    std::vector<cudaStream_t>& streams) {
  const int calls = copies * ((kMinGraphCalls + copies - 1) / copies);
  std::vector<cudaGraph_t> graphs(n, nullptr);
  std::vector<cudaGraphExec_t> execs(n, nullptr);
  std::vector<cudaEvent_t> start(n), stop(n);
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    cudaEventCreate(&start[i]);
    cudaEventCreate(&stop[i]);
    if (!cuda_ok(state, cudaStreamBeginCapture(streams[i], cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture")) return;
  }
  bool ok = true;
  for (int c = 0; c < calls && ok; ++c) ok = enqueue(c % copies, streams);
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    const cudaError_t e = cudaStreamEndCapture(streams[i], &graphs[i]);
    ok = ok && cuda_ok(state, e, "cudaStreamEndCapture") &&
         cuda_ok(state, cudaGraphInstantiate(&execs[i], graphs[i], 0), "cudaGraphInstantiate");
  }
  if (!ok) {
    if (!state.error_occurred()) state.SkipWithError("enqueue failed");
    return;
  }
  auto replay = [&]() {
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(i);
      cudaEventRecord(start[i], streams[i]);
      for (int q = 0; q < replays_per_timing(); ++q) cudaGraphLaunch(execs[i], streams[i]);
      cudaEventRecord(stop[i], streams[i]);
    }
    double worst = 0.0;
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(i);
      if (cudaEventSynchronize(stop[i]) != cudaSuccess) return -1.0;
      float ms = 0.0f;
      cudaEventElapsedTime(&ms, start[i], stop[i]);
      worst = std::max(worst, (double)ms);
    }
    return worst * 1e-3 / ((double)calls * replays_per_timing());
  };
  if (replay() < 0) {
    state.SkipWithError("warm-up replay failed");
    return;
  }
  double total = 0.0;
  int64_t k = 0;
  for (auto _ : state) {
    const double t = replay();
    if (t < 0) {
      state.SkipWithError("replay failed");
      break;
    }
    state.SetIterationTime(t);
    total += t;
    ++k;
  }
  if (k > 0) report_bytes(state, bytes, total / k);
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    cudaGraphExecDestroy(execs[i]);
    cudaGraphDestroy(graphs[i]);
    cudaEventDestroy(start[i]);
    cudaEventDestroy(stop[i]);
  }
}

struct Comms {
  std::vector<ncclComm_t> comms;
  ~Comms() {
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
};

bool make_comms(benchmark::State& state, int n, Comms* c) {
  int have = 0;
  cudaGetDeviceCount(&have);
  if (have < n) {
    state.SkipWithError(("needs " + std::to_string(n) + " GPUs, found " + std::to_string(have)).c_str());
    return false;
  }
  c->comms.resize(n);
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  if (ncclCommInitAll(c->comms.data(), n, devs.data()) != ncclSuccess) {
    state.SkipWithError("ncclCommInitAll failed");
    return false;
  }
  return true;
}

void distributed_step(benchmark::State& state, StepShape s) {
  Comms comms;
  if (!make_comms(state, s.ranks, &comms)) return;
  const int copies = rotation_copies((size_t)s.blocks * s.block * (s.vocab / s.ranks) * 4);
  std::vector<std::unique_ptr<Rank>> ranks(s.ranks);
  // Plans of one communicator are created together: their set-up is a collective.
  std::vector<std::thread> threads;
  std::vector<int> ok(s.ranks, 0);
  for (int i = 0; i < s.ranks; ++i) {
    ranks[i].reset(new Rank());
    threads.emplace_back([&, i] { ok[i] = setup_rank(state, s, i, i, copies, comms.comms[i], ranks[i].get()); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < s.ranks; ++i)
    if (!ok[i]) return;
  std::vector<dfsel_plan*> plans;
  std::vector<cudaStream_t> streams;
  for (auto& r : ranks) {
    plans.push_back(r->plan);
    streams.push_back(r->stream);
  }
  std::vector<dfsel_inputs> in(s.ranks);
  std::vector<dfsel_outputs> out(s.ranks);
  time_multi_gpu(state, s.ranks, copies, s.bytes() / s.ranks, [&](int c, std::vector<cudaStream_t>& st) {
    std::vector<void*> vs(st.begin(), st.end());
    for (int i = 0; i < s.ranks; ++i) {
      in[i] = ranks[i]->in[c];
      out[i] = ranks[i]->out;
    }
    return dfsel_run_group(s.ranks, plans.data(), in.data(), out.data(), vs.data()) == DFSEL_SUCCESS;
  }, streams);
  state.counters["record_bytes"] = (double)record_bytes(s);
  state.counters["workspace_bytes"] = (double)ranks[0]->workspace;
  state.counters["cb_bytes_per_gpu"] =
      (double)(s.placement == DFSEL_CODEBOOKS_SHARDED ? s.vocab / s.ranks : s.vocab) * kR * 2 * 2;
}

// The step's exchange alone: one NCCL all-gather of a step's record bytes per rank, in a graph
// on every rank. It is the part of DistributedStep that the device-side exchange could shorten.
void exchange_floor(benchmark::State& state, StepShape s) {
  Comms comms;
  if (!make_comms(state, s.ranks, &comms)) return;
  const size_t bytes = record_bytes(s);
  std::vector<DeviceMem> send(s.ranks), recv(s.ranks);
  std::vector<cudaStream_t> streams(s.ranks);
  for (int i = 0; i < s.ranks; ++i) {
    cudaSetDevice(i);
    if (!cuda_ok(state, cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), "cudaStreamCreate") ||
        !cuda_ok(state, send[i].alloc(bytes, i), "cudaMalloc") ||
        !cuda_ok(state, recv[i].alloc(bytes * s.ranks, i), "cudaMalloc") ||
        !cuda_ok(state, cudaMemset(send[i].get(), i + 1, bytes), "cudaMemset"))
      return;
  }
  time_multi_gpu(state, s.ranks, 1, (double)bytes * s.ranks, [&](int, std::vector<cudaStream_t>& st) {
    ncclGroupStart();
    for (int i = 0; i < s.ranks; ++i)
      ncclAllGather(send[i].get(), recv[i].get(), bytes, ncclUint8, comms.comms[i], st[i]);
    return ncclGroupEnd() == ncclSuccess;
  }, streams);
  state.counters["record_bytes"] = (double)bytes;
  for (int i = 0; i < s.ranks; ++i) {
    cudaSetDevice(i);
    cudaStreamDestroy(streams[i]);
  }
}

#if defined(DFSEL_BENCH_LSA)
// The records exchanged by a kernel instead of ncclAllGather. Each CTA owns a slice of the
// rank's records: it stores the slice into every rank's window (its own included) at this
// rank's slot, passes an LSA barrier (release its stores, acquire the peers'), then copies
// the gathered slices out to the receive buffer. Windows are double-buffered by a per-CTA
// step parity: a rank can reach a slot again only after passing the next step's barrier,
// which every peer enters only after its copy-out of the previous step.
__global__ void __launch_bounds__(256) lsa_all_gather_kernel(ncclDevComm dc, ncclWindow_t win, const uint4* send,
                                                             size_t vecs, uint4* recv, unsigned* parity) {
  const int n = dc.lsaSize, me = dc.lsaRank;
  const size_t per = (vecs + gridDim.x - 1) / gridDim.x;
  const size_t v0 = blockIdx.x * per, v1 = min(vecs, v0 + per);
  const unsigned par = parity[blockIdx.x] & 1u;
  const size_t slot = (size_t)par * n * vecs;  // in 16-byte vectors
  for (int p = 0; p < n; ++p) {
    uint4* dst = static_cast<uint4*>(ncclGetLsaPointer(win, (slot + (size_t)me * vecs) * 16, p));
    for (size_t v = v0 + threadIdx.x; v < v1; v += blockDim.x) dst[v] = __ldg(send + v);
  }
  {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), blockIdx.x);
    bar.sync(ncclCoopCta(), ::cuda::memory_order_acq_rel);
  }
  const uint4* got = static_cast<const uint4*>(ncclGetLocalPointer(win, slot * 16));
  for (int r = 0; r < n; ++r)
    for (size_t v = v0 + threadIdx.x; v < v1; v += blockDim.x) recv[r * vecs + v] = __ldcv(got + r * vecs + v);
  if (threadIdx.x == 0) parity[blockIdx.x] = par + 1u;
}

struct LsaRank {
  void* window_mem = nullptr;
  ncclWindow_t win = nullptr;
  ncclDevComm dc{};
  bool dc_made = false;
  DeviceMem send, recv, parity;
  cudaStream_t stream = nullptr;
};

void lsa_exchange_floor(benchmark::State& state, StepShape s) {
  Comms comms;
  if (!make_comms(state, s.ranks, &comms)) return;
  const size_t bytes = record_bytes(s);
  const size_t vecs = (bytes + 15) / 16;
  const int ctas = (int)std::min<size_t>(32, std::max<size_t>(1, vecs * 16 / 8192));
  const size_t win_bytes = ((2 * s.ranks * vecs * 16) + 4095) & ~(size_t)4095;
  std::vector<LsaRank> r(s.ranks);
  std::vector<std::string> err(s.ranks);
  std::vector<std::thread> threads;
  for (int i = 0; i < s.ranks; ++i)
    threads.emplace_back([&, i] {  // window registration and device-comm creation are collective
      cudaSetDevice(i);
      ncclDevCommRequirements reqs;
      std::memset(&reqs, 0, sizeof reqs);
      reqs.lsaBarrierCount = ctas;
      if (ncclMemAlloc(&r[i].window_mem, win_bytes) != ncclSuccess) err[i] = "ncclMemAlloc";
      else if (ncclCommWindowRegister(comms.comms[i], r[i].window_mem, win_bytes, &r[i].win, NCCL_WIN_COLL_SYMMETRIC) !=
               ncclSuccess)
        err[i] = "ncclCommWindowRegister";
      else if (ncclDevCommCreate(comms.comms[i], &reqs, &r[i].dc) != ncclSuccess) err[i] = "ncclDevCommCreate";
      else r[i].dc_made = true;
      if (err[i].empty() && r[i].dc.lsaSize != s.ranks) err[i] = "the ranks are not all in one LSA team";
      if (err[i].empty() && (r[i].send.alloc(vecs * 16, i) != cudaSuccess ||
                             r[i].recv.alloc(vecs * 16 * s.ranks, i) != cudaSuccess ||
                             r[i].parity.alloc(ctas * 4, i) != cudaSuccess))
        err[i] = "cudaMalloc";
      if (err[i].empty()) {
        cudaMemset(r[i].send.get(), i + 1, vecs * 16);
        cudaMemset(r[i].recv.get(), 0, vecs * 16 * s.ranks);
        cudaMemset(r[i].parity.get(), 0, ctas * 4);
        cudaStreamCreateWithFlags(&r[i].stream, cudaStreamNonBlocking);
        cudaDeviceSynchronize();
      }
    });
  for (auto& t : threads) t.join();
  threads.clear();
  std::string failed;
  for (int i = 0; i < s.ranks; ++i)
    if (!err[i].empty()) failed = "rank " + std::to_string(i) + ": " + err[i] + " failed";
  if (failed.empty()) {
    std::vector<cudaStream_t> streams;
    for (auto& x : r) streams.push_back(x.stream);
    time_multi_gpu(state, s.ranks, 1, (double)bytes * s.ranks, [&](int, std::vector<cudaStream_t>& st) {
      for (int i = 0; i < s.ranks; ++i) {
        cudaSetDevice(i);
        lsa_all_gather_kernel<<<ctas, 256, 0, st[i]>>>(r[i].dc, r[i].win, r[i].send.as<uint4>(), vecs, r[i].recv.as<uint4>(),
                                                       r[i].parity.as<unsigned>());
        if (cudaGetLastError() != cudaSuccess) return false;
      }
      return true;
    }, streams);
    // Every rank must hold every rank's records: rank q's bytes are all q + 1.
    for (int i = 0; i < s.ranks && !state.error_occurred(); ++i) {
      std::vector<uint8_t> got(vecs * 16 * s.ranks);
      cudaSetDevice(i);
      cudaMemcpy(got.data(), r[i].recv.get(), got.size(), cudaMemcpyDeviceToHost);
      for (size_t b = 0; b < got.size(); ++b)
        if (got[b] != (uint8_t)(b / (vecs * 16) + 1)) {
          state.SkipWithError(("rank " + std::to_string(i) + " received a wrong byte at " + std::to_string(b)).c_str());
          break;
        }
    }
    state.counters["record_bytes"] = (double)bytes;
    state.counters["ctas"] = ctas;
  } else {
    state.SkipWithError(failed.c_str());
  }
  for (int i = 0; i < s.ranks; ++i)
    threads.emplace_back([&, i] {
      cudaSetDevice(i);
      cudaDeviceSynchronize();
      if (r[i].dc_made) ncclDevCommDestroy(comms.comms[i], &r[i].dc);
      if (r[i].win) ncclCommWindowDeregister(comms.comms[i], r[i].win);
      if (r[i].window_mem) ncclMemFree(r[i].window_mem);
      if (r[i].stream) cudaStreamDestroy(r[i].stream);
    });
  for (auto& t : threads) t.join();
}
#endif

// The peer: every rank all-gathers its logits slice, rebuilds whole rows and selects on them.
void full_logit_gather(benchmark::State& state, StepShape s, bool cub) {
  Comms comms;
  if (!make_comms(state, s.ranks, &comms)) return;
  const int rows = s.rows();
  const int64_t vs = s.vocab / s.ranks, V = vs * s.ranks;
  struct Peer {
    DeviceMem slice, gathered, full, out, ids_in, keys_out, ids_out, offsets, temp, scratch;
    size_t temp_bytes = 0;
    cudaStream_t stream = nullptr;
  };
  std::vector<Peer> p(s.ranks);
  std::vector<cudaStream_t> streams(s.ranks);
  int sms = device_sms();
  for (int i = 0; i < s.ranks; ++i) {
    cudaSetDevice(i);
    cudaStreamCreateWithFlags(&p[i].stream, cudaStreamNonBlocking);
    streams[i] = p[i].stream;
    p[i].slice.alloc((size_t)rows * vs * 4, i);
    p[i].gathered.alloc((size_t)rows * V * 4, i);
    p[i].full.alloc((size_t)rows * V * 4, i);
    p[i].out.alloc((size_t)rows * kK * sizeof(CandRec), i);
    p[i].scratch.alloc(cuda::shard_topk_scratch_bytes(rows, kK, V, sms), i);
    cudaMemset(p[i].scratch.get(), 0, cuda::shard_topk_scratch_bytes(rows, kK, V, sms));
    fill_hashed(p[i].slice.get(), DFSEL_TYPE_F32, (size_t)rows * vs, 8.0f, 300 + i);
    if (cub) {
      p[i].ids_in.alloc((size_t)rows * V * 4, i);
      p[i].keys_out.alloc((size_t)rows * V * 4, i);
      p[i].ids_out.alloc((size_t)rows * V * 4, i);
      p[i].offsets.alloc((size_t)(rows + 1) * 4, i);
      std::vector<int32_t> off(rows + 1), ids((size_t)rows * V);
      for (int r = 0; r <= rows; ++r) off[r] = (int32_t)(r * V);
      for (size_t x = 0; x < ids.size(); ++x) ids[x] = (int32_t)(x % V);
      cudaMemcpy(p[i].offsets.get(), off.data(), off.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(p[i].ids_in.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice);
      cub::DeviceSegmentedRadixSort::SortPairsDescending(nullptr, p[i].temp_bytes, p[i].full.as<float>(),
                                                         p[i].keys_out.as<float>(), p[i].ids_in.as<int32_t>(),
                                                         p[i].ids_out.as<int32_t>(), (int)((size_t)rows * V), rows,
                                                         p[i].offsets.as<int32_t>(), p[i].offsets.as<int32_t>() + 1);
      p[i].temp.alloc(p[i].temp_bytes, i);
    }
    cudaDeviceSynchronize();
  }
  time_multi_gpu(state, s.ranks, 1, (double)rows * V * 4, [&](int, std::vector<cudaStream_t>&) {
    ncclGroupStart();
    for (int i = 0; i < s.ranks; ++i)
      ncclAllGather(p[i].slice.get(), p[i].gathered.get(), (size_t)rows * vs * 4, ncclUint8, comms.comms[i], p[i].stream);
    ncclGroupEnd();
    for (int i = 0; i < s.ranks; ++i) {
      cudaSetDevice(i);
      // [rank][row][vs] -> [row][V]
      for (int r = 0; r < s.ranks; ++r)
        cudaMemcpy2DAsync(p[i].full.as<float>() + r * vs, V * 4, p[i].gathered.as<float>() + (size_t)r * rows * vs, vs * 4,
                          vs * 4, rows, cudaMemcpyDeviceToDevice, p[i].stream);
      if (cub) {
        size_t tb = p[i].temp_bytes;
        cub::DeviceSegmentedRadixSort::SortPairsDescending(p[i].temp.get(), tb, p[i].full.as<float>(),
                                                           p[i].keys_out.as<float>(), p[i].ids_in.as<int32_t>(),
                                                           p[i].ids_out.as<int32_t>(), (int)((size_t)rows * V), rows,
                                                           p[i].offsets.as<int32_t>(), p[i].offsets.as<int32_t>() + 1,
                                                           0, 32, p[i].stream);
      } else {
        cuda::ShardTopKArgs a{};
        a.logits = p[i].full.get();
        a.type = DFSEL_TYPE_F32;
        a.n_cols = V;
        a.row_stride = (size_t)V * 4;
        a.map = RowMap{rows, rows, 0};
        a.n_rows = rows;
        a.k = kK;
        a.out = p[i].out.as<CandRec>();
        a.out_stride = kK;
        a.scratch = p[i].scratch.get();
        if (cuda::shard_topk(a, sms, p[i].stream) != cudaSuccess) return false;
      }
    }
    return true;
  }, streams);
  for (auto& x : p) cudaStreamDestroy(x.stream);
}
#endif

void add(const char* family, void (*fn)(benchmark::State&, StepShape), const StepShape& s) {
  benchmark::RegisterBenchmark(s.name(family).c_str(), fn, s)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

const bool registered = [] {
  // The block counts the selector test also checks (tests/support/case_lists.h).
  for (int blocks : cases::kSelectorStepBlocks)
    add("SelectorStep", selector_step, StepShape{blocks, 248320, 1, DFSEL_CODEBOOKS_REPLICATED});
  add("SelectorStep", selector_step, StepShape{1, 202048, 1, DFSEL_CODEBOOKS_REPLICATED});
  // Every output (llama.cpp's walker reads the packed rows), and BF16 logits.
  for (int blocks : cases::kSelectorStepBlocks) {
    StepShape s{blocks, 248320, 1, DFSEL_CODEBOOKS_REPLICATED};
    s.all_outputs = true;
    add("SelectorStep", selector_step, s);
  }
  for (bool all : {false, true}) {
    StepShape s{1, 248320, 1, DFSEL_CODEBOOKS_REPLICATED};
    s.logits = DFSEL_TYPE_BF16;
    s.all_outputs = all;
    add("SelectorStep", selector_step, s);
  }
  for (int S : {2, 8})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
      add("SimulatedShards", simulated_shards, StepShape{1, 248320, S, pl});
#if defined(DFSEL_WITH_NCCL)
  // tokens 8 is one block of 8 tokens; the others are blocks of 16.
  for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
    add("DistributedStep", distributed_step, StepShape{1, 248320, 2, pl, 8});
  for (int blocks : {1, 4, 16})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
      add("DistributedStep", distributed_step, StepShape{blocks, 248320, 2, pl});
  for (int blocks : {1, 16})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
      add("ExchangeFloor", exchange_floor, StepShape{blocks, 248320, 2, pl});
#if defined(DFSEL_BENCH_LSA)
  for (int blocks : {1, 16})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
      add("LsaExchangeFloor", lsa_exchange_floor, StepShape{blocks, 248320, 2, pl});
#endif
  for (int blocks : {1, 16}) {
    const StepShape s{blocks, 248320, 2, DFSEL_CODEBOOKS_REPLICATED};
    benchmark::RegisterBenchmark(s.name("FullLogitGather+ShardTopK").c_str(),
                                 [](benchmark::State& st, StepShape x) { full_logit_gather(st, x, false); }, s)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(s.name("FullLogitGather+CubSort").c_str(),
                                 [](benchmark::State& st, StepShape x) { full_logit_gather(st, x, true); }, s)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
#endif
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
