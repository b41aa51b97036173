// dfsel_write_draft: writes a valid DFlash2 draft (GGUF) with the fixture writer, for the CI
// run of `dfsel --gguf` at realistic size and for the fuzzer's seed corpus (DSpark drafts:
// dfsel_write_draft --dspark OUT ..., write_dspark_draft.cpp).
//   dfsel_write_draft OUT [--vocab V] [--rank R] [--embd E] [--top-k K] [--block B]
//                         [--codebook-type T] [--hidden-type T] [--version 2|3]
//                         [--alignment A] [--logit-scale M] [--softcap C] [--seed S]
//                         [--row-period P] [--every-value-type] [--other-tensors]
// T is f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k. --row-period P
// repeats codebook rows with period P, which makes drafts of a large vocabulary quick to write.
//
// fuzz/corpus/gguf/ was written with:
//   f16.gguf          --vocab 64 --rank 32 --embd 32
//   bf16_v2.gguf      --vocab 48 --rank 16 --embd 24 --codebook-type bf16 --hidden-type bf16 --version 2
//   q8_0.gguf         --vocab 40 --rank 32 --embd 32 --codebook-type q8_0 --hidden-type q8_0 --softcap 30
//   f32_align1.gguf   --vocab 24 --rank 8 --embd 24 --codebook-type f32 --hidden-type f32 --alignment 1
//   q4_k.gguf         --vocab 8 --rank 256 --embd 8 --codebook-type q4_k --top-k 2 --block 4
//   q6_k.gguf         --vocab 8 --rank 256 --embd 4 --codebook-type q6_k --top-k 3 --block 3
//   q4_1.gguf         --vocab 24 --rank 32 --embd 32 --codebook-type q4_1 --hidden-type q5_0
//   q3_k.gguf         --vocab 8 --rank 256 --embd 8 --codebook-type q3_k --top-k 2 --block 4
//   metadata.gguf     --vocab 16 --rank 8 --embd 20 --every-value-type --other-tensors --logit-scale 0.5
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "support/gguf_writer.h"
#include "support/write_draft_rules.h"
#include "tools/parse_number.h"

namespace {

using dfsel::test::refuse_draft;

int usage() {
  std::fprintf(stderr,
               "usage: dfsel_write_draft OUT [--vocab V] [--rank R] [--embd E] [--top-k K] [--block B]\n"
               "       [--codebook-type T] [--hidden-type T] [--version 2|3] [--alignment A]\n"
               "       [--logit-scale M] [--softcap C] [--seed S] [--row-period P]\n"
               "       [--every-value-type] [--other-tensors]\n"
               "       dfsel_write_draft --dspark OUT ...   (a DSpark draft; --dspark first)\n"
               "T: %s\n",
               dfsel::test::kDraftTypes);
  return 2;
}

// One flag with a value into o; false with err set.
bool parse_flag(const std::string& a, const char* v, dfsel::test::DraftOptions* o, std::string* err) {
  using dfsel::tools::parse_float;
  using dfsel::tools::parse_int;
  constexpr long long kI32 = INT32_MAX;
  long long n = 0;
  bool ok = true;
  if (a == "--codebook-type" || a == "--hidden-type") {
    if (dfsel::test::parse_draft_type(v, a == "--codebook-type" ? &o->codebook_type : &o->hidden_type)) return true;
    *err = dfsel::test::draft_type_error(a, v);
    return false;
  }
  if (a == "--vocab") ok = parse_int(a, v, 1, kI32, &n, err), o->n_vocab = n;
  else if (a == "--rank") ok = parse_int(a, v, 1, kI32, &n, err), o->rank = n;
  else if (a == "--embd") ok = parse_int(a, v, 1, kI32, &n, err), o->n_embd = n;
  else if (a == "--top-k") ok = parse_int(a, v, 1, kI32, &n, err), o->top_k = n;
  else if (a == "--block") ok = parse_int(a, v, 2, kI32, &n, err), o->block_size = n;
  else if (a == "--version") ok = parse_int(a, v, 0, UINT32_MAX, &n, err), o->version = uint32_t(n);
  // The writer pads every tensor to it: 0 divides by zero, and a huge one writes huge files.
  else if (a == "--alignment") ok = parse_int(a, v, 1, 1 << 20, &n, err), o->alignment = uint32_t(n);
  else if (a == "--row-period") ok = parse_int(a, v, 0, kI32, &n, err), o->row_period = n;
  else if (a == "--seed") ok = dfsel::tools::parse_u64(a, v, &o->seed, err);
  else if (a == "--logit-scale" || a == "--softcap") {
    float f = 0.0f;
    ok = parse_float(a, v, -3.4e38, 3.4e38, &f, err);
    (a == "--softcap" ? o->softcap : o->logit_scale) = f;
  } else {
    *err = "unknown option " + a;
    return false;
  }
  return ok;
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
    // It picks the other writer, so it must come before the file (and could not be a flag of
    // this one): say where it goes rather than call it unknown.
    if (a == "--dspark")
      return refuse_draft("--dspark goes first, before the output file: dfsel_write_draft --dspark " + out + " ...");
    if (i + 1 >= argc) return refuse_draft(a + " needs a value");
    std::string err;
    if (!parse_flag(a, argv[++i], &o, &err)) return refuse_draft(err);
  }
  // Refused here rather than written: rows that are not whole quant blocks (the writer cannot
  // lay them out) and K larger than V; the rest is judged by the reader once written.
  if (o.top_k > o.n_vocab)
    return refuse_draft("--top-k " + std::to_string(o.top_k) + " is larger than --vocab " + std::to_string(o.n_vocab));
  const struct {
    const char* flag;
    dfsel_type type;
    const char* axis;
    int64_t n;
  } kRows[] = {{"--codebook-type", o.codebook_type, "--rank", o.rank}, {"--hidden-type", o.hidden_type, "--embd", o.n_embd}};
  for (const auto& r : kRows) {
    const int64_t block = dfsel::test::quant_block(r.type);
    if (r.n % block != 0)
      return refuse_draft(std::string(r.flag) + " " + dfsel_type_name(r.type) + " needs " + r.axis + " to be a multiple of " +
                    std::to_string(block) + ", not " + std::to_string(r.n));
  }
  dfsel::test::Draft d;
  try {
    d = dfsel::test::make_draft(o);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dfsel_write_draft: a draft of --vocab %lld, --rank %lld, --embd %lld does not fit in memory\n",
                 (long long)o.n_vocab, (long long)o.rank, (long long)o.n_embd);
    return 1;
  }
  if (!dfsel::test::write_file(out, d.bytes)) {
    std::fprintf(stderr, "dfsel_write_draft: cannot write %s\n", out.c_str());
    return 1;
  }
  const std::string why = dfsel::test::judged_by_the_reader(out);
  if (!why.empty()) {
    std::remove(out.c_str());
    return refuse_draft("not written: dfsel would refuse this draft: " + why);
  }
  std::printf("%s: %zu bytes, V = %lld, R = %lld, n_embd = %lld\n", out.c_str(), d.bytes.size(),
              (long long)o.n_vocab, (long long)o.rank, (long long)o.n_embd);
  return 0;
}
