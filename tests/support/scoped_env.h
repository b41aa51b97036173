// An environment variable set for a scope: restored to unset when the scope ends, a failed
// assertion's early return included, so that no later test sees it.
#pragma once

#include <cstdlib>

namespace dfsel::test {

struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace dfsel::test
