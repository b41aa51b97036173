// An environment variable set for a scope: restored to what it was (unset, or the value the
// test run was started with) when the scope ends, a failed assertion's early return included,
// so that no later test sees it.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace dfsel::test {

struct ScopedEnv {
  const char* name;
  std::optional<std::string> before;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) before = v;
    setenv(n, value, 1);
  }
  ~ScopedEnv() {
    if (before) setenv(name, before->c_str(), 1);
    else unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace dfsel::test
