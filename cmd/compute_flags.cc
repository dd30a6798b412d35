#include "cmd/compute_flags.h"

#include "lib/ops/device.h"
#include "lib/ops/kernel_path.h"

namespace cabert::cmd {

void add_compute_flags(CLI::App* command, ComputeFlags& flags) {
  command->add_option("--device", flags.device, "cpu, cuda or cuda:N")->capture_default_str();
  command->add_option("--kernels", flags.kernels, "Convolution kernels: fused or reference")->capture_default_str();
}

std::string apply_compute_flags(const ComputeFlags& flags) {
  ops::set_kernel_path(ops::parse_kernel_path(flags.kernels));
  return ops::parse_device(flags.device).str();
}

}  // namespace cabert::cmd
