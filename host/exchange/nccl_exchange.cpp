// NcclExchange: the all-gather of SPEC section 4.4 on the caller's communicator. At set-up
// every rank contributes a description of itself to one small all-gather and every rank
// judges the whole table by the group rule (host/exchange/group_rule.h), so a mismatch fails on every
// rank instead of hanging.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "host/backend/cuda_status.h"
#include "host/exchange/exchange.h"
#include "host/exchange/group_rule.h"

namespace dfsel {

namespace {

Status nccl_fail(ncclResult_t r, ncclComm_t comm, const char* what) {
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  return fail(DFSEL_NCCL_ERROR, "%s failed: %s%s%s", what, ncclGetErrorString(r), last && *last ? ": " : "",
              last ? last : "");
}

// What one rank says of itself at set-up.
struct SetupRecord {
  uint32_t magic;
  int32_t version;
  int32_t ok;  // this rank's own checks passed
  int32_t comm_rank, comm_size;
  RankSummary summary;
  char msg[160];  // this rank's own error, when ok == 0
};

constexpr uint32_t kSetupMagic = 0x64667332;  // "dfs2"

class NcclExchange final : public Exchange {
 public:
  explicit NcclExchange(ncclComm_t comm) : comm_(comm) {}
  bool is_nccl() const override { return true; }
  Status group_begin() override {
    const ncclResult_t r = ncclGroupStart();
    return r == ncclSuccess ? Status::success() : nccl_fail(r, comm_, "ncclGroupStart");
  }
  Status group_end() override {
    const ncclResult_t r = ncclGroupEnd();
    return r == ncclSuccess || r == ncclInProgress ? Status::success() : nccl_fail(r, comm_, "ncclGroupEnd");
  }
  Status all_gather(const StepRank* ranks, int, int self, size_t bytes) override {
    const ncclResult_t r = ncclAllGather(ranks[self].at.send, ranks[self].at.recv, bytes, ncclUint8, comm_,
                                         static_cast<cudaStream_t>(ranks[self].stream));
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(r, comm_, "ncclAllGather of the candidate records");
    return Status::success();
  }
  Status health() override {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
    if (r != ncclSuccess) return nccl_fail(r, comm_, "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress)
      return nccl_fail(async, comm_, "the communicator (an asynchronous error; abort it with ncclCommAbort and destroy the plan)");
    return Status::success();
  }

 private:
  ncclComm_t comm_;
};

SetupRecord describe(const RankSummary& mine, int comm_rank, int comm_size, const Status& local) {
  SetupRecord s{};
  s.magic = kSetupMagic;
  s.version = DFSEL_VERSION;
  s.ok = local.ok() ? 1 : 0;
  s.comm_rank = comm_rank;
  s.comm_size = comm_size;
  s.summary = mine;
  std::snprintf(s.msg, sizeof s.msg, "%s", local.msg.c_str());
  return s;
}

// The same verdict on every rank: it reads only the gathered table.
Status judge(const std::vector<SetupRecord>& all) {
  const int n = (int)all.size();
  std::vector<RankSummary> summaries(n);
  for (int r = 0; r < n; ++r) {
    const SetupRecord& s = all[r];
    if (s.magic != kSetupMagic || s.version != DFSEL_VERSION)
      return fail(DFSEL_INVALID_ARGUMENT, "communicator rank %d runs another dfsel version (%d) than this one (%d)", r,
                  s.version, DFSEL_VERSION);
    if (!s.ok) return fail(DFSEL_INVALID_ARGUMENT, "communicator rank %d failed its own checks: %s", r, s.msg);
    if (s.summary.shard_n_ranks != n || s.summary.shard_rank != r)
      return fail(DFSEL_INVALID_ARGUMENT, "communicator rank %d of %d describes itself as shard.rank = %d of shard.n_ranks = %d", r,
                  n, s.summary.shard_rank, s.summary.shard_n_ranks);
    summaries[r] = s.summary;
  }
  return check_group(summaries.data(), n, "rank");
}

// The set-up all-gather of one record per rank, on the communicator's device.
Status gather_records(ncclComm_t comm, int n, int device, const SetupRecord& mine, std::vector<SetupRecord>* all) {
  DeviceGuard guard(device);
  void* buf = nullptr;
  cudaStream_t st = nullptr;
  Status s;
  if (cudaMalloc(&buf, sizeof(SetupRecord) * (n + 1)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    s = fail(DFSEL_OUT_OF_MEMORY, "the set-up exchange buffer could not be allocated on device %d", device);
  } else {
    uint8_t* send = static_cast<uint8_t*>(buf) + sizeof(SetupRecord) * n;
    cudaError_t e = cudaMemcpy(send, &mine, sizeof mine, cudaMemcpyHostToDevice);
    ncclResult_t r = ncclSuccess;
    // Join the collective even when the copy failed, so that the peers are not left waiting;
    // the verdict is then this rank's failure.
    r = ncclAllGather(send, buf, sizeof(SetupRecord), ncclUint8, comm, st);
    if (r != ncclSuccess) {
      s = nccl_fail(r, comm, "the set-up all-gather");
    } else if (e != cudaSuccess) {
      s = cuda_fail(e, "copying this rank's set-up record to the device");
    } else if ((e = cudaStreamSynchronize(st)) != cudaSuccess) {
      s = cuda_fail(e, "the set-up all-gather");
    } else {
      all->resize(n);
      e = cudaMemcpy(all->data(), buf, sizeof(SetupRecord) * n, cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) s = cuda_fail(e, "reading the set-up records");
    }
  }
  if (st) cudaStreamDestroy(st);
  if (buf) cudaFree(buf);
  return s;
}

}  // namespace

Status make_nccl_exchange(void* nccl_comm, const RankSummary& mine, const Status& local, std::unique_ptr<Exchange>* out) {
  ncclComm_t comm = static_cast<ncclComm_t>(nccl_comm);
  int n = 0, rank = 0, device = 0;
  ncclResult_t r = ncclCommCount(comm, &n);
  if (r == ncclSuccess) r = ncclCommUserRank(comm, &rank);
  if (r == ncclSuccess) r = ncclCommCuDevice(comm, &device);
  if (r != ncclSuccess) return nccl_fail(r, comm, "reading the communicator");
  std::vector<SetupRecord> all;
  DFSEL_TRY(gather_records(comm, n, device, describe(mine, rank, n, local), &all));
  DFSEL_TRY(local.ok() ? judge(all) : local);
  out->reset(new NcclExchange(comm));
  return Status::success();
}

}  // namespace dfsel
