// dfsel_write_draft --dspark OUT [options]: a valid DSpark draft (GGUF) written by the fixture
// writer (support/dspark_draft.h), for `dfsel --gguf` on a DSpark draft (CI runs one of
// realistic size) and the fuzzer's DSpark seeds.
//
// fuzz/corpus/gguf/ DSpark seeds were written with:
//   dspark_f16.gguf             --vocab 40 --target-vocab 60 --rank 32 --embd 16 --w1-type f16 --w2-type f16
//                               --conf-type f16 --scale 2 --conf-bias --block 4
//   dspark_q8_0_anchor_row.gguf --vocab 32 --rank 32 --w1-type q8_0 --w2-type q8_0 --scale 1 --block 5
//                               --no-anchor-drafting
//   dspark_q4_k.gguf            --vocab 8 --rank 256 --w1-type bf16 --w2-type q4_k --embd 256 --conf-type q6_k
//                               --block 3 --d2t-i32 --target-vocab 12
//   dspark_q5_1.gguf            --vocab 16 --rank 96 --w1-type q5_1 --w2-type q4_0 --embd 32 --conf-type q5_0
//                               --block 4
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "support/dspark_draft.h"
#include "support/gguf_writer.h"
#include "support/write_draft_rules.h"
#include "tools/parse_number.h"

namespace {

using dfsel::test::quant_block;
using dfsel::test::refuse_draft;

int usage() {
  std::fprintf(stderr,
               "usage: dfsel_write_draft --dspark OUT [--vocab V] [--target-vocab V] [--rank R] [--embd E]\n"
               "       [--block B] [--no-anchor-drafting] [--w1-type T] [--w2-type T] [--conf-type T]\n"
               "       [--scale 0|1|2] [--conf-bias] [--d2t-i32] [--version 2|3] [--seed S] [--row-period P]\n"
               "T: %s. --target-vocab larger than --vocab writes a d2t map;\n"
               "--embd E > 0 a confidence head; --scale 1 one markov_w2.scale, 2 one per row.\n",
               dfsel::test::kDraftTypes);
  return 2;
}

// One flag with a value into o; false with err set.
bool parse_flag(const std::string& a, const char* v, dfsel::test::DSparkDraftOptions* o, std::string* err) {
  using dfsel::tools::parse_int;
  constexpr long long kI32 = INT32_MAX;
  if (a == "--w1-type" || a == "--w2-type" || a == "--conf-type") {
    dfsel_type* t = a == "--w1-type" ? &o->w1_type : a == "--w2-type" ? &o->w2_type : &o->conf_type;
    if (dfsel::test::parse_draft_type(v, t)) return true;
    *err = dfsel::test::draft_type_error(a, v);
    return false;
  }
  long long n = 0;
  bool ok = true;
  if (a == "--vocab") ok = parse_int(a, v, 1, kI32, &n, err), o->n_vocab = n;
  else if (a == "--target-vocab") ok = parse_int(a, v, 1, kI32, &n, err), o->n_target_vocab = n;
  else if (a == "--rank") ok = parse_int(a, v, 1, 1 << 20, &n, err), o->rank = n;
  else if (a == "--embd") ok = parse_int(a, v, 0, kI32, &n, err), o->n_embd = n;
  else if (a == "--block") ok = parse_int(a, v, 1, kI32, &n, err), o->block_size = n;
  else if (a == "--scale") ok = parse_int(a, v, 0, 2, &n, err), o->scale = (int)n;
  else if (a == "--version") ok = parse_int(a, v, 2, 3, &n, err), o->version = (uint32_t)n;
  else if (a == "--row-period") ok = parse_int(a, v, 0, kI32, &n, err), o->row_period = n;
  else if (a == "--seed") ok = dfsel::tools::parse_u64(a, v, &o->seed, err);
  else return *err = "unknown option " + a, false;
  return ok;
}

}  // namespace

// argv[0] is "--dspark", argv[1] the output file. Every number is parsed whole, as the DFlash2
// mode's are (tools/parse_number.h); what the reader or the library would refuse is not written.
int write_dspark_draft_main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage();
  dfsel::test::DSparkDraftOptions o;
  o.n_vocab = 1024;
  o.rank = 256;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-anchor-drafting") o.sample_from_anchor = false;
    else if (a == "--conf-bias") o.conf_bias = true;
    else if (a == "--d2t-i32") o.d2t_i32 = true;
    else if (i + 1 >= argc) return refuse_draft(a + " needs a value");
    else if (std::string err; !parse_flag(a, argv[++i], &o, &err)) return refuse_draft(err);
  }
  o.d2t = o.n_target_vocab > o.n_vocab;
  const struct {
    const char* what;
    bool bad;
  } refusals[] = {
      {"--target-vocab is smaller than --vocab", o.n_target_vocab != 0 && o.n_target_vocab < o.n_vocab},
      {"--rank is not a whole number of --w1-type blocks", o.rank % quant_block(o.w1_type) != 0},
      {"--rank is not a whole number of --w2-type blocks", o.rank % quant_block(o.w2_type) != 0},
      {"--embd + --rank is not a whole number of --conf-type blocks", o.n_embd > 0 && (o.n_embd + o.rank) % quant_block(o.conf_type) != 0},
      {"--block 1 with --no-anchor-drafting leaves no drafted position", o.sample_from_anchor && !*o.sample_from_anchor && o.block_size < 2},
  };
  for (const auto& r : refusals)
    if (r.bad) return refuse_draft(r.what);
  std::vector<uint8_t> bytes;
  try {
    bytes = dfsel::test::make_dspark_draft(o);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dfsel_write_draft: a draft of --vocab %lld, --target-vocab %lld, --rank %lld does not fit in memory\n",
                 (long long)o.n_vocab, (long long)o.n_target_vocab, (long long)o.rank);
    return 1;
  }
  if (!dfsel::test::write_file(argv[1], bytes)) {
    std::fprintf(stderr, "dfsel_write_draft: cannot write %s\n", argv[1]);
    return 1;
  }
  const std::string why = dfsel::test::judged_by_the_reader(argv[1]);
  if (!why.empty()) {
    std::remove(argv[1]);
    return refuse_draft("not written: dfsel would refuse this draft: " + why);
  }
  std::printf("%s: DSpark draft, V = %lld, V_target = %lld, R = %lld, n_embd = %lld\n", argv[1], (long long)o.n_vocab,
              (long long)(o.d2t ? o.n_target_vocab : o.n_vocab), (long long)o.rank, (long long)o.n_embd);
  return 0;
}
