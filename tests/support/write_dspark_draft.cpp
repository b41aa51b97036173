// dfsel_write_draft --dspark OUT [options]: a valid DSpark draft (GGUF) written by the fixture
// writer (support/dspark_draft.h), for `dfsel --gguf` on a DSpark draft (CI runs one of
// realistic size) and the fuzzer's DSpark seeds. Every number is parsed whole; what the loader
// would refuse is refused here.
//
// fuzz/corpus/gguf/ DSpark seeds were written with:
//   dspark_f16.gguf             --vocab 40 --target-vocab 60 --rank 32 --embd 16 --w1-type f16 --w2-type f16
//                               --conf-type f16 --scale 2 --conf-bias --block 4
//   dspark_q8_0_anchor_row.gguf --vocab 32 --rank 32 --w1-type q8_0 --w2-type q8_0 --scale 1 --block 5
//                               --no-anchor-drafting
//   dspark_q4_k.gguf            --vocab 8 --rank 256 --w1-type bf16 --w2-type q4_k --embd 256 --conf-type q6_k
//                               --block 3 --d2t-i32 --target-vocab 12
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/dspark_draft.h"
#include "support/gguf_writer.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: dfsel_write_draft --dspark OUT [--vocab V] [--target-vocab V] [--rank R] [--embd E]\n"
               "       [--block B] [--no-anchor-drafting] [--w1-type T] [--w2-type T] [--conf-type T]\n"
               "       [--scale 0|1|2] [--conf-bias] [--d2t-i32] [--version 2|3] [--seed S] [--row-period P]\n"
               "T: f32, f16, bf16, q8_0, q4_k, q6_k. --target-vocab larger than --vocab writes a d2t map;\n"
               "--embd E > 0 a confidence head; --scale 1 one markov_w2.scale, 2 one per row.\n");
  return 2;
}

bool whole(const char* v, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno == ERANGE || x < lo || x > hi) return false;
  *out = x;
  return true;
}

// A type by the lower-case form of the library's own name ("bf16", "q4_k").
bool type_of(const std::string& s, dfsel_type* t) {
  for (dfsel_type x : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0, DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q6_K}) {
    std::string name = dfsel_type_name(x);
    for (char& ch : name) ch = (char)std::tolower((unsigned char)ch);
    if (s == name) return *t = x, true;
  }
  return false;
}

int64_t block_of(dfsel_type t) { return t == DFSEL_TYPE_Q8_0 ? 32 : (t == DFSEL_TYPE_Q4_K || t == DFSEL_TYPE_Q6_K) ? 256 : 1; }

}  // namespace

// argv[0] is "--dspark", argv[1] the output file.
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
    else if (i + 1 >= argc) return usage();
    else {
      const char* v = argv[++i];
      long long n = 0;
      bool ok = true;
      if (a == "--w1-type") ok = type_of(v, &o.w1_type);
      else if (a == "--w2-type") ok = type_of(v, &o.w2_type);
      else if (a == "--conf-type") ok = type_of(v, &o.conf_type);
      else if (a == "--vocab") ok = whole(v, 1, INT32_MAX, &n), o.n_vocab = n;
      else if (a == "--target-vocab") ok = whole(v, 1, INT32_MAX, &n), o.n_target_vocab = n;
      else if (a == "--rank") ok = whole(v, 1, 1 << 20, &n), o.rank = n;
      else if (a == "--embd") ok = whole(v, 0, INT32_MAX, &n), o.n_embd = n;
      else if (a == "--block") ok = whole(v, 1, INT32_MAX, &n), o.block_size = n;
      else if (a == "--scale") ok = whole(v, 0, 2, &n), o.scale = (int)n;
      else if (a == "--version") ok = whole(v, 2, 3, &n), o.version = (uint32_t)n;
      else if (a == "--seed") ok = whole(v, 0, INT64_MAX, &n), o.seed = (uint64_t)n;
      else if (a == "--row-period") ok = whole(v, 0, INT32_MAX, &n), o.row_period = n;
      else return usage();
      if (!ok) {
        std::fprintf(stderr, "dfsel_write_draft: %s %s is not a valid value\n", a.c_str(), v);
        return 2;
      }
    }
  }
  o.d2t = o.n_target_vocab > o.n_vocab;
  const struct {
    const char* what;
    bool bad;
  } refusals[] = {
      {"--target-vocab is smaller than --vocab", o.n_target_vocab != 0 && o.n_target_vocab < o.n_vocab},
      {"--rank is not a whole number of --w1-type blocks", o.rank % block_of(o.w1_type) != 0},
      {"--rank is not a whole number of --w2-type blocks", o.rank % block_of(o.w2_type) != 0},
      {"--embd + --rank is not a whole number of --conf-type blocks", o.n_embd > 0 && (o.n_embd + o.rank) % block_of(o.conf_type) != 0},
      {"--block 1 with --no-anchor-drafting leaves no drafted position", o.sample_from_anchor && !*o.sample_from_anchor && o.block_size < 2},
  };
  for (const auto& r : refusals)
    if (r.bad) {
      std::fprintf(stderr, "dfsel_write_draft: %s\n", r.what);
      return 2;
    }
  if (!dfsel::test::write_file(argv[1], dfsel::test::make_dspark_draft(o))) {
    std::fprintf(stderr, "dfsel_write_draft: cannot write %s\n", argv[1]);
    return 1;
  }
  std::printf("%s: DSpark draft, V = %lld, V_target = %lld, R = %lld, n_embd = %lld\n", argv[1], (long long)o.n_vocab,
              (long long)(o.d2t ? o.n_target_vocab : o.n_vocab), (long long)o.rank, (long long)o.n_embd);
  return 0;
}
