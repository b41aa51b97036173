// NcclExchange: the all-gather of DESIGN section 3 on the caller's communicator. At set-up
// every rank contributes a description of itself to one small all-gather and every rank
// checks the whole table the same way, so a mismatch fails on every rank instead of hanging.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <vector>

#include "host/backend/backend.h"

namespace dfsel {

namespace {

Status nccl_fail(ncclResult_t r, ncclComm_t comm, const char* what) {
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  return fail(DFSEL_NCCL_ERROR, "%s failed: %s%s%s", what, ncclGetErrorString(r), last && *last ? ": " : "",
              last ? last : "");
}

// What one rank says of itself at set-up; compared field by field on every rank.
struct SetupRecord {
  uint32_t magic;
  int32_t version;
  int32_t ok;  // this rank's own checks passed
  int32_t comm_rank, comm_size;
  int32_t shard_rank, shard_n_ranks;
  int32_t top_k, rank, block_size, max_blocks, placement, cb_type;
  int64_t n_vocab, n_embd, v_begin, v_end;
  float logit_scale, softcap;
  char msg[160];  // this rank's own error, when ok == 0
};

constexpr uint32_t kSetupMagic = 0x64667331;  // "dfs1"

class NcclExchange final : public Exchange {
 public:
  NcclExchange(ncclComm_t comm, int rank, int n) : comm_(comm), rank_(rank), n_(n) {}
  Status health() override {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
    if (r != ncclSuccess) return nccl_fail(r, comm_, "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress)
      return nccl_fail(async, comm_, "the communicator (an asynchronous error; abort it with ncclCommAbort and destroy the plan)");
    return Status::success();
  }
  int n_ranks() const override { return n_; }
  int rank() const override { return rank_; }
  Status all_gather(const void* send, void* recv, size_t bytes, void* stream) override {
    const ncclResult_t r = ncclAllGather(send, recv, bytes, ncclUint8, comm_, static_cast<cudaStream_t>(stream));
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(r, comm_, "ncclAllGather of the candidate records");
    return Status::success();
  }

 private:
  ncclComm_t comm_;
  int rank_, n_;
};

SetupRecord describe(const dfsel_plan_desc& d, int comm_rank, int comm_size, const Status& local) {
  SetupRecord s{};
  s.magic = kSetupMagic;
  s.version = DFSEL_VERSION;
  s.ok = local.ok() ? 1 : 0;
  s.comm_rank = comm_rank;
  s.comm_size = comm_size;
  s.shard_rank = d.shard.rank;
  s.shard_n_ranks = d.shard.n_ranks;
  s.top_k = d.config.top_k;
  s.rank = d.config.codebook_rank;
  s.block_size = d.config.block_size;
  s.max_blocks = d.config.max_blocks;
  s.placement = (int32_t)d.placement;
  s.cb_type = (int32_t)d.e_prev.type;
  s.n_vocab = d.config.n_vocab;
  s.n_embd = d.config.n_embd;
  s.v_begin = d.shard.v_begin;
  s.v_end = d.shard.v_end;
  s.logit_scale = d.config.logit_scale;
  s.softcap = d.config.softcap;
  std::snprintf(s.msg, sizeof s.msg, "%s", local.msg.c_str());
  return s;
}

// The same verdict on every rank: it reads only the gathered table.
Status judge(const std::vector<SetupRecord>& all) {
  const int n = (int)all.size();
  for (int r = 0; r < n; ++r) {
    const SetupRecord& s = all[r];
    if (s.magic != kSetupMagic || s.version != DFSEL_VERSION)
      return fail(DFSEL_INVALID_ARGUMENT, "communicator rank %d runs another dfsel version (%d) than this one (%d)", r,
                  s.version, DFSEL_VERSION);
    if (!s.ok) return fail(DFSEL_INVALID_ARGUMENT, "communicator rank %d failed its own checks: %s", r, s.msg);
    if (s.shard_n_ranks != n || s.shard_rank != r)
      return fail(DFSEL_INVALID_ARGUMENT, "communicator rank %d of %d describes itself as shard.rank = %d of shard.n_ranks = %d", r,
                  n, s.shard_rank, s.shard_n_ranks);
  }
  const SetupRecord& a = all[0];
  for (int r = 1; r < n; ++r) {
    const SetupRecord& s = all[r];
    if (s.top_k != a.top_k || s.rank != a.rank || s.block_size != a.block_size || s.n_vocab != a.n_vocab ||
        s.n_embd != a.n_embd || s.max_blocks != a.max_blocks || s.placement != a.placement || s.cb_type != a.cb_type ||
        std::memcmp(&s.logit_scale, &a.logit_scale, 4) != 0 || std::memcmp(&s.softcap, &a.softcap, 4) != 0)
      return fail(DFSEL_INVALID_ARGUMENT, "rank %d's config (V=%" PRId64 " K=%d R=%d block=%d max_blocks=%d placement=%d) differs from rank 0's "
                  "(V=%" PRId64 " K=%d R=%d block=%d max_blocks=%d placement=%d)", r, s.n_vocab, s.top_k, s.rank, s.block_size,
                  s.max_blocks, s.placement, a.n_vocab, a.top_k, a.rank, a.block_size, a.max_blocks, a.placement);
  }
  std::vector<std::pair<int64_t, int>> begins;
  for (int r = 0; r < n; ++r) begins.emplace_back(all[r].v_begin, r);
  std::sort(begins.begin(), begins.end());
  int64_t at = 0;
  for (const auto& b : begins) {
    const SetupRecord& s = all[b.second];
    if (s.v_begin != at)
      return fail(DFSEL_INVALID_ARGUMENT, "the ranks' vocabulary ranges leave a %s at token %" PRId64 " (rank %d has [%" PRId64 ", %" PRId64 "))",
                  s.v_begin > at ? "gap" : "overlap", std::min(at, s.v_begin), b.second, s.v_begin, s.v_end);
    at = s.v_end;
  }
  if (at != a.n_vocab)
    return fail(DFSEL_INVALID_ARGUMENT, "the ranks' vocabulary ranges end at %" PRId64 ", not at n_vocab = %" PRId64, at, a.n_vocab);
  return Status::success();
}

}  // namespace

Status nccl_setup(const dfsel_plan_desc& desc, const Status& local, std::unique_ptr<Exchange>* out) {
  ncclComm_t comm = static_cast<ncclComm_t>(desc.nccl_comm);
  int n = 0, rank = 0, device = 0;
  ncclResult_t r = ncclCommCount(comm, &n);
  if (r == ncclSuccess) r = ncclCommUserRank(comm, &rank);
  if (r == ncclSuccess) r = ncclCommCuDevice(comm, &device);
  if (r != ncclSuccess) return nccl_fail(r, comm, "reading the communicator");
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(device);
  const SetupRecord mine = describe(desc, rank, n, local);
  void* buf = nullptr;
  cudaStream_t st = nullptr;
  Status s;
  if (cudaMalloc(&buf, sizeof(SetupRecord) * (n + 1)) != cudaSuccess || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
    s = fail(DFSEL_OUT_OF_MEMORY, "the set-up exchange buffer could not be allocated on device %d", device);
  } else {
    uint8_t* send = static_cast<uint8_t*>(buf) + sizeof(SetupRecord) * n;
    cudaMemcpy(send, &mine, sizeof mine, cudaMemcpyHostToDevice);
    r = ncclAllGather(send, buf, sizeof(SetupRecord), ncclUint8, comm, st);
    if (r != ncclSuccess) {
      s = nccl_fail(r, comm, "the set-up all-gather");
    } else if (cudaStreamSynchronize(st) != cudaSuccess) {
      s = fail(DFSEL_CUDA_ERROR, "the set-up all-gather did not complete on device %d", device);
    } else {
      std::vector<SetupRecord> all(n);
      cudaMemcpy(all.data(), buf, sizeof(SetupRecord) * n, cudaMemcpyDeviceToHost);
      s = local.ok() ? judge(all) : local;
    }
  }
  if (st) cudaStreamDestroy(st);
  if (buf) cudaFree(buf);
  cudaSetDevice(prev);
  if (s.ok()) out->reset(new NcclExchange(comm, rank, n));
  return s;
}

Status exchange_group_begin() {
  const ncclResult_t r = ncclGroupStart();
  return r == ncclSuccess ? Status::success() : nccl_fail(r, nullptr, "ncclGroupStart");
}

Status exchange_group_end() {
  const ncclResult_t r = ncclGroupEnd();
  return r == ncclSuccess ? Status::success() : nccl_fail(r, nullptr, "ncclGroupEnd");
}

}  // namespace dfsel
