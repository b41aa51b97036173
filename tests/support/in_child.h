// Runs a piece of a test in a fork()ed child, with a bounded wait: a child that hangs is killed
// by its own alarm, so that a regression fails the test instead of stopping the suite.
#pragma once

#include <functional>
#include <string>

namespace dfsel::test {

// Runs body() in a child, which reports what body returns ("" when every check passed) and
// leaves with _exit (no static destructor, no leak check: the child's state is the parent's
// copy). Returns "" when the child reported "" and exited; else what it reported, or how it
// ended (killed by its alarm after `seconds`: a hang).
std::string run_in_child(const std::function<std::string()>& body, unsigned seconds = 30);

// run_in_child over n children at once, each body(i); the reports of those that failed.
std::string run_in_children(int n, const std::function<std::string(int)>& body, unsigned seconds = 30);

}  // namespace dfsel::test
