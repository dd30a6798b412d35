// The one --device parser: cpu, cuda, cuda:N; everything else refused with the accepted forms.
#include <gtest/gtest.h>

#include "lib/core/errors.h"
#include "lib/ops/device.h"

namespace cabert::ops {
namespace {

std::string usage_error(const std::string& name, torch::Device (*parse)(const std::string&) = parse_device) {
  try {
    parse(name);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(ParseDevice, CpuIsTheCpu) { EXPECT_EQ(parse_device("cpu"), torch::Device(torch::kCPU)); }

TEST(SelectDevice, CpuIsTheCpu) { EXPECT_EQ(select_device("cpu"), torch::Device(torch::kCPU)); }

TEST(ParseDevice, RefusesOtherNamesWithTheAcceptedForms) {
  for (const char* name : {"gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda:1:2", "cpu:0", ""}) {
    EXPECT_EQ(usage_error(name), std::string("--device: expected cpu, cuda or cuda:N, got '") + name + "'") << name;
    EXPECT_EQ(usage_error(name, select_device), usage_error(name)) << name;
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

// Several one-element tensors of any dtype read in one copy: the values a .item<double>() each would give.
TEST(IndexedDevice, KeepsTheCpuAndAnIndexAlreadySaid) {
  // (An unindexed CUDA device names the current device: a GPU machine's check, tests/gpu/bench_gpu_test.cc.)
  EXPECT_EQ(indexed_device(torch::kCPU), torch::Device(torch::kCPU));
  EXPECT_EQ(indexed_device(torch::Device(torch::kCUDA, 3)), torch::Device(torch::kCUDA, 3));
}

TEST(ReadScalars, GivesEachValueAsADouble) {
  const std::vector<double> values = read_scalars(
      {torch::tensor(true), torch::tensor({int64_t{7}}), torch::tensor(0.1f), torch::tensor(-2.5, torch::kDouble)});
  EXPECT_EQ(values, (std::vector<double>{1.0, 7.0, static_cast<double>(0.1f), -2.5}));
  EXPECT_TRUE(read_scalars({}).empty());
  try {
    read_scalars({torch::ones({3})});
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "internal: read_scalars of a tensor of 3 elements");
  }
}

// A tensor's device always has an index; the device a model was asked for may not ("cuda"). Beam search on CUDA
// refused its own model's answer on cuda:0 as "expected a tensor on cuda" (first GPU run, issue 18).
TEST(OnDevice, AnUnindexedDeviceStandsForEveryIndexOfItsType) {
  const torch::Device cuda(torch::kCUDA), cuda0(torch::kCUDA, 0), cuda1(torch::kCUDA, 1), cpu(torch::kCPU);
  EXPECT_TRUE(on_device(cuda0, cuda));
  EXPECT_TRUE(on_device(cuda1, cuda));
  EXPECT_TRUE(on_device(cuda0, cuda0));
  EXPECT_FALSE(on_device(cuda0, cuda1));
  EXPECT_FALSE(on_device(cuda1, cuda0));
  EXPECT_TRUE(on_device(cpu, cpu));
  EXPECT_FALSE(on_device(cpu, cuda));
  EXPECT_FALSE(on_device(cuda0, cpu));
}

}  // namespace
}  // namespace cabert::ops
