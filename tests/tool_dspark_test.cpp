// The dfsel command's DSpark mode as a user meets it: a synthetic chain, a DSpark draft written
// by dfsel_write_draft --dspark run through --gguf, and every bad request refused with exit
// status 2 (a flag or a value, the library's refusals included) or 1 (it cannot run here) and
// a line naming the flag and the value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "dfsel/gguf.h"
#include "dspark_options.h"
#include "tool_run.h"

namespace {

using dfsel::test::CliRun;
using dfsel::test::run_command;

CliRun dfsel_cmd(const std::string& args) { return run_command(std::string(DFSEL_CLI_BIN) + " " + args); }
CliRun write_draft(const std::string& args) { return run_command(std::string(DFSEL_WRITE_DRAFT_BIN) + " " + args); }

// The lines "block b: anchor a, emitted n: t1 ... tn" of a run.
int blocks_printed(const std::string& out) {
  int n = 0;
  for (size_t at = out.find("block "); at != std::string::npos; at = out.find("\nblock ", at + 1)) ++n;
  return n;
}

TEST(ToolDSpark, ASyntheticChainRuns) {
  const CliRun r = dfsel_cmd("--dspark --vocab 4000 --rank 64 --n-draft 5 --blocks 3 --shards 2 --steps 2 --embd 32");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("DSpark chain"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("block 2: anchor "), std::string::npos) << r.output;
  EXPECT_EQ(blocks_printed(r.output), 3) << r.output;
  EXPECT_NE(r.output.find("step time: median"), std::string::npos) << r.output;
}

TEST(ToolDSpark, ADSparkDraftRunsThroughGguf) {
  const std::string path = testing::TempDir() + "dfsel_dspark_tool.gguf";
  const CliRun w = write_draft("--dspark " + path + " --vocab 3000 --target-vocab 5000 --rank 256 --embd 256 "
                               "--w1-type q8_0 --w2-type q4_k --conf-type bf16 --scale 2 --conf-bias --block 6 "
                               "--no-anchor-drafting");
  ASSERT_EQ(w.status, 0) << w.output;
  const CliRun r = dfsel_cmd("--gguf " + path + " --blocks 2 --steps 1 --temperature 0.7 --p-min 0.2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("markov_w1 Q8_0 {256, 5000}, markov_w2 Q4_K (read as BF16), scale yes, confidence head yes, d2t yes"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("V=3000 V_target=5000 R=256 N=5 (anchor row first)"), std::string::npos) << r.output;
  EXPECT_EQ(blocks_printed(r.output), 2) << r.output;
  EXPECT_NE(r.output.find("W2 Q4_K (read as BF16)"), std::string::npos) << r.output;
  // Each type named as the file stores it: W1 in a K-quant too, what llama-quantize writes for
  // a rank of 96 (the Q4_0 / Q5_0 family), and the other K-quants.
  const std::pair<std::string, std::string> stored[] = {
      {"--rank 256 --w1-type q4_k --w2-type q6_k", "markov_w1 Q4_K (read as BF16) {256, 3000}, markov_w2 Q6_K (read as BF16)"},
      {"--rank 96 --embd 32 --w1-type q4_0 --w2-type q5_1 --conf-type q5_0",
       "markov_w1 Q4_0 (read as BF16) {96, 3000}, markov_w2 Q5_1 (read as BF16)"},
      {"--rank 256 --embd 256 --w1-type q2_k --w2-type q3_k --conf-type q5_k",
       "markov_w1 Q2_K (read as BF16) {256, 3000}, markov_w2 Q3_K (read as BF16)"},
  };
  for (const auto& [args, line] : stored) {
    const CliRun wq = write_draft("--dspark " + path + " --vocab 3000 " + args);
    ASSERT_EQ(wq.status, 0) << args << ":\n" << wq.output;
    const CliRun rq = dfsel_cmd("--gguf " + path + " --blocks 1 --steps 1");
    ASSERT_EQ(rq.status, 0) << args << ":\n" << rq.output;
    EXPECT_NE(rq.output.find(line), std::string::npos) << rq.output;
  }
  const CliRun sized = dfsel_cmd("--gguf " + path + " --vocab 100");
  EXPECT_EQ(sized.status, 2) << sized.output;
  EXPECT_NE(sized.output.find("--vocab cannot be combined with --gguf"), std::string::npos) << sized.output;
}

// As in the DFlash2 mode (tool_cli_test.cpp): a value the library refuses is a bad request
// (exit 2) named by the flag, not by the C API's field; a request that cannot run here exits 1.
TEST(ToolDSpark, BadRequestsAreRefusedWithTheirReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"--dspark --n-draft 0", "--n-draft = 0 is outside [1, 1024]"},
      {"--dspark --vocab 12x", "--vocab takes a whole number"},
      {"--dspark --weight-type q4_k", "--weight-type is f32, f16, bf16 or q8_0"},
      {"--dspark --placement both", "--placement is replicated or sharded"},
      {"--dspark --sample-from-anchor 2", "--sample-from-anchor = 2"},
      {"--dspark --top-k 4", "unknown option --top-k in the DSpark mode"},
      {"--dspark --vocab 1000 --rank 2000", "--rank = 2000 is outside [1, 1024]"},
      {"--dspark --vocab 1000 --n-draft 2000", "--n-draft = 2000 is outside [1, 1024]"},
      {"--dspark --vocab 1000 --p-min 0.5 --steps 1", "--p-min = 0.5 needs a confidence head"},
      {"--dspark --vocab 1000 --rank 48 --weight-type q8_0", "--weight-type q8_0 but --rank = 48 is not a multiple of 32"},
      {"--dspark --vocab 1000 --target-vocab 2000 --placement sharded", "--placement sharded splits W1 by draft ids"},
      {"--dspark --vocab 1000 --threads 2000", "--threads"},
      {"--dspark --vocab 100 --shards 200", "--shards = 200 is more than the vocabulary has tokens (V = 100)"},
  };
  for (const auto& c : bad) {
    const CliRun r = dfsel_cmd(c.first);
    EXPECT_EQ(r.signal, 0) << c.first << ":\n" << r.output;
    EXPECT_EQ(r.status, 2) << c.first << ":\n" << r.output;
    EXPECT_NE(r.output.find(c.second), std::string::npos) << c.first << ":\n" << r.output;
    EXPECT_EQ(r.output.find("config."), std::string::npos) << c.first << ":\n" << r.output;
  }
  const CliRun r = dfsel_cmd("--dspark --vocab 2000000000 --blocks 1000");
  EXPECT_EQ(r.signal, 0) << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("needs about"), std::string::npos) << r.output;
}

