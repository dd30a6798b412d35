// The grids the emulated CUDA kernel tests run (tests/kernels/*_emulated_test.cc): as large as on a GPU, and three
// blocks whose weight gradient takes T in one chunk, so that every block takes several tiles (the grid-stride
// loops) and every chunk several tiles of rows, which on a GPU only very large shapes do. A typed test suite over
// EmulatedLaunchers runs once per grid, named by EmulatedLauncherNames.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "tests/kernels/cuda_emulator.h"

namespace cabert::testing {

using GpuSizedGrid = cuda_emulator::EmulatedLauncher<>;
using ThreeBlocks = cuda_emulator::EmulatedLauncher<3, 1>;
using EmulatedLaunchers = ::testing::Types<GpuSizedGrid, ThreeBlocks>;
struct EmulatedLauncherNames {
  template <typename Launcher>
  static std::string GetName(int) {
    return std::is_same_v<Launcher, GpuSizedGrid> ? "GpuSizedGrid" : "ThreeBlocks";
  }
};

}  // namespace cabert::testing
