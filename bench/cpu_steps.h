// The timed loop of the CPU step benchmarks: set the runner up, then one step an iteration
// (the runner times nothing itself here; the benchmark's real time is the figure). A failure
// skips the benchmark with its reason.
#pragma once

#include <benchmark/benchmark.h>

#include <string>

template <class Runner, class Setup>
bool time_steps(benchmark::State& state, Runner& runner, Setup setup) {
  std::string err;
  if (!setup(&err)) {
    state.SkipWithError(err.c_str());
    return false;
  }
  double us = 0;
  for (auto _ : state) {
    if (!runner.step(&us, &err)) {
      state.SkipWithError(err.c_str());
      return false;
    }
  }
  return true;
}
