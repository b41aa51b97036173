#include "support/in_child.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace dfsel::test {

namespace {

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of the pipe the child reports on
};

Child start(const std::function<std::string()>& body, unsigned seconds) {
  int p[2];
  if (pipe(p) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    alarm(seconds);  // SIGALRM's default action ends the child
    std::string report;
    try {
      report = body();
    } catch (...) {
      report = "the child's body threw";
    }
    const char* at = report.data();
    for (size_t left = report.size(); left > 0;) {
      const ssize_t w = write(p[1], at, left);
      if (w <= 0) break;
      at += w;
      left -= (size_t)w;
    }
    _exit(report.empty() ? 0 : 1);
  }
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    return {};
  }
  return {pid, p[0]};
}

std::string finish(const Child& c) {
  if (c.pid < 0) return "fork failed";
  std::string report;
  char buf[512];
  for (ssize_t r; (r = read(c.fd, buf, sizeof buf)) > 0;) report.append(buf, (size_t)r);
  close(c.fd);
  int st = 0;
  while (waitpid(c.pid, &st, 0) < 0) {
  }
  if (WIFSIGNALED(st))
    return "child killed by signal " + std::to_string(WTERMSIG(st)) +
           (WTERMSIG(st) == SIGALRM ? " (its alarm: it hung)" : "") + (report.empty() ? "" : ": " + report);
  if (WEXITSTATUS(st) != 0) return report.empty() ? "child exited " + std::to_string(WEXITSTATUS(st)) : report;
  return report;
}

}  // namespace

std::string run_in_child(const std::function<std::string()>& body, unsigned seconds) {
  return finish(start(body, seconds));
}

std::string run_in_children(int n, const std::function<std::string(int)>& body, unsigned seconds) {
  std::vector<Child> kids;
  for (int i = 0; i < n; ++i) kids.push_back(start([&body, i] { return body(i); }, seconds));
  std::string all;
  for (int i = 0; i < n; ++i) {
    const std::string r = finish(kids[i]);
    if (!r.empty()) all += "child " + std::to_string(i) + ": " + r + "\n";
  }
  return all;
}

}  // namespace dfsel::test
