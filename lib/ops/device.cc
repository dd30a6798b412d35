#include "lib/ops/device.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <cctype>

#include "kernels/build_info.h"
#include "lib/core/errors.h"

namespace cabert::ops {
namespace {

bool is_index(const std::string& text) {
  if (text.empty() || text.size() > 4) return false;
  for (char ch : text) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return false;
  }
  return true;
}

}  // namespace

torch::Device parse_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  const std::string prefix = "cuda:";
  bool indexed = name.rfind(prefix, 0) == 0 && is_index(name.substr(prefix.size()));
  if (name != "cuda" && !indexed) throw UsageError(str("--device: expected cpu, cuda or cuda:N, got '", name, "'"));
  kernels::require_cuda_build("--device cuda");
  if (!torch::cuda::is_available()) throw UsageError(str("--device ", name, ": no CUDA device is available here"));
  if (indexed) {
    const int64_t index = std::stoll(name.substr(prefix.size()));
    const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
    if (index >= count) {
      throw UsageError(str("--device ", name, ": expected a device index below ", count, " (devices seen here)"));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return torch::Device(torch::kCUDA);
}

torch::Device select_device(const std::string& name) {
  const torch::Device device = parse_device(name);
  if (device.is_cuda() && device.has_index()) c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).setDevice(device);
  return device;
}

torch::Device indexed_device(const torch::Device& device) {
  if (!device.is_cuda() || device.has_index()) return device;
  return c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice();
}

std::vector<double> read_scalars(const std::vector<torch::Tensor>& scalars) {
  if (scalars.empty()) return {};
  std::vector<torch::Tensor> values;
  for (const torch::Tensor& scalar : scalars) {
    if (scalar.numel() != 1) throw Error(str("internal: read_scalars of a tensor of ", scalar.numel(), " elements"));
    values.push_back(scalar.detach().reshape({}).to(scalars.front().device(), torch::kDouble));
  }
  const torch::Tensor host = torch::stack(values).to(torch::kCPU).contiguous();  // the one copy (and wait)
  const double* data = host.data_ptr<double>();
  return std::vector<double>(data, data + host.numel());
}

bool on_device(const torch::Device& actual, const torch::Device& expected) {
  if (actual.type() != expected.type()) return false;
  return !expected.has_index() || !actual.has_index() || actual.index() == expected.index();
}

}  // namespace cabert::ops