// --placement sharded splits W1 by draft ids, so it needs no d2t map: a map, the draft's or the
// random one a --target-vocab larger than --vocab makes, conflicts with the flag, which is the
// request's fault (exit 2) and named with the reason. The draft's map once exited 1 with a message
// about the file; --target-vocab named the C API's fields and said "d2t is given".
TEST(ToolDSpark, ShardedPlacementBesideAD2tMapNamesTheFlag) {
  const std::string path = testing::TempDir() + "dfsel_dspark_sharded_d2t.gguf";
  const CliRun w = write_draft("--dspark " + path + " --vocab 3000 --target-vocab 5000 --rank 64");
  ASSERT_EQ(w.status, 0) << w.output;
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"--gguf " + path + " --placement sharded --shards 2 --steps 1",
       {"--placement sharded", "d2t", path + " maps its draft ids to target ids"}},
      {"--dspark --vocab 1000 --target-vocab 2000 --placement sharded --steps 1",
       {"--placement sharded", "--target-vocab 2000 is larger than --vocab 1000"}},
  };
  for (const auto& [args, needles] : cases) {
    const CliRun r = dfsel_cmd(args);
    EXPECT_EQ(r.status, 2) << args << ":\n" << r.output;
    for (const std::string& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << args << ":\n" << r.output;
    EXPECT_EQ(r.output.find("placement = SHARDED"), std::string::npos) << args << ":\n" << r.output;
    EXPECT_EQ(r.output.find("d2t is given"), std::string::npos) << args << ":\n" << r.output;
  }
  // Replicated, the same draft runs.
  const CliRun ok = dfsel_cmd("--gguf " + path + " --shards 2 --steps 1");
  EXPECT_EQ(ok.status, 0) << ok.output;
  std::remove(path.c_str());
}

