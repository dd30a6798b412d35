// What the GPU tests share: the skip where there is no CUDA, and running the binary and reading the training
// losses it recorded (`cabert inspect --json` of a metrics.cabert).
#pragma once

#include <c10/core/Device.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/build_info.h"
#include "lib/core/errors.h"
#include "tests/test_paths.h"

// The first line of every test of a CUDA path: it skips where the build has no CUDA kernels or the machine no
// CUDA device (so `ctest -L gpu` reports them skipped, not passed, on the CPU machines).
#define CABERT_REQUIRE_CUDA()                                                                \
  do {                                                                                       \
    if (!::cabert::kernels::built_with_cuda()) GTEST_SKIP() << "built without CUDA kernels"; \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";                      \
  } while (false)

namespace cabert::testing {

inline c10::Device cuda0() { return c10::Device(c10::kCUDA, 0); }

// Runs a shell command through run_command (tests/test_paths.h: in a subshell, so a redirection of its own, as in
// "paste a b | head > dev.tsv", keeps its file); a failure (with the error output) when it fails.
inline ::testing::AssertionResult runs(const std::string& command) {
  const CommandResult result = run_command(command);
  if (result.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << command << "\n" << result.err;
}

inline std::vector<std::string> lines_of(const std::string& path) {
  std::istringstream text(read_text(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

// The (step, loss) of every training record of a metrics file, in order: pre-training's records of phase
// "train" (key "loss"), fine-tuning's of kind "TRAIN" (key "train_loss"). Empty when inspect fails.
inline std::vector<std::pair<int64_t, double>> train_losses(const std::string& metrics) {
  std::vector<std::pair<int64_t, double>> losses;
  const CommandResult inspect = run_command(str(CABERT_BINARY, " inspect --json --limit -1 ", metrics));
  if (inspect.exit_code != 0) return losses;
  const std::string step_key = "\"step\":\"";
  std::istringstream text(inspect.out);
  for (std::string line; std::getline(text, line);) {
    for (const auto& [record, key] : {std::pair<std::string, std::string>{"\"phase\":\"train\"", "\"loss\":"},
                                      {"\"kind\":\"TRAIN\"", "\"train_loss\":"}}) {
      const size_t at = line.find(key), step = line.find(step_key);
      if (line.find(record) != std::string::npos && at != std::string::npos && step != std::string::npos) {
        losses.emplace_back(std::stoll(line.substr(step + step_key.size())), std::stod(line.substr(at + key.size())));
      }
    }
  }
  return losses;
}

}  // namespace cabert::testing
