#include "lib/bench/selftest.h"

#include <cmath>
#include <limits>

#include "kernels/attention_kernels.h"
#include "kernels/build_info.h"
#include "lib/bench/op_bench.h"
#include "lib/core/errors.h"
#include "lib/ops/device.h"
#include "lib/ops/kernel_path.h"

namespace cabert::bench {
namespace {

// Small shapes that still reach the kernels' edge cases: K > T, T not a multiple of any tile, B = 1.
struct SelftestShape {
  int64_t batch, seq, channels, heads, kernel;
};
const std::vector<SelftestShape>& selftest_shapes() {
  static const std::vector<SelftestShape> shapes = {{2, 37, 16, 2, 5}, {1, 7, 8, 2, 9}, {3, 1, 8, 4, 3}};
  return shapes;
}

// The output and the gradients of every leaf, on the CPU in double, for one kernel path.
std::vector<torch::Tensor> run_once(OpBenchConfig config, ops::KernelPath path) {
  ops::ScopedKernelPath scoped(path);
  torch::manual_seed(config.seed);
  OpSetup setup = make_op_setup(config);
  torch::Tensor out = setup.forward();
  torch::manual_seed(config.seed + 1);
  const torch::Tensor probe = torch::randn(out.sizes(), torch::TensorOptions().dtype(torch::kDouble));
  std::vector<torch::Tensor> grads =
      torch::autograd::grad({out}, setup.leaves, {probe.to(out.device(), out.scalar_type())}, false, false, true);
  std::vector<torch::Tensor> result{out.detach().to(torch::kCPU, torch::kDouble)};
  for (const auto& grad : grads) {
    result.push_back(grad.defined() ? grad.to(torch::kCPU, torch::kDouble) : torch::zeros({0}, torch::kDouble));
  }
  return result;
}

}  // namespace

std::vector<torch::Device> selftest_devices(const std::string& spec) {
  std::vector<torch::Device> devices;
  const bool all = spec == "all";
  if (all || spec == "cpu") devices.emplace_back(torch::kCPU);
  if (all || spec == "cuda") {
    for (const auto& device : kernels::cuda_devices()) {
      devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(device.index));
    }
    if (spec == "cuda" && devices.empty()) throw UsageError("--device cuda: this machine has no CUDA device");
  }
  if (!all && spec != "cpu" && spec != "cuda") devices.push_back(ops::parse_device(spec));
  return devices;
}

kernels::CudaAttentionRoute selftest_attention_route() {
  const kernels::CudaAttentionRoute route = kernels::cuda_attention_route();
  return route == kernels::CudaAttentionRoute::kAuto ? kernels::CudaAttentionRoute::kRegions : route;
}

std::string selftest_route(const std::string& op, const torch::Device& device) {
  const bool cuda = device.is_cuda();
  const std::string conv = cuda ? "kernels/cuda" : "kernels/cpu";
  if (op == "composite-attention") {
    if (!cuda) return "the tiled online-softmax kernel (kernels/cpu/attention_cpu)";
    const std::string blocks = "blocks of query rows through batched products (kernels/chunked/attention_chunked), "
                               "dropout from the Philox kernel of kernels/cuda/dropout_cuda";
    switch (selftest_attention_route()) {
      case kernels::CudaAttentionRoute::kTiles:
        return "in float and double cabert's tiled online-softmax kernels (kernels/cuda/attention_cuda; a batch row "
               "with no real key or a head past 128: " +
               blocks + ")";
      case kernels::CudaAttentionRoute::kBlocks: return "in float and double " + blocks;
      default:
        return "in float PyTorch's memory-efficient attention on the regions beyond the radius and banded products "
               "on the strip inside it (kernels/regions/attention_regions); in double " +
               blocks;
    }
  }
  if (op == "convbert-attention") {
    return str(cuda ? "at::scaled_dot_product_attention"
                    : "at::scaled_dot_product_attention (in training with "
                      "dropout, the tiled online-softmax kernel)",
               " for the attention heads, the dynamic conv of ", conv, " for the conv heads");
  }
  if (op == "dropout") {
    return cuda ? "the Philox kernel of kernels/cuda/dropout_cuda" : "the Philox lanes of kernels/cpu/dropout_cpu";
  }
  if (op == "sdconv" || op == "sdconv-branch") return str("the dynamic conv of ", conv);
  if (op == "relpos") return str("the relative-position expand / reduce of ", conv);
  if (op == "lightconv" || op == "depthwise") return str("the grouped conv of ", conv);
  if (op == "dynamicconv") return str("the dynamic conv of ", conv);
  return "ATen";
}

