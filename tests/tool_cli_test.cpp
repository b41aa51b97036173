// The dfsel command as a new user meets it: every bad request is refused with exit status 2
// (options) or 1 (set-up) and one line naming the flag and the value, never a signal, never a
// silent wrong run; and dfsel_write_draft writes only drafts that the reader opens.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "kernels/common/numeric.cuh"
#include "options.h"
#include "support/gguf_writer.h"
#include "synthetic.h"
#include "tool_run.h"

namespace {

using dfsel::tools::Options;
using dfsel::tools::parse_options;

bool parse(std::vector<const char*> args, Options* o, std::string* err) {
  args.insert(args.begin(), "dfsel");
  return parse_options((int)args.size(), args.data(), o, err);
}

struct Refusal {
  std::vector<const char*> args;
  const char* names;  // the message names the flag (and the value)
};

TEST(ToolOptions, NumbersParseWholeOrAreRefused) {
  const Refusal cases[] = {
      {{"--top-k", "1e3"}, "--top-k"},        {{"--temperature", "0,8"}, "--temperature"},
      {{"--vocab", "12abc"}, "--vocab"},      {{"--seed", "abc"}, "--seed"},
      {{"--vocab", "--steps", "1"}, "--vocab needs a value"},
      {{"--embd", "-1"}, "--embd = -1"},      {{"--vocab", "3000000000"}, "--vocab = 3000000000"},
      {{"--vocab", "99999999999999999999"}, "--vocab"}, {{"--p-min", "1.5"}, "--p-min = 1.5"},
      {{"--steps", ""}, "--steps"},           {{"--blocks", " 3"}, "--blocks"},
      {{"--seed", "-1"}, "--seed"},           {{"--temperature", "nan"}, "--temperature"},
      {{"--threads", "1.5"}, "--threads"},    {{"--shards", "0"}, "--shards = 0"},
      // Once read as 0 (greedy) without a word, and hex floats, inf and blanks as strtod takes them.
      {{"--temperature", "1e-50"}, "--temperature = 1e-50 is below the smallest positive float, 1.4013e-45"},
      {{"--p-min", "1e-46"}, "--p-min = 1e-46 is below the smallest positive float"},
      {{"--temperature", "0x1p-3"}, "--temperature takes a decimal number such as 0.8, not '0x1p-3'"},
      {{"--temperature", "inf"}, "--temperature takes a decimal number"},
      {{"--temperature", "\n0.5"}, "--temperature takes a decimal number"},
  };
  for (const Refusal& c : cases) {
    Options o;
    std::string err;
    EXPECT_FALSE(parse(c.args, &o, &err)) << c.args[0] << " " << (c.args.size() > 1 ? c.args[1] : "");
    EXPECT_NE(err.find(c.names), std::string::npos) << err;
  }
}

TEST(ToolOptions, WholeNumbersParse) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--top-k", "8", "--temperature", "0.8", "--vocab", "32000", "--seed", "18446744073709551615",
                     "--p-min", "0.5", "--threads", "2"},
                    &o, &err))
      << err;
  EXPECT_EQ(o.top_k, 8);
  EXPECT_FLOAT_EQ(o.temperature, 0.8f);
  EXPECT_EQ(o.vocab, 32000);
  EXPECT_EQ(o.seed, 18446744073709551615ull);
  EXPECT_EQ(o.threads, 2);
}