// One range per flag, the library's: --n-draft 0 once named [1, 2147483647] and --n-draft 2000
// [1, 1024]; a subnormal --temperature, which the library documents as sampling's greedy limit,
// was refused as below the smallest normal float. In both modes it runs.
TEST(ToolDSpark, FlagsTakeTheLibrarysRanges) {
  for (const char* n : {"0", "2000"}) {
    const CliRun r = dfsel_cmd(std::string("--dspark --vocab 1000 --n-draft ") + n);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(std::string("--n-draft = ") + n + " is outside [1, 1024]"), std::string::npos) << r.output;
  }
  const CliRun dspark = dfsel_cmd("--dspark --vocab 1000 --rank 64 --blocks 2 --temperature 1e-40 --steps 1");
  EXPECT_EQ(dspark.status, 0) << dspark.output;
  EXPECT_EQ(blocks_printed(dspark.output), 2) << dspark.output;
  const CliRun dflash2 = dfsel_cmd("--backend cpu --vocab 1000 --embd 64 --rank 32 --top-k 4 --temperature 1e-40 --steps 1");
  EXPECT_EQ(dflash2.status, 0) << dflash2.output;
  const CliRun zero = dfsel_cmd("--dspark --vocab 1000 --temperature 1e-50");
  EXPECT_EQ(zero.status, 2) << zero.output;
  EXPECT_NE(zero.output.find("--temperature = 1e-50 is below the smallest positive float"), std::string::npos)
      << zero.output;
}

