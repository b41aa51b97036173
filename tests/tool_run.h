// Runs a command of the tool tests (the dfsel command, dfsel_write_draft) as a user would, under
// `timeout`, so that a hang fails rather than blocks: its exit status or signal and its output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace dfsel::test {

struct CliRun {
  int status = -1;  // exit status, or -1 when a signal ended it
  int signal = 0;
  std::string output;
};

inline CliRun run_command(const std::string& command, int timeout_s = 120) {
  CliRun r;
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " + command + " 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
  return r;
}

}  // namespace dfsel::test
