// cabert selftest [--device all|cpu|cuda|cuda:N]: the build, the devices, the code each op runs where, and a
// check of every fused op against the reference on every device; exit 1 on any mismatch.
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "cmd/commands.h"
#include "kernels/build_info.h"
#include "lib/bench/op_bench.h"
#include "lib/bench/selftest.h"
#include "lib/core/errors.h"
#include "lib/core/run_context.h"

namespace cabert::cmd {
namespace {

void print_devices(const std::vector<torch::Device>& devices) {
  const pb::BenchEnvironment env = bench::bench_environment();
  std::cout << "devices:\n  cpu: " << env.cpu_model() << ", " << env.logical_cores() << " logical cores, "
            << at::get_num_threads() << " intra-op threads\n";
  const std::vector<kernels::CudaDevice> cuda = kernels::cuda_devices();
  if (cuda.empty()) std::cout << "  cuda: none visible\n";
  for (const auto& device : cuda) {
    std::cout << "  cuda:" << device.index << ": " << device.name;
    if (!kernels::built_with_cuda()) {
      std::cout << " (this build has no CUDA kernels)\n";
      continue;
    }
    const std::string image = kernels::cuda_image_for(kernels::cuda_architectures(), device.major, device.minor);
    std::cout << ", sm_" << device.major << device.minor << ", " << device.multiprocessors << " SMs, "
              << device.memory_bytes / (int64_t{1} << 20) << " MiB; kernels: "
              << (image.empty() ? "NONE for this architecture (rebuild with TORCH_CUDA_ARCH_LIST including it)" : image)
              << "\n";
  }
  std::cout << "kernel paths (fused, the default):\n";
  for (const auto& op : bench::op_bench_names()) {
    if (!bench::op_bench_has_kernel_paths(op)) continue;
    for (const auto& device : devices) {
      std::cout << "  " << op << " on " << device.str() << ": " << bench::selftest_route(op, device) << "\n";
    }
  }
  std::cout.flush();
}

void run_selftest_command(const std::string& device_spec) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<torch::Device> devices = bench::selftest_devices(device_spec);
  std::cout << "cabert " << cabert_version() << " (commit " << cabert_build_commit() << ")\n";
  std::cout << "build: " << kernels::describe_build() << "; CPU kernels vectorised for " << kernels::cpu_kernel_isa()
            << "\n";
  print_devices(devices);
  std::cout << "checks (fused against the reference, output and every gradient, double):\n";
  int failed = 0;
  const auto checks = bench::run_selftest(devices, [&](const bench::SelftestCheck& check) {
    char error[32];
    std::snprintf(error, sizeof error, "%.1e", check.max_error);
    std::cout << "  " << (check.ok ? "ok  " : "FAIL") << "  " << check.op << " on " << check.device << " vs "
              << check.against << ": max relative error " << error << "\n";
    std::cout.flush();
    if (!check.ok) ++failed;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f", seconds);
  if (failed > 0) {
    throw Error(str("selftest: ", failed, " of ", checks.size(), " checks failed (tolerance ", checks.front().tolerance,
                    "): the fused kernels disagree with the reference on this machine; "
                    "run with --kernels reference until it is fixed, and report the output above"));
  }
  std::cout << "selftest: all " << checks.size() << " checks passed in " << elapsed << " s\n";
}

}  // namespace

void add_selftest(CLI::App& app) {
  auto device = std::make_shared<std::string>("all");
  CLI::App* sub = app.add_subcommand(
      "selftest", "Print the build, the devices and each op's kernel path, and check every fused op against the "
                  "reference on every device (exit 1 on a mismatch)");
  sub->add_option("--device", *device, "all (the CPU and every CUDA device), cpu, cuda or cuda:N")
      ->capture_default_str();
  sub->callback([device] { run_selftest_command(*device); });
}

}  // namespace cabert::cmd
