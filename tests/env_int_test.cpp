// read_env_int, the reading of the environment variables that tune a CUDA plan: whole decimal
// integers in range, checked before narrowing, so that no value wraps to a valid int.
#include <gtest/gtest.h>

#include <string>

#include "host/backend/env_int.h"

namespace dfsel {
namespace {

// The value read and what follows it, or "refused".
std::string read(const char* s, long lo, long hi) {
  int v = -12345;
  const char* end = read_env_int(s, lo, hi, &v);
  return end ? std::to_string(v) + "|" + end : "refused";
}

TEST(EnvInt, ReadsIntegersInRangeAndWhatFollows) {
  EXPECT_EQ(read("8", 1, 16), "8|");
  EXPECT_EQ(read("16", 1, 16), "16|");
  EXPECT_EQ(read("+3", 1, 16), "3|");
  EXPECT_EQ(read("64x2", 16, 128), "64|x2");
  EXPECT_EQ(read("-2", -5, 5), "-2|");
}

TEST(EnvInt, RefusesWhatIsNotAnIntegerInRange) {
  for (const char* s : {"", " 8", "x", "-", "0", "17", "-8", "sixteen"}) EXPECT_EQ(read(s, 1, 16), "refused") << s;
  // Past an int, past a long, and values that an int conversion would wrap to 8 or 64.
  for (const char* s : {"4294967304", "4294967360", "-4294967288", "99999999999999999999999"})
    EXPECT_EQ(read(s, 1, 128), "refused") << s;
}

}  // namespace
}  // namespace dfsel