// Overwrites F32 element i of tensor `name` of the draft at path with v.
void set_f32(const std::string& path, const char* name, int64_t i, float v) {
  dfsel_gguf* g = nullptr;
  char msg[256] = "";
  ASSERT_EQ(dfsel_gguf_open(path.c_str(), -1, -1, &g, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  int64_t n = 0;
  uint64_t at = 0;
  dfsel_gguf_tensor_count(g, &n);
  for (int64_t t = 0; t < n; ++t) {
    dfsel_gguf_tensor_desc d{};
    if (dfsel_gguf_tensor_info(g, t, &d) == DFSEL_SUCCESS && std::strcmp(d.name, name) == 0) at = d.file_offset + 4 * i;
  }
  dfsel_gguf_close(g);
  ASSERT_NE(at, 0u) << name;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp((std::streamoff)at);
  f.write(reinterpret_cast<const char*>(&v), 4);
  ASSERT_TRUE(f.good());
}

// A value of the draft that the library refuses is the file's fault like any other defect of it:
// exit 1 and a message naming the file and the tensor (a NaN scale, an infinite bias once exited
// 2 and named the C API's field, as if a flag were wrong).
TEST(ToolDSpark, ADraftsNonFiniteValuesNameTheFile) {
  const std::string path = testing::TempDir() + "dfsel_dspark_nonfinite.gguf";
  const std::pair<const char*, const char*> cases[] = {{"markov_w2.scale", "markov_w2.scale[3] = nan"},
                                                       {"conf_proj.bias", "conf_proj.bias = inf"}};
  for (const auto& c : cases) {
    const CliRun w = write_draft("--dspark " + path + " --vocab 300 --rank 32 --embd 32 --scale 2 --conf-bias");
    ASSERT_EQ(w.status, 0) << w.output;
    set_f32(path, c.first, c.first[0] == 'm' ? 3 : 0, c.first[0] == 'm' ? NAN : INFINITY);
    const CliRun r = dfsel_cmd("--gguf " + path + " --steps 1");
    EXPECT_EQ(r.status, 1) << c.first << ":\n" << r.output;
    EXPECT_NE(r.output.find(path + ": " + c.second), std::string::npos) << c.first << ":\n" << r.output;
  }
  std::remove(path.c_str());
}

TEST(ToolDSpark, WriteDraftRefusesDraftsTheReaderRejects) {
  const std::string out = testing::TempDir() + "dfsel_dspark_refused.gguf";
  const std::pair<const char*, const char*> cases[] = {
      {"--vocab 100 --target-vocab 50", "--target-vocab is smaller than --vocab"},
      {"--rank 48 --w2-type q8_0", "--rank is not a whole number of --w2-type blocks"},
      {"--rank 64 --embd 64 --conf-type q6_k", "--embd + --rank is not a whole number"},
      {"--block 1 --no-anchor-drafting", "leaves no drafted position"},
      {"--vocab 1e3", "--vocab takes a whole number, not '1e3'"},
      {"--vocab 5000000000", "--vocab = 5000000000 is outside [1, 2147483647]"},
      {"--seed -1", "--seed takes a whole number >= 0"},
      {"--scale 3", "--scale = 3 is outside [0, 2]"},
      {"--w1-type iq4_nl", "--w1-type is f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k, "
                           "not 'iq4_nl'"},
      {"--vocab", "--vocab needs a value"},
      // Written, then judged by the reader and the library as dfsel would, and removed.
      {"--vocab 64 --rank 2048", "not written: dfsel would refuse this draft: --rank = 2048 must be in [1, 1024]"},
  };
  for (const auto& c : cases) {
    std::remove(out.c_str());
    const CliRun r = write_draft("--dspark " + out + " " + c.first);
    EXPECT_EQ(r.status, 2) << c.first << ": " << r.output;
    EXPECT_NE(r.output.find(c.second), std::string::npos) << c.first << ": " << r.output;
    EXPECT_NE(access(out.c_str(), F_OK), 0) << c.first << ": a refused draft was left on disk";
  }
}

// --dspark picks the DSpark writer and comes first; after the file it once read "unknown option
// --dspark", which does not say where it goes.
TEST(ToolDSpark, WriteDraftSaysWhereDSparkGoes) {
  const std::string out = testing::TempDir() + "dfsel_dspark_order.gguf";
  std::remove(out.c_str());
  const CliRun r = write_draft(out + " --dspark --vocab 300 --rank 32");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--dspark goes first, before the output file: dfsel_write_draft --dspark " + out),
            std::string::npos)
      << r.output;
  EXPECT_NE(access(out.c_str(), F_OK), 0) << "a refused draft was left on disk";
}

TEST(ToolDSpark, OptionsParseWhole) {
  dfsel::tools::DSparkOptions o;
  std::string err;
  std::vector<const char*> args = {"dfsel", "--dspark", "--vocab", "5000", "--n-draft", "3", "--seed", "9", "--threads", "2"};
  ASSERT_TRUE(dfsel::tools::parse_dspark_options((int)args.size(), args.data(), &o, &err)) << err;
  EXPECT_EQ(o.problem.vocab, 5000);
  EXPECT_EQ(o.problem.n_draft, 3);
  EXPECT_EQ(o.problem.seed, 9u);
  EXPECT_EQ(o.problem.threads, 2);
}

// The DSpark mode parses its command line by the DFlash2 mode's rules (parse_command_line):
// whole numbers, a value for every flag, a file name for --gguf and no draft sizes beside it.
TEST(ToolDSpark, OptionsAreRefusedByTheCommandsRules) {
  const std::pair<std::vector<const char*>, const char*> cases[] = {
      {{"--rank", "1e3"}, "--rank takes a whole number, not '1e3'"},
      {{"--temperature", "0,8"}, "--temperature"},
      {{"--vocab", "--steps", "1"}, "--vocab needs a value"},
      {{"--seed", "-1"}, "--seed takes a whole number >= 0"},
      {{"--p-min", "1.5"}, "--p-min = 1.5 is outside [0, 1]"},
      {{"--shards", "0"}, "--shards = 0"},
      {{"blocks"}, "unexpected argument 'blocks'"},
      {{"--gguf", ""}, "--gguf needs a file name"},
      {{"--gguf", "d.gguf", "--n-draft", "4"}, "--n-draft cannot be combined with --gguf"},
  };
  for (const auto& c : cases) {
    std::vector<const char*> args = {"dfsel", "--dspark"};
    args.insert(args.end(), c.first.begin(), c.first.end());
    dfsel::tools::DSparkOptions o;
    std::string err;
    EXPECT_FALSE(dfsel::tools::parse_dspark_options((int)args.size(), args.data(), &o, &err)) << c.second;
    EXPECT_NE(err.find(c.second), std::string::npos) << err;
  }
}

// --flag=value is --flag value, in both modes.
TEST(ToolDSpark, FlagsTakeTheirValueAfterAnEqualsSign) {
  dfsel::tools::DSparkOptions o;
  std::string err;
  std::vector<const char*> args = {"dfsel", "--dspark", "--vocab=100", "--n-draft=3", "--gguf=", "x"};
  EXPECT_FALSE(dfsel::tools::parse_dspark_options((int)args.size(), args.data(), &o, &err));
  EXPECT_NE(err.find("--gguf needs a file name"), std::string::npos) << err;
  args.resize(4);
  ASSERT_TRUE(dfsel::tools::parse_dspark_options((int)args.size(), args.data(), &o, &err)) << err;
  EXPECT_EQ(o.problem.vocab, 100);
  EXPECT_EQ(o.problem.n_draft, 3);
  const CliRun r = dfsel_cmd("--dspark --vocab=1000 --rank=64 --steps=1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("V=1000 V_target=1000 R=64"), std::string::npos) << r.output;
  const CliRun d = dfsel_cmd("--vocab=1000 --embd=64 --rank=32 --top-k=4 --steps=1");
  EXPECT_EQ(d.status, 0) << d.output;
  const CliRun bad = dfsel_cmd("--dspark --vocab=12x");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--vocab takes a whole number"), std::string::npos) << bad.output;
}

// Requests the flags alone make invalid are refused with the flag named, before the synthetic
// weights are made: at the default sizes those take most of a second.
TEST(ToolDSpark, FlagRefusalsNameTheFlagAndComeFirst) {
  const std::pair<const char*, const char*> bad[] = {
      {"--dspark --target-vocab 10", "--target-vocab 10 is smaller than --vocab 163840"},
      {"--dspark --p-min 0.5", "--p-min = 0.5 needs a confidence head"},
      {"--dspark --dtype F16", "--dtype is f32, f16 or bf16, not F16"},
      {"--dtype F16", "--dtype is f32, f16 or bf16, not F16"},
      {"--codebook-type q4", "--codebook-type is f32, f16, bf16 or q8_0, not q4"},
      {"--placement both", "--placement is replicated or sharded, not both"},
  };
  for (const auto& c : bad) {
    const auto t0 = std::chrono::steady_clock::now();
    const CliRun r = dfsel_cmd(c.first);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 2) << c.first << ":\n" << r.output;
    EXPECT_NE(r.output.find(c.second), std::string::npos) << c.first << ":\n" << r.output;
    EXPECT_EQ(r.output.find("d2t is NULL"), std::string::npos) << c.first << ":\n" << r.output;
    EXPECT_LT(s, 0.5) << c.first << ": refused after " << s << " s";
  }
}

}  // namespace