// A flag takes the library's range and nothing narrower: a subnormal temperature or p_min, which
// the library documents (the greedy limit of sampling), was refused below the smallest normal
// float; --rank, --top-k and --block-size each name one range, the library's, whatever the value.
TEST(ToolOptions, FlagsTakeTheLibrarysRanges) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--temperature", "1e-40", "--p-min", "1e-45"}, &o, &err)) << err;
  EXPECT_EQ(std::fpclassify(o.temperature), FP_SUBNORMAL);
  EXPECT_EQ(o.temperature, 1e-40f);
  EXPECT_GT(o.p_min, 0.0f);
  ASSERT_TRUE(parse({"--temperature", "3.4e38"}, &o, &err)) << err;
  EXPECT_EQ(o.temperature, 3.4e38f);
  const Refusal cases[] = {
      {{"--rank", "0"}, "--rank = 0 is outside [1, 1024]"},        {{"--rank", "2000"}, "--rank = 2000 is outside [1, 1024]"},
      {{"--top-k", "0"}, "--top-k = 0 is outside [1, 64]"},        {{"--top-k", "65"}, "--top-k = 65 is outside [1, 64]"},
      {{"--block-size", "1"}, "--block-size = 1 is outside [2, 1024]"},
      {{"--block-size", "1025"}, "--block-size = 1025 is outside [2, 1024]"},
      {{"--temperature", "1e39"}, "--temperature = 1e39 is outside [0, 3.40282e+38]"},
  };
  for (const Refusal& c : cases) {
    EXPECT_FALSE(parse(c.args, &o, &err)) << c.names;
    EXPECT_NE(err.find(c.names), std::string::npos) << err;
  }
}

TEST(ToolOptions, GgufSetsTheSizesAndNeedsAName) {
  for (const char* flag : {"--top-k", "--rank", "--vocab", "--embd", "--block-size", "--codebook-type"}) {
    Options o;
    std::string err;
    EXPECT_FALSE(parse({"--gguf", "draft.gguf", flag, "8"}, &o, &err)) << flag;
    EXPECT_NE(err.find(flag), std::string::npos) << err;
    EXPECT_NE(err.find("--gguf"), std::string::npos) << err;
  }
  Options o;
  std::string err;
  EXPECT_FALSE(parse({"--gguf", ""}, &o, &err));
  EXPECT_NE(err.find("--gguf needs a file name"), std::string::npos) << err;
  EXPECT_TRUE(parse({"--gguf", "draft.gguf", "--blocks", "2", "--steps", "1"}, &o, &err)) << err;
}

using dfsel::test::CliRun;

// Runs the command with args (under `timeout 120`, so that a hang fails rather than blocks).
CliRun run(const std::string& args, int timeout_s = 120) {
  return dfsel::test::run_command(std::string(DFSEL_CLI_BIN) + " " + args, timeout_s);
}

// Requests that used to be allocated before they were judged (std::bad_alloc, SIGABRT).
TEST(ToolCli, ImpossibleProblemsAreRefusedBeforeAllocating) {
  const std::pair<const char*, const char*> cases[] = {
      {"--embd -1", "--embd = -1"},
      {"--vocab 3000000000", "--vocab = 3000000000"},
      {"--embd 2147483647", "needs about"},
      {"--blocks 1000000", "needs about"},
      {"--vocab 99999999999999999999", "--vocab"},
      {"--block-size 1024 --blocks 100", "needs about"},
      {"--block-size 1", "--block-size = 1"},
      {"--top-k 100", "--top-k = 100"},
      {"--rank 100 --codebook-type q8_0", "--codebook-type q8_0 but --rank = 100 is not a multiple of 32"},
  };
  for (const auto& c : cases) {
    const CliRun r = run(std::string(c.first) + " --steps 1");
    EXPECT_EQ(r.signal, 0) << c.first << ": killed by signal " << r.signal << "\n" << r.output;
    EXPECT_TRUE(r.status == 1 || r.status == 2) << c.first << ": exit " << r.status << "\n" << r.output;
    EXPECT_NE(r.output.find(c.second), std::string::npos) << c.first << ":\n" << r.output;
  }
}

