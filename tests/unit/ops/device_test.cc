// The one --device parser: cpu, cuda, cuda:N; everything else refused with the accepted forms.
#include <gtest/gtest.h>

#include "lib/core/errors.h"
#include "lib/ops/device.h"

namespace cabert::ops {
namespace {

std::string usage_error(const std::string& name) {
  try {
    parse_device(name);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(ParseDevice, CpuIsTheCpu) { EXPECT_EQ(parse_device("cpu"), torch::Device(torch::kCPU)); }

TEST(ParseDevice, RefusesOtherNamesWithTheAcceptedForms) {
  for (const char* name : {"gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda:1:2", "cpu:0", ""}) {
    EXPECT_EQ(usage_error(name), std::string("--device: expected cpu, cuda or cuda:N, got '") + name + "'") << name;
  }
}

TEST(ParseDevice, CudaWithoutADeviceSaysSo) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  for (const char* name : {"cuda", "cuda:0", "cuda:3"}) {
    std::string message = usage_error(name);
    // A build without CUDA kernels says that; a CUDA build on a machine without a GPU says there is no device.
    const bool no_build = message.find("built without CUDA kernels") != std::string::npos;
    const bool no_device = message == std::string("--device ") + name + ": no CUDA device is available here";
    EXPECT_TRUE(no_build || no_device) << message;
  }
}

}  // namespace
}  // namespace cabert::ops
