// The distributed selector over NCCL on two or more GPUs (SPEC section 4): every rank holds
// bitwise the same result, equal to the CPU reference; mismatches fail at set-up on every rank.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "support/compare.h"
#include "support/gpu.cuh"
#include "support/problem.h"

extern char** environ;

namespace dfsel::test {
namespace {

Case two_rank_case() { return model_case(248320, 1024, 2); }

// The NCCL exchange on one GPU: a communicator of one rank goes through the same set-up
// agreement, all-gather and health polls as a larger one, and gives the bits of no
// communicator, in both placements.
TEST(GpuNccl, OneRankCommunicatorGivesTheBitsOfNone) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Case c = model_case(31040, 512, 2);
  const Data d = make_data(c, rng());
  for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
    RunOpts r;
    r.backend = DFSEL_BACKEND_CUDA;
    r.nccl = true;
    r.placement = pl;
    r.temperature = pl == DFSEL_CODEBOOKS_SHARDED ? 0.7f : 0.0f;
    r.seed = rng();
    const Result nccl = run_case(c, d, r);
    ASSERT_EQ(nccl.status, DFSEL_SUCCESS) << nccl.error;
    RunOpts local = r;
    local.nccl = false;
    const Result none = run_case(c, d, local);
    ASSERT_EQ(none.status, DFSEL_SUCCESS) << none.error;
    EXPECT_EQ(bitwise_diff(none, nccl), "") << "placement " << pl;
  }
}

TEST(GpuNccl, TwoRanksMatchCpuBothPlacements) {
  DFSEL_REQUIRE_GPUS(2);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Case c = two_rank_case();
  const Data d = make_data(c, rng());
  for (bool uneven : {false, true})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
      for (float temperature : {0.0f, 0.8f}) {
        RunOpts r;
        r.backend = DFSEL_BACKEND_CUDA;
        r.nccl = true;
        r.placement = pl;
        r.temperature = temperature;
        r.seed = rng();
        r.bounds = uneven ? random_bounds(c.V, 2, 1000, rng) : std::vector<int64_t>{0, c.V / 2, c.V};
        SCOPED_TRACE("split " + std::to_string(r.bounds[1]) + " placement " + std::to_string(pl) + " T " +
                     std::to_string(temperature));
        const Result gpu = run_case(c, d, r);  // also checks both ranks hold the same bits
        ASSERT_EQ(gpu.status, DFSEL_SUCCESS) << gpu.error;
        RunOpts cpu_opts;
        cpu_opts.temperature = temperature;
        cpu_opts.seed = r.seed;
        const Result cpu1 = run_case(c, d, cpu_opts);
        cpu_opts.bounds = r.bounds;
        const Result cpu2 = run_case(c, d, cpu_opts);
        ASSERT_EQ(cpu1.status, DFSEL_SUCCESS) << cpu1.error;
        EXPECT_EQ(first_diff(cpu1.scores, cpu2.scores), -1);
        const std::string why = temperature > 0 ? compare_sampled(c, cpu2, gpu, 0.0f, r.seed, 1e-4)
                                                : compare_greedy(c, cpu2, gpu, 0.0f, 1e-4);
        EXPECT_EQ(why, "");
        // The same shards on one GPU (in-process exchange) give the NCCL result bit for bit.
        RunOpts local = r;
        local.nccl = false;
        const Result one_gpu = run_case(c, d, local);
        ASSERT_EQ(one_gpu.status, DFSEL_SUCCESS) << one_gpu.error;
        EXPECT_EQ(first_diff(one_gpu.scores, gpu.scores), -1);
        EXPECT_EQ(first_diff(one_gpu.path, gpu.path), -1);
        EXPECT_EQ(first_diff(one_gpu.cand_ids, gpu.cand_ids), -1);
      }
}

TEST(GpuNccl, MismatchedRangeFailsOnEveryRank) {
  DFSEL_REQUIRE_GPUS(2);
  Case c = two_rank_case();
  c.V = 31040;
  c.blocks = 1;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;
  r.nccl = true;
  r.bounds = {0, c.V / 2, c.V};
  r.edit_desc = [](int shard, dfsel_plan_desc* desc) {
    if (shard == 1) desc->shard.v_begin += 10;  // leaves a gap of 10 tokens
  };
  Result x = run_case(c, d, r);
  ASSERT_EQ(x.create_status.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(x.create_status[s], DFSEL_INVALID_ARGUMENT) << "rank " << s;
    EXPECT_NE(x.create_errors[s].find("gap at token 15520"), std::string::npos) << x.create_errors[s];
  }
  r.edit_desc = [](int shard, dfsel_plan_desc* desc) {
    if (shard == 0) desc->config.top_k = 8;
  };
  x = run_case(c, d, r);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(x.create_status[s], DFSEL_INVALID_ARGUMENT) << "rank " << s;
    EXPECT_NE(x.create_errors[s].find("differs from rank 0"), std::string::npos) << x.create_errors[s];
  }
  // A rank whose own checks fail still joins the set-up, so its peer fails too instead of waiting.
  r.edit_desc = [](int shard, dfsel_plan_desc* desc) {
    if (shard == 1) desc->e_prev.data = nullptr;
  };
  x = run_case(c, d, r);
  EXPECT_EQ(x.create_status[1], DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(x.create_errors[1].find("e_prev.data is NULL"), std::string::npos) << x.create_errors[1];
  EXPECT_EQ(x.create_status[0], DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(x.create_errors[0].find("rank 1 failed its own checks"), std::string::npos) << x.create_errors[0];
}

#if defined(DFSEL_NCCL_RANK_BIN)
// One process per GPU, as engines run it: the example program, graph-captured, on every GPU.
TEST(GpuNccl, OneProcessPerGpuAgree) {
  const int n = gpu_count();
  DFSEL_REQUIRE_GPUS(2);
  char dir[] = "/tmp/dfsel-nccl-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string id_file = std::string(dir) + "/id";
  for (const char* mode : {"", "--sharded"}) {
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
      const std::string out = std::string(dir) + "/rank" + std::to_string(r);
      std::vector<std::string> args = {DFSEL_NCCL_RANK_BIN, "--rank", std::to_string(r), "--ranks", std::to_string(n),
                                       "--id-file", id_file, "--blocks", "2"};
      if (*mode) args.push_back(mode);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      pid_t pid;
      ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
      posix_spawn_file_actions_destroy(&fa);
      pids.push_back(pid);
    }
    std::string first;
    for (int r = 0; r < n; ++r) {
      int status = 0;
      waitpid(pids[r], &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " " << mode;
      std::ifstream f(std::string(dir) + "/rank" + std::to_string(r));
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string text = ss.str();
      const size_t at = text.find("checksum ");
      ASSERT_NE(at, std::string::npos) << text;
      const std::string sum = text.substr(at + 9, 16);
      if (r == 0) first = sum;
      EXPECT_EQ(sum, first) << "rank " << r << " " << mode;
    }
    std::remove(id_file.c_str());
  }
}
#endif

}  // namespace
}  // namespace dfsel::test