// Numbers that atoi / atof read in part ran a different problem; now the command refuses them.
// A value the library refuses is as bad a request (exit 2, once 1) and names the flag, not the
// C API's field (once config.top_k); a bound prints as a person reads it (once
// 1000000000000000019884624838656.000000).
TEST(ToolCli, BadRequestsExit2AndNameTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"--top-k 1e3", "--top-k takes a whole number, not '1e3'"},
      {"--temperature 0,8", "--temperature takes a decimal number such as 0.8, not '0,8'"},
      {"--vocab 12abc", "--vocab takes a whole number, not '12abc'"},
      {"--seed abc", "--seed takes a whole number >= 0, not 'abc'"},
      {"--vocab --steps 1", "--vocab needs a value"},
      {"--top-k 100", "dfsel: --top-k = 100 is outside [1, 64]"},
      {"--block-size 1025", "dfsel: --block-size = 1025 is outside [2, 1024]"},
      {"--rank 2000", "dfsel: --rank = 2000 is outside [1, 1024]"},
      {"--temperature 1e39", "dfsel: --temperature = 1e39 is outside [0, 3.40282e+38]"},
      // Once blamed on shard 0's empty vocabulary range.
      {"--shards 2147483647", "dfsel: --shards = 2147483647 is more than the vocabulary has tokens (V = 248320)"},
  };
  for (const auto& c : cases) {
    const CliRun r = run(std::string(c.first) + " --backend cpu --embd 64 --steps 1");
    EXPECT_EQ(r.status, 2) << c.first << ":\n" << r.output;
    EXPECT_NE(r.output.find(c.second), std::string::npos) << c.first << ":\n" << r.output;
    EXPECT_EQ(r.output.find("config."), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("000000"), std::string::npos) << r.output;
  }
}

// With --gguf the draft's sizes and codebook type stand: the size flags and --codebook-type used
// to be ignored without a word (the DSpark mode refuses --weight-type alike), and an empty name
// ran the synthetic problem.
TEST(ToolCli, GgufRefusesSizeFlagsAndAnEmptyName) {
  for (const char* flag : {"--top-k 8", "--rank 64", "--vocab 1000", "--embd 64", "--block-size 8", "--codebook-type f16"}) {
    const CliRun r = run(std::string("--gguf draft.gguf ") + flag + " --steps 1");
    EXPECT_EQ(r.status, 2) << flag << ":\n" << r.output;
    EXPECT_NE(r.output.find("cannot be combined with --gguf"), std::string::npos) << r.output;
  }
  const CliRun r = run("--gguf '' --backend cpu --steps 1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--gguf needs a file name"), std::string::npos) << r.output;
}

// Simulated shards share the host inputs: 200 of them used to copy the logits and codebooks
// each (about 270 MB a shard) until the kernel killed the process.
TEST(ToolCli, ManySimulatedShardsShareTheInputs) {
  const CliRun r = run("--backend cpu --shards 200 --steps 1");
  EXPECT_EQ(r.signal, 0) << r.output;
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("block 0: anchor"), std::string::npos) << r.output;
  struct rusage ru {};
  getrusage(RUSAGE_CHILDREN, &ru);
  EXPECT_LT(ru.ru_maxrss, 3L * 1024 * 1024) << "peak resident kB of the command";
}

// Without a GPU (or without the CUDA backend) the library's own sentence is shown.
TEST(ToolCli, CudaWithoutAGpuSaysSo) {
  const CliRun r = run("--backend cuda --vocab 1000 --embd 64 --steps 1");
  int n = 0;
  dfsel_cuda_device_count(&n);
  if (n > 0) GTEST_SKIP() << "a CUDA GPU is present";
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.find("cudaMalloc"), std::string::npos) << r.output;
  EXPECT_TRUE(r.output.find("no CUDA device") != std::string::npos ||
              r.output.find("has no CUDA backend") != std::string::npos)
      << r.output;
}