double relative_max_error(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].sizes() != b[i].sizes()) return std::numeric_limits<double>::infinity();
    if (a[i].numel() == 0) continue;
    const torch::Tensor x = a[i].to(torch::kCPU, torch::kDouble), y = b[i].to(torch::kCPU, torch::kDouble);
    if (!torch::isfinite(x).all().item<bool>() || !torch::isfinite(y).all().item<bool>()) {
      return std::numeric_limits<double>::infinity();
    }
    const double scale = std::max(1.0, y.abs().max().item<double>());
    worst = std::max(worst, (x - y).abs().max().item<double>() / scale);
  }
  return worst;
}

std::vector<SelftestCheck> run_selftest(const std::vector<torch::Device>& devices,
                                        const std::function<void(const SelftestCheck&)>& report) {
  std::vector<SelftestCheck> checks;
  // The fused kernels themselves: --cuda-attention auto would hand the selftest's small composite-attention
  // problems on CUDA to the reference, so under auto the check takes the regions (double takes the blocks there);
  // a route given on the command line is checked as given.
  const kernels::ScopedCudaAttentionRoute route(selftest_attention_route());
  for (const auto& op : op_bench_names()) {
    if (!op_bench_has_kernel_paths(op)) continue;
    for (const auto& device : devices) {
      double worst_local = 0, worst_cpu = 0, worst_float = 0;
      // CUDA's composite attention takes another route in float (kernels/regions) than in double: checked in
      // float too, against the reference in float on the same device.
      const bool float_route = device.is_cuda() && op == "composite-attention";
      std::string shapes;
      for (const auto& shape : selftest_shapes()) {
        OpBenchConfig config;
        config.op = op;
        config.batch = shape.batch;
        config.seq = shape.seq;
        config.channels = shape.channels;
        config.heads = shape.heads;
        config.kernel = shape.kernel;
        config.dtype = torch::kDouble;
        config.seed = 1234;
        config.device = device;
        const std::vector<torch::Tensor> fused = run_once(config, ops::KernelPath::kFused);
        worst_local = std::max(worst_local, relative_max_error(fused, run_once(config, ops::KernelPath::kReference)));
        if (device.is_cuda()) {
          OpBenchConfig on_cpu = config;
          on_cpu.device = torch::kCPU;
          worst_cpu = std::max(worst_cpu, relative_max_error(fused, run_once(on_cpu, ops::KernelPath::kReference)));
        }
        if (float_route) {
          OpBenchConfig in_float = config;
          in_float.dtype = torch::kFloat;
          worst_float = std::max(worst_float, relative_max_error(run_once(in_float, ops::KernelPath::kFused),
                                                                 run_once(in_float, ops::KernelPath::kReference)));
        }
        shapes += str(shapes.empty() ? "" : ", ", "B=", shape.batch, " T=", shape.seq, " C=", shape.channels,
                      " H=", shape.heads, " K=", shape.kernel);
      }
      // Double precision: the fused kernels sum in another order than ATen, nothing more.
      constexpr double kTolerance = 1e-9;
      auto add = [&](const std::string& against, double error, double tolerance) {
        SelftestCheck check{op, device.str(), against, shapes, error, tolerance, error <= tolerance};
        report(check);
        checks.push_back(check);
      };
      add("reference on the same device", worst_local, kTolerance);
      if (device.is_cuda()) add("reference on the CPU", worst_cpu, kTolerance);
      // Float: the two sum in different orders over a few dozen terms of size 1.
      if (float_route) add("reference on the same device, in float", worst_float, 1e-4);
    }
  }
  return checks;
}

}  // namespace cabert::bench
