// dfsel's broken-file fixtures read by both readers: every kind that ggml's gguf_init_from_file
// refuses, dfsel_gguf_open refuses too. dfsel refuses them all; which ones ggml takes is
// pinned, so that a change in either reader shows.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "dfsel/gguf.h"
#include "gguf_compare.h"
#include "support/gguf_writer.h"

namespace dfsel::test {
namespace {

bool ggml_accepts(const std::string& path) {
  ggml_context* data = nullptr;
  gguf_init_params p{};
  p.no_alloc = false;  // read the tensor data too
  p.ctx = &data;
  gguf_context* g = gguf_init_from_file(path.c_str(), p);
  if (g) gguf_free(g);
  if (data) ggml_free(data);
  return g != nullptr;
}

bool dfsel_accepts(const std::string& path, std::string* msg) {
  char buf[1024] = "";
  dfsel_gguf* g = nullptr;
  const dfsel_status s = dfsel_gguf_open(path.c_str(), -1, -1, &g, buf, sizeof buf);
  dfsel_gguf_close(g);
  *msg = buf;
  return s == DFSEL_SUCCESS;
}

TEST(GgufBrokenFiles, EveryKindGgmlRefusesDfselRefuses) {
  QuietGgmlLog quiet;
  TempDir dir;
  // Every kind that breaks the GGUF format itself ggml refuses too, but two: a bool stored as
  // 2 and a tensor of 0 dimensions, which ggml's reader takes (dfsel refuses them). The rest
  // are well-formed GGUF files that are not consistent DFlash2 drafts.
  const std::set<Defect> ggml_takes = {Defect::kBadBool, Defect::kNDims0};
  std::string ggml_accepted;
  int both = 0;
  for (int k = (int)Defect::kBadMagic; k <= (int)Defect::kSoftcapNotFinite; ++k) {
    const Defect defect = (Defect)k;
    DraftOptions o;
    o.codebook_type = DFSEL_TYPE_Q8_0;
    o.defect = defect;
    const std::string path = dir.file("broken" + std::to_string(k) + ".gguf");
    ASSERT_TRUE(write_file(path, make_draft(o).bytes));
    std::string msg;
    const bool g = ggml_accepts(path), d = dfsel_accepts(path, &msg);
    EXPECT_FALSE(d) << "defect " << k << ": dfsel accepted a broken draft";
    if (!d) EXPECT_FALSE(msg.empty()) << "defect " << k << ": refused without a message";
    if (defect <= Defect::kDuplicateTensor) {
      EXPECT_EQ(ggml_takes.count(defect) == 1, g) << "defect " << k << ": ggml's verdict changed";
    } else {
      EXPECT_TRUE(g) << "defect " << k << ": ggml refused a well-formed GGUF file";
    }
    if (g) ggml_accepted += " " + std::to_string(k);
    else ++both;
  }
  std::printf("refused by both readers: %d kinds; taken by ggml, refused by dfsel (kinds):%s\n", both,
              ggml_accepted.c_str());
}

TEST(GgufBrokenFiles, TruncatedFilesAreRefusedByBoth) {
  QuietGgmlLog quiet;
  TempDir dir;
  DraftOptions o;
  o.codebook_type = DFSEL_TYPE_F16;
  o.other_tensors = true;
  const Draft draft = make_draft(o);
  const GgufLayout& l = draft.layout;
  std::vector<size_t> cuts = {0, 3, 4, 8, l.kv_begin - 1, l.kv_begin + 3, l.infos_begin - 1, l.infos_begin + 5,
                              l.infos_end - 1, l.data_begin - 1, l.data_begin + 1, l.data_end - 1};
  for (size_t at : l.data_at) cuts.push_back(at + 1);
  int checked = 0;
  for (size_t n : cuts) {
    if (n >= draft.bytes.size()) continue;
    const std::string path = dir.file("cut" + std::to_string(n) + ".gguf");
    ASSERT_TRUE(write_file(path, draft.bytes, n));
    std::string msg;
    EXPECT_FALSE(ggml_accepts(path)) << "ggml accepted a draft cut to " << n << " bytes";
    EXPECT_FALSE(dfsel_accepts(path, &msg)) << "dfsel accepted a draft cut to " << n << " bytes";
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

// GGUF allows arrays of arrays; ggml's reader does not (it refuses value type 9 inside an
// array). dfsel reads them. Pinned here so that a change on either side shows.
TEST(GgufBrokenFiles, NestedArraysAreReadByDfselNotByGgml) {
  QuietGgmlLog quiet;
  TempDir dir;
  DraftOptions o;
  o.every_value_type = true;
  const std::string path = dir.file("nested.gguf");
  ASSERT_TRUE(write_file(path, make_draft(o).bytes));
  std::string msg;
  EXPECT_TRUE(dfsel_accepts(path, &msg)) << msg;
  EXPECT_FALSE(ggml_accepts(path));
}

}  // namespace
}  // namespace dfsel::test