TEST(ToolCli, BothTermsOfTheScoreCount) {
  // The synthetic problem is one where the lattice matters: the walk leaves the top unary
  // candidate somewhere over a few blocks, and p_min 0.5 still lets some block emit.
  const CliRun r = run("--backend cpu --vocab 32000 --embd 256 --blocks 8 --steps 1");
  ASSERT_EQ(r.status, 0) << r.output;
  int left = -1, emitted = -1;
  const size_t at = r.output.find("walk: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  ASSERT_EQ(std::sscanf(r.output.c_str() + at, "walk: %d of %d", &left, &emitted), 2) << r.output;
  EXPECT_GT(left, 0) << r.output;
  EXPECT_LT(left, emitted) << r.output;
  const CliRun cut = run("--backend cpu --vocab 32000 --embd 256 --blocks 8 --steps 1 --p-min 0.5");
  ASSERT_EQ(cut.status, 0) << cut.output;
  const size_t w = cut.output.find("walk: ");
  ASSERT_NE(w, std::string::npos);
  ASSERT_EQ(std::sscanf(cut.output.c_str() + w, "walk: %d of %d", &left, &emitted), 2);
  EXPECT_GT(emitted, 0) << cut.output;
}

// A key is the file's bytes: the command prints it escaped, never raw to the terminal.
TEST(ToolCli, GgufKeysArePrintedEscaped) {
  dfsel::test::DraftOptions o;
  dfsel::test::Draft d = dfsel::test::make_draft(o);
  const std::string key = "general.name";
  auto at = std::search(d.bytes.begin(), d.bytes.end(), key.begin(), key.end());
  ASSERT_NE(at, d.bytes.end());
  const char esc[] = "\x1b[31m\x9b\xff";  // ESC sequence, a C1 CSI, a byte that is not UTF-8
  std::copy(esc, esc + 7, at);
  dfsel::test::TempDir dir;
  const std::string path = dir.file("keys.gguf");
  ASSERT_TRUE(dfsel::test::write_file(path, d.bytes));
  const CliRun r = run("--backend cpu --gguf " + path + " --steps 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x9b'), std::string::npos);
  EXPECT_EQ(r.output.find('\xff'), std::string::npos);
  EXPECT_NE(r.output.find("\\x1b[31m\\x9b\\xff.name"), std::string::npos) << r.output;
}

// A draft's weights are reported as the file stores them, as the DSpark mode reports its own:
// a Q2_K draft once printed BF16, the type its codebooks are read as.
TEST(ToolCli, ADraftsWeightTypesAreTheFilesAndWhatTheyAreReadAs) {
  dfsel::test::TempDir dir;
  const std::string path = dir.file("q2_k.gguf");
  const CliRun w = dfsel::test::run_command(std::string(DFSEL_WRITE_DRAFT_BIN) + " " + path +
                                            " --vocab 300 --rank 256 --embd 64 --codebook-type q2_k --hidden-type q8_0");
  ASSERT_EQ(w.status, 0) << w.output;
  const CliRun r = run("--backend cpu --gguf " + path + " --steps 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("selector_predecessor Q2_K (read as BF16) {256, 300}, selector_successor Q2_K (read as BF16), "
                          "selector_hidden Q8_0 {64, 256}"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("codebooks Q2_K (read as BF16) replicated"), std::string::npos) << r.output;
}

// A DFlash2 draft whose codebooks or W_h hold NaN or infinite values is outside the contract
// (docs/SPEC.md 2.4) and the library does not read every value at set-up, so it ran without a
// word while DSpark refuses a non-finite confidence weight by name: the command, which reads
// every weight when it copies them, warns and names the tensor.
TEST(ToolCli, ADraftWithNonFiniteWeightsIsWarnedOf) {
  dfsel::test::DraftOptions o;  // F16 codebooks {32, 64}, W_h {32, 32}
  dfsel::test::Draft d = dfsel::test::make_draft(o);
  const size_t cb = (size_t)(o.n_vocab * o.rank), wh = (size_t)(o.n_embd * o.rank);
  for (size_t i = 0; i < cb; ++i) {  // every e_prev value NaN, one e_next value +inf
    d.bytes[d.e_prev_at + 2 * i] = 0x00;
    d.bytes[d.e_prev_at + 2 * i + 1] = 0x7e;
  }
  d.bytes[d.e_next_at + 2 * 7] = 0x00;
  d.bytes[d.e_next_at + 2 * 7 + 1] = 0x7c;
  dfsel::test::TempDir dir;
  const std::string path = dir.file("nan.gguf");
  ASSERT_TRUE(dfsel::test::write_file(path, d.bytes));
  const CliRun r = run("--backend cpu --gguf " + path + " --steps 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("dfsel: warning: " + path + ": selector_predecessor.weight: all " + std::to_string(cb) +
                          " values are NaN or infinite"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("dfsel: warning: " + path + ": selector_successor.weight: 1 of " + std::to_string(cb) +
                          " values is NaN or infinite"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("selector_hidden.weight:"), std::string::npos) << r.output;

  // W_h all +inf, and a clean draft says nothing.
  d = dfsel::test::make_draft(o);
  for (size_t i = 0; i < wh; ++i) {
    d.bytes[d.w_h_at + 2 * i] = 0x00;
    d.bytes[d.w_h_at + 2 * i + 1] = 0x7c;
  }
  ASSERT_TRUE(dfsel::test::write_file(path, d.bytes));
  const CliRun w = run("--backend cpu --gguf " + path + " --steps 1");
  ASSERT_EQ(w.status, 0) << w.output;
  EXPECT_NE(w.output.find("dfsel: warning: " + path + ": selector_hidden.weight: all " + std::to_string(wh) +
                          " values are NaN or infinite"),
            std::string::npos)
      << w.output;
  ASSERT_TRUE(dfsel::test::write_file(path, dfsel::test::make_draft(o).bytes));
  const CliRun c = run("--backend cpu --gguf " + path + " --steps 1");
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_EQ(c.output.find("warning"), std::string::npos) << c.output;
}

// The count behind that warning, in every type a draft's weights are read as: a value's
// exponent of all ones (NaN of any payload, +-inf); a Q8_0 block's 32 values with its scale.
TEST(ToolCli, NonFiniteWeightValuesAreCountedInEveryType) {
  using dfsel::tools::count_nonfinite;
  auto bytes = [](const void* p, size_t n) {
    return std::vector<uint8_t>(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  const float f32[] = {1.0f, NAN, -INFINITY, 3.4e38f, -0.0f, 1e-45f, -NAN};
  EXPECT_EQ(3, count_nonfinite(bytes(f32, sizeof f32), DFSEL_TYPE_F32));
  const uint16_t f16[] = {0x3c00, 0x7c00, 0xfc00, 0x7e01, 0x7bff, 0x0001};  // 1, +inf, -inf, NaN, max, subnormal
  EXPECT_EQ(3, count_nonfinite(bytes(f16, sizeof f16), DFSEL_TYPE_F16));
  const uint16_t bf16[] = {0x3f80, 0x7f80, 0xff80, 0x7fc1, 0x7f7f, 0x0001};
  EXPECT_EQ(3, count_nonfinite(bytes(bf16, sizeof bf16), DFSEL_TYPE_BF16));
  dfsel::BlockQ8_0 q8[3] = {};
  q8[0].d = 0x3c00;
  q8[1].d = 0x7c00;  // +inf scale: all 32 values
  q8[2].d = 0x7bff;
  EXPECT_EQ(dfsel::kQ8Block, count_nonfinite(bytes(q8, sizeof q8), DFSEL_TYPE_Q8_0));
}

// A FIFO given as the draft is refused at once instead of blocking the command.
TEST(ToolCli, AFifoAsTheDraftIsRefused) {
  dfsel::test::TempDir dir;
  const std::string path = dir.file("f.gguf");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  const CliRun r = run("--backend cpu --gguf " + path + " --steps 1", 10);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("a FIFO, not a regular file"), std::string::npos) << r.output;
}

// A draft whose own sizes the library refuses is the file's fault: named with the file and
// its key, exit 1 like any other bad file.
TEST(ToolCli, ADraftsOutOfRangeSizeNamesTheFile) {
  dfsel::test::DraftOptions o;
  o.block_size = 5000;
  const dfsel::test::Draft d = dfsel::test::make_draft(o);
  dfsel::test::TempDir dir;
  const std::string path = dir.file("long_blocks.gguf");
  ASSERT_TRUE(dfsel::test::write_file(path, d.bytes));
  const CliRun r = run("--backend cpu --gguf " + path + " --steps 1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(path + ": dflash.block_size = 5000 must be in [2, 1024]"), std::string::npos) << r.output;
}

// A draft whose weights do not fit in the memory this process may use is refused with the reason
// before anything is allocated: the command copied every codebook row first and died of
// std::bad_alloc (SIGABRT). The memory is made short cheaply: a data limit (ulimit -d) of 48 MiB,
// below the 64 MiB of BF16 codebooks of the draft (mapped read-only, which the limit leaves out).
TEST(ToolCli, ADraftThatDoesNotFitIsRefusedBeforeAllocating) {
  dfsel::test::TempDir dir;
  const std::string path = dir.file("big.gguf");
  const CliRun w = dfsel::test::run_command(std::string(DFSEL_WRITE_DRAFT_BIN) + " " + path +
                                            " --vocab 65536 --rank 256 --embd 64 --codebook-type bf16 --row-period 4096");
  ASSERT_EQ(w.status, 0) << w.output;
  const std::string cmd = std::string("sh -c 'ulimit -d 49152 && exec ") + DFSEL_CLI_BIN + " --backend cpu --gguf " +
                          path + " --steps 1'";
  const CliRun r = dfsel::test::run_command(cmd);
  EXPECT_EQ(r.signal, 0) << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("needs about"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("block 0:"), std::string::npos) << r.output;
  // With the limit lifted the same draft runs.
  const CliRun ok = run("--backend cpu --gguf " + path + " --steps 1");
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("block 0:"), std::string::npos) << ok.output;
}

TEST(ToolWriteDraft, RefusesDraftsTheReaderRejects) {
  const std::pair<const char*, const char*> cases[] = {
      {"--vocab 8 --top-k 16", "--top-k 16 is larger than --vocab 8"},
      {"--embd 64 --hidden-type q6_k", "--embd to be a multiple of 256"},
      {"--rank 16 --codebook-type q8_0", "--rank to be a multiple of 32"},
      // These used to die of SIGFPE, write a 17 GB file, abort on std::bad_alloc, or write a
      // draft that dfsel then refused.
      {"--alignment 0", "--alignment = 0 is outside [1, 1048576]"},
      {"--alignment -8", "--alignment = -8 is outside"},
      {"--vocab 1e12", "--vocab takes a whole number, not '1e12'"},
      {"--vocab 1000000000000", "--vocab = 1000000000000 is outside [1, 2147483647]"},
      {"--top-k 65 --vocab 100", "dfsel would refuse this draft: --top-k = 65 must be in [1, 64]"},
      {"--version 4", "version 4 at byte 4 is not supported"},
      {"--alignment 3", "is not a power of two"},
      {"--block 5000", "--block = 5000 must be in [2, 1024]"},
  };
  const std::string out = testing::TempDir() + "refused.gguf";
  for (const auto& c : cases) {
    std::remove(out.c_str());
    const CliRun r = dfsel::test::run_command(std::string(DFSEL_WRITE_DRAFT_BIN) + " " + out + " " + c.first);
    EXPECT_EQ(r.status, 2) << c.first << ": " << r.output;
    EXPECT_NE(r.output.find(c.second), std::string::npos) << c.first << ": " << r.output;
    EXPECT_NE(access(out.c_str(), F_OK), 0) << c.first << ": a refused draft was left on disk";
  }
}

}  // namespace
