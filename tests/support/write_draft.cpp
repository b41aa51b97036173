// dfsel_write_draft: writes a valid DFlash2 draft (GGUF) with the fixture writer, for the CI
// run of `dfsel --gguf` at realistic size and for the fuzzer's seed corpus (DSpark drafts:
// dfsel_write_draft --dspark OUT ..., write_dspark_draft.cpp).
//   dfsel_write_draft OUT [--vocab V] [--rank R] [--embd E] [--top-k K] [--block B]
//                         [--codebook-type T] [--hidden-type T] [--version 2|3]
//                         [--alignment A] [--logit-scale M] [--softcap C] [--seed S]
//                         [--row-period P] [--every-value-type] [--other-tensors]
// T is f32, f16, bf16, q8_0, q4_k or q6_k. --row-period P repeats codebook rows with period P,
// which makes drafts of a large vocabulary quick to write.
//
// fuzz/corpus/gguf/ was written with:
//   f16.gguf          --vocab 64 --rank 32 --embd 32
//   bf16_v2.gguf      --vocab 48 --rank 16 --embd 24 --codebook-type bf16 --hidden-type bf16 --version 2
//   q8_0.gguf         --vocab 40 --rank 32 --embd 32 --codebook-type q8_0 --hidden-type q8_0 --softcap 30
//   f32_align1.gguf   --vocab 24 --rank 8 --embd 24 --codebook-type f32 --hidden-type f32 --alignment 1
//   q4_k.gguf         --vocab 8 --rank 256 --embd 8 --codebook-type q4_k --top-k 2 --block 4
//   q6_k.gguf         --vocab 8 --rank 256 --embd 4 --codebook-type q6_k --top-k 3 --block 3
//   metadata.gguf     --vocab 16 --rank 8 --embd 20 --every-value-type --other-tensors --logit-scale 0.5
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/gguf_writer.h"

namespace {

bool parse_type(const std::string& s, dfsel_type* t) {
  static const struct {
    const char* name;
    dfsel_type type;
  } kTypes[] = {{"f32", DFSEL_TYPE_F32},   {"f16", DFSEL_TYPE_F16},   {"bf16", DFSEL_TYPE_BF16},
                {"q8_0", DFSEL_TYPE_Q8_0}, {"q4_k", DFSEL_TYPE_Q4_K}, {"q6_k", DFSEL_TYPE_Q6_K}};
  for (const auto& k : kTypes)
    if (s == k.name) {
      *t = k.type;
      return true;
    }
  return false;
}

int usage() {
  std::fprintf(stderr,
               "usage: dfsel_write_draft OUT [--vocab V] [--rank R] [--embd E] [--top-k K] [--block B]\n"
               "       [--codebook-type T] [--hidden-type T] [--version 2|3] [--alignment A]\n"
               "       [--logit-scale M] [--softcap C] [--seed S] [--row-period P]\n"
               "       [--every-value-type] [--other-tensors]\n"
               "T: f32, f16, bf16, q8_0, q4_k, q6_k\n");
  return 2;
}

}  // namespace

int write_dspark_draft_main(int argc, char** argv);  // write_dspark_draft.cpp

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--dspark") return write_dspark_draft_main(argc - 1, argv + 1);
  if (argc < 2 || argv[1][0] == '-') return usage();
  const std::string out = argv[1];
  dfsel::test::DraftOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--every-value-type") {
      o.every_value_type = true;
      continue;
    }
    if (a == "--other-tensors") {
      o.other_tensors = true;
      continue;
    }
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    char* end = nullptr;
    const double num = std::strtod(v.c_str(), &end);
    const bool is_num = end != v.c_str() && *end == '\0';
    if (a == "--codebook-type" || a == "--hidden-type") {
      if (!parse_type(v, a == "--codebook-type" ? &o.codebook_type : &o.hidden_type)) return usage();
      continue;
    }
    if (!is_num) return usage();
    if (a == "--vocab") o.n_vocab = int64_t(num);
    else if (a == "--rank") o.rank = int64_t(num);
    else if (a == "--embd") o.n_embd = int64_t(num);
    else if (a == "--top-k") o.top_k = int64_t(num);
    else if (a == "--block") o.block_size = int64_t(num);
    else if (a == "--version") o.version = uint32_t(num);
    else if (a == "--alignment") o.alignment = uint32_t(num);
    else if (a == "--logit-scale") o.logit_scale = float(num);
    else if (a == "--softcap") o.softcap = float(num);
    else if (a == "--seed") o.seed = uint64_t(num);
    else if (a == "--row-period") o.row_period = int64_t(num);
    else return usage();
  }
  if (o.n_vocab < 1 || o.rank < 1 || o.n_embd < 1 || o.top_k < 1 || o.block_size < 2) {
    std::fprintf(stderr, "dfsel_write_draft: sizes must be positive and --block at least 2\n");
    return 2;
  }
  // What the reader would refuse is refused here, rather than written.
  if (o.top_k > o.n_vocab) {
    std::fprintf(stderr, "dfsel_write_draft: --top-k %lld is larger than --vocab %lld\n", (long long)o.top_k,
                 (long long)o.n_vocab);
    return 2;
  }
  const struct {
    const char* flag;
    dfsel_type type;
    const char* axis;
    int64_t n;
  } kRows[] = {{"--codebook-type", o.codebook_type, "--rank", o.rank}, {"--hidden-type", o.hidden_type, "--embd", o.n_embd}};
  for (const auto& r : kRows) {
    const int64_t block = r.type == DFSEL_TYPE_Q8_0 ? 32 : (r.type == DFSEL_TYPE_Q4_K || r.type == DFSEL_TYPE_Q6_K) ? 256 : 1;
    if (r.n % block != 0) {
      std::fprintf(stderr, "dfsel_write_draft: %s %s needs %s to be a multiple of %lld, not %lld\n", r.flag,
                   dfsel_type_name(r.type), r.axis, (long long)block, (long long)r.n);
      return 2;
    }
  }
  const dfsel::test::Draft d = dfsel::test::make_draft(o);
  if (!dfsel::test::write_file(out, d.bytes)) {
    std::fprintf(stderr, "dfsel_write_draft: cannot write %s\n", out.c_str());
    return 1;
  }
  std::printf("%s: %zu bytes, V = %lld, R = %lld, n_embd = %lld\n", out.c_str(), d.bytes.size(),
              (long long)o.n_vocab, (long long)o.rank, (long long)o.n_embd);
  return 0;
}
