// The GGUF reader against inputs that must not hurt its caller: paths that are not regular
// files (a FIFO used to block the open forever), bytes that would reach a terminal (messages
// stay printable UTF-8), and a file truncated after it was opened (the copy-load keeps no
// mapping; the mapped open's SIGBUS is documented, and shown here).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "dfsel/gguf.h"
#include "host/gguf/gguf.h"
#include "host/gguf/gguf_format.h"
#include "support/gguf_writer.h"

namespace dfsel::test {
namespace {

// Whether s is well-formed UTF-8 without control characters (C0, DEL, C1).
bool printable_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = (uint8_t)s[i];
    if (c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (n == 0 || c > 0xf4 || i + n > s.size()) return false;
    uint32_t cp = c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      if (((uint8_t)s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | ((uint8_t)s[i + k] & 0x3f);
    }
    if (cp <= 0x9f || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) return false;
    i += n;
  }
  return true;
}

std::string open_message(const std::string& path, dfsel_status* st) {
  char msg[1024] = "";
  dfsel_gguf* g = nullptr;
  *st = dfsel_gguf_open(path.c_str(), -1, -1, &g, msg, sizeof msg);
  if (g) dfsel_gguf_close(g);
  return msg;
}

TEST(GgufInput, AFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string path = dir.file("f.gguf");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  // Opened for reading, a FIFO with no writer blocks: run the open apart and give it 5 s.
  auto done = std::async(std::launch::async, [&] {
    dfsel_status st;
    const std::string msg = open_message(path, &st);
    return std::make_pair(st, msg);
  });
  if (done.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Unblock the reader so that the test can end, then fail.
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL() << "dfsel_gguf_open on a FIFO did not return within 5 s";
  }
  const auto r = done.get();
  EXPECT_EQ(r.first, DFSEL_IO_ERROR);
  EXPECT_NE(r.second.find("a FIFO, not a regular file"), std::string::npos) << r.second;
}

TEST(GgufInput, MessagesEscapeBytesThatAreNotUTF8) {
  TempDir dir;
  const std::string path = dir.file("random.gguf");
  ASSERT_TRUE(write_file(path, {0xff, 0xfe, 0x9b, 0x41, 0x00, 0x00, 0x00, 0x00}));
  dfsel_status st;
  const std::string msg = open_message(path, &st);
  EXPECT_EQ(st, DFSEL_FORMAT_ERROR);
  EXPECT_TRUE(printable_utf8(msg)) << msg;
  EXPECT_NE(msg.find("\\xff\\xfe\\x9bA"), std::string::npos) << msg;
}

TEST(GgufInput, EscapedTextKeepsUTF8AndEscapesTheRest) {
  const std::pair<std::string, std::string> cases[] = {
      {"plain", "\"plain\""},
      {"caf\xc3\xa9", "\"caf\xc3\xa9\""},                      // é stays
      {"\xe2\x82\xac", "\"\xe2\x82\xac\""},                      // € stays
      {"\x1b[31m", "\"\\x1b[31m\""},                            // ESC
      {"\xc2\x9b" "1m", "\"\\xc2\\x9b1m\""},                    // C1 CSI
      {"\xc0\xaf", "\"\\xc0\\xaf\""},                          // overlong
      {"\xed\xa0\x80", "\"\\xed\\xa0\\x80\""},                 // surrogate
      {"\xe2\x82", "\"\\xe2\\x82\""},                          // truncated
  };
  for (const auto& c : cases) {
    std::string out;
    gguf::append_escaped(c.first, 64, &out);
    EXPECT_EQ(out, c.second);
    EXPECT_TRUE(printable_utf8(out)) << out;
  }
}

// Reads every byte of a view, so that a missing page shows.
uint64_t touch(const dfsel_tensor& t) {
  uint64_t sum = 0;
  const uint8_t* p = static_cast<const uint8_t*>(t.data);
  for (size_t i = 0; i < t.nb[1] * (size_t)t.ne[1]; ++i) sum += p[i];
  return sum;
}

uint64_t read_all(dfsel_gguf* g) {
  dfsel_tensor ep, en, wh;
  EXPECT_EQ(dfsel_gguf_tensors(g, &ep, &en, &wh), DFSEL_SUCCESS);
  int64_t n = 0;
  dfsel_gguf_metadata_count(g, &n);
  uint64_t sum = touch(ep) + touch(en) + touch(wh);
  for (int64_t i = 0; i < n; ++i) {
    char buf[128];
    dfsel_gguf_metadata_value_string(g, i, buf, sizeof buf);
    sum += (uint8_t)buf[0];
  }
  return sum;
}

DraftOptions big_enough() {
  DraftOptions o;
  o.n_vocab = 4096;  // a few pages of codebook rows past the header
  o.rank = 64;
  return o;
}

TEST(GgufInput, CopyLoadSurvivesTheFileBeingTruncated) {
  TempDir dir;
  const std::string path = dir.file("draft.gguf");
  ASSERT_TRUE(write_file(path, make_draft(big_enough()).bytes));
  dfsel_gguf* g = nullptr;
  char msg[512];
  ASSERT_EQ(dfsel_gguf_open_copy(path.c_str(), -1, -1, &g, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  const uint64_t before = read_all(g);
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  EXPECT_EQ(read_all(g), before);
  dfsel_config cfg;
  EXPECT_EQ(dfsel_gguf_config(g, &cfg), DFSEL_SUCCESS);
  EXPECT_EQ(cfg.n_vocab, 4096);
  dfsel_gguf_close(g);
}

TEST(GgufInput, CopyLoadGivesTheSameSelectorAsTheMappedOpen) {
  TempDir dir;
  const std::string path = dir.file("draft.gguf");
  DraftOptions o = big_enough();
  o.codebook_type = DFSEL_TYPE_Q8_0;
  ASSERT_TRUE(write_file(path, make_draft(o).bytes));
  dfsel_gguf *a = nullptr, *b = nullptr;
  ASSERT_EQ(dfsel_gguf_open(path.c_str(), 100, 2000, &a, nullptr, 0), DFSEL_SUCCESS);
  ASSERT_EQ(dfsel_gguf_open_copy(path.c_str(), 100, 2000, &b, nullptr, 0), DFSEL_SUCCESS);
  dfsel_tensor t[2][3];
  dfsel_gguf_tensors(a, &t[0][0], &t[0][1], &t[0][2]);
  dfsel_gguf_tensors(b, &t[1][0], &t[1][1], &t[1][2]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t[0][i].type, t[1][i].type);
    EXPECT_EQ(t[0][i].ne[1], t[1][i].ne[1]);
    EXPECT_NE(t[0][i].data, t[1][i].data);
    EXPECT_EQ(std::memcmp(t[0][i].data, t[1][i].data, t[0][i].nb[1] * (size_t)t[0][i].ne[1]), 0) << i;
  }
  dfsel_gguf_close(a);
  dfsel_gguf_close(b);
}

// What include/dfsel/gguf.h warns of: the mapped open reads the file where it lies.
TEST(GgufInputDeathTest, MappedOpenOfATruncatedFileRaisesSigbus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir dir;
  const std::string path = dir.file("draft.gguf");
  ASSERT_TRUE(write_file(path, make_draft(big_enough()).bytes));
  auto read_after_truncation = [&] {
    dfsel_gguf* g = nullptr;
    if (dfsel_gguf_open(path.c_str(), -1, -1, &g, nullptr, 0) != DFSEL_SUCCESS) std::_Exit(3);
    if (truncate(path.c_str(), 0) != 0) std::_Exit(4);
    dfsel_tensor ep, en, wh;
    dfsel_gguf_tensors(g, &ep, &en, &wh);
    volatile uint64_t sum = touch(en);
    (void)sum;
    std::_Exit(0);
  };
  // Under AddressSanitizer its own SIGBUS handler reports the fault and exits non-zero.
  auto died_of_the_fault = [](int st) {
    return (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
  };
  EXPECT_EXIT(read_after_truncation(), died_of_the_fault, "");
}

}  // namespace
}  // namespace dfsel::test
