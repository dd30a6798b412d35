// The first line of every test of a CUDA path: it skips where the build has no CUDA kernels or the machine no
// CUDA device (so `ctest -L gpu` reports them skipped, not passed, on the CPU machines).
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "kernels/build_info.h"

#define CABERT_REQUIRE_CUDA()                                                                \
  do {                                                                                       \
    if (!::cabert::kernels::built_with_cuda()) GTEST_SKIP() << "built without CUDA kernels"; \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";                      \
  } while (false)
