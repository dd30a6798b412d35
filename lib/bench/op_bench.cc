#include "lib/bench/op_bench.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "kernels/attention_kernels.h"
#include "kernels/build_info.h"
#include "lib/core/errors.h"
#include "lib/core/malloc_tuning.h"
#include "lib/core/run_context.h"
#include "lib/models/convbert_mixed_attention.h"
#include "lib/ops/attention_ops.h"
#include "lib/ops/dropout_ops.h"
#include "lib/ops/memory_meter.h"
#include "lib/ops/span_dynamic_conv.h"

namespace cabert::bench {
namespace {

using namespace cabert::ops;

namespace F = torch::nn::functional;

constexpr double kBenchDropout = 0.1;  // the presets' hidden dropout

}  // namespace

OpSetup make_op_setup(const OpBenchConfig& c) {
  const auto options = torch::TensorOptions().dtype(c.dtype);
  auto leaf = [&c](std::vector<torch::Tensor>& leaves, const torch::Tensor& value) {
    leaves.push_back(value.to(c.device).requires_grad_(true));
    return leaves.back();
  };
  const int64_t B = c.batch, T = c.seq, C = c.channels, H = c.heads, K = c.kernel;
  const int64_t pad = K / 2;
  const double init = 1.0 / std::sqrt(static_cast<double>(C));
  OpSetup s;
  auto& l = s.leaves;
  if (c.op == "lightconv") {
    auto x = leaf(l, torch::randn({B, T, C}, options));
    auto w = leaf(l, torch::randn({H, K}, options));
    s.forward = [=] { return lightweight_conv(x, w.softmax(-1), pad); };
  } else if (c.op == "dynamicconv") {
    auto x = leaf(l, torch::randn({B, T, C}, options));
    auto proj = leaf(l, torch::randn({H * K, C}, options) * init);
    s.forward = [=] { return dynamic_conv(x, F::linear(x, proj).view({B, T, H, K}).softmax(-1), pad); };
  } else if (c.op == "sdconv") {
    auto q = leaf(l, torch::randn({B, T, C}, options));
    auto key_span = leaf(l, torch::randn({B, T, C}, options));
    auto v = leaf(l, torch::randn({B, T, C}, options));
    auto wf = leaf(l, torch::randn({H * K, C}, options) * init);
    auto bf = leaf(l, torch::zeros({H * K}, options));
    s.forward = [=] { return span_dynamic_conv(q, key_span, v, wf, bf, H, pad); };
  } else if (c.op == "sdconv-branch") {
    auto x = leaf(l, torch::randn({B, T, C}, options));
    auto wq = leaf(l, torch::randn({C, C}, options) * init);
    auto wv = leaf(l, torch::randn({C, C}, options) * init);
    auto dw = leaf(l, torch::randn({C, K}, options) * init);
    auto dwb = leaf(l, torch::zeros({C}, options));
    auto pw = leaf(l, torch::randn({C, C}, options) * init);
    auto wf = leaf(l, torch::randn({H * K, C}, options) * init);
    auto bf = leaf(l, torch::zeros({H * K}, options));
    s.forward = [=] {
      auto key_span = F::linear(depthwise_conv(x, dw, dwb, pad), pw);
      return span_dynamic_conv(F::linear(x, wq), key_span, F::linear(x, wv), wf, bf, H, pad);
    };
  } else if (c.op == "convbert-attention") {
    pb::ModelConfig config;
    config.set_hidden_size(C);
    config.set_num_heads(H);
    auto* cb = config.mutable_convbert();
    cb->set_head_ratio(2);
    cb->set_conv_kernel_size(K);
    cb->set_bottleneck(true);
    cb->set_conv_kind(pb::SDCONV);
    models::MixedAttention attention(config);
    attention->to(c.device, c.dtype);
    auto x = leaf(l, torch::randn({B, T, C}, options));
    for (auto& parameter : attention->parameters()) l.push_back(parameter);
    s.forward = [=]() mutable { return attention(x, torch::Tensor()); };
  } else if (c.op == "depthwise") {
    auto x = leaf(l, torch::randn({B, T, C}, options));
    auto w = leaf(l, torch::randn({C, K}, options) * init);
    auto b = leaf(l, torch::zeros({C}, options));
    s.forward = [=] { return depthwise_conv(x, w, b, pad); };
  } else if (c.op == "relpos") {
    const int64_t d = C / H, radius = K / 2;
    auto q = leaf(l, torch::randn({B, H, T, d}, options));
    auto w = leaf(l, torch::randn({2 * radius + 1, d}, options) * init);
    auto beta = leaf(l, torch::zeros({H, 2 * radius + 1}, options));
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    s.forward = [=] { return relative_position_scores(q, w, beta, radius, scale); };
  } else if (c.op == "composite-attention" || c.op == "sdpa") {
    const int64_t d = C / H, radius = K / 2, width = 2 * radius + 1;
    // Heads as the models give them: [B, H, T, d] views of the projections' [B, T, H, d] output.
    auto q = leaf(l, torch::randn({B, T, H, d}, options)).transpose(1, 2);
    auto k = leaf(l, torch::randn({B, T, H, d}, options)).transpose(1, 2);
    auto v = leaf(l, torch::randn({B, T, H, d}, options)).transpose(1, 2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    if (c.op == "sdpa") {
      s.forward = [=] { return at::scaled_dot_product_attention(q, k, v, {}, 0.0, false, scale); };
    } else {
      RelativePositionTerms relative{leaf(l, torch::randn({width, d}, options) * init),
                                     leaf(l, torch::randn({H, width}, options) * init),
                                     leaf(l, torch::randn({width, d}, options) * init), radius};
      s.forward = [=] { return composite_attention(q, k, v, relative, {}, scale, 0.0); };
    }
  } else if (c.op == "dropout" || c.op == "torch-dropout") {
    auto x = leaf(l, torch::randn({B, T, C}, options));
    if (c.op == "dropout") {
      s.forward = [=] { return ops::dropout(x, kBenchDropout, /*training=*/true); };
    } else {
      s.forward = [=] { return torch::dropout(x, kBenchDropout, /*train=*/true); };
    }
  } else if (c.op == "attention") {
    const int64_t d = C / H;
    auto x = leaf(l, torch::randn({B, T, C}, options));
    auto wqkv = leaf(l, torch::randn({3 * C, C}, options) * init);
    s.forward = [=] {
      auto qkv = F::linear(x, wqkv).view({B, T, 3, H, d}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, d]
      auto scores = torch::matmul(qkv[0], qkv[1].transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
      return torch::matmul(scores.softmax(-1), qkv[2]).transpose(1, 2).reshape({B, T, C});
    };
  } else {
    throw unknown_op(c.op);
  }
  return s;
}

namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

// The BLAS / LAPACK / oneDNN / OpenMP facts of at::show_config(): its descriptive lines, and from its long
// "Build settings" line only the keys that say which BLAS and threading LibTorch uses.
std::string blas_lines() {
  std::istringstream config(at::show_config());
  std::string line, out;
  auto append = [&](const std::string& text) { out += (out.empty() ? "" : "; ") + text; };
  while (std::getline(config, line)) {
    auto first = line.find_first_not_of(" -");
    line = line.substr(first == std::string::npos ? 0 : first);
    if (line.rfind("Build settings:", 0) == 0) {
      std::istringstream settings(line.substr(15));
      for (std::string item; std::getline(settings, item, ',');) {
        item = item.substr(item.find_first_not_of(' ') == std::string::npos ? 0 : item.find_first_not_of(' '));
        for (const char* key : {"BLAS_INFO=", "LAPACK_INFO=", "USE_MKL=", "USE_MKLDNN=", "USE_OPENMP="}) {
          if (item.rfind(key, 0) == 0) append(item);
        }
      }
      continue;
    }
    const bool relevant = line.find("BLAS") != std::string::npos || line.find("LAPACK") != std::string::npos ||
                          line.find("MKL") != std::string::npos || line.find("OpenMP") != std::string::npos ||
                          line.find("oneDNN") != std::string::npos || line.find("CPU capability") != std::string::npos;
    if (relevant) append(line);
  }
  return out;
}

}  // namespace

UsageError unknown_op(const std::string& op) {
  std::string names;
  for (const auto& name : op_bench_names()) names += (names.empty() ? "" : ", ") + name;
  return UsageError(str("--op: expected one of ", names, ", got '", op, "'"));
}

const std::vector<std::string>& op_bench_names() {
  static const std::vector<std::string> names = {
      "lightconv", "dynamicconv",         "sdconv", "sdconv-branch", "relpos",       "convbert-attention", "depthwise",
      "attention", "composite-attention", "sdpa",   "dropout",       "torch-dropout"};
  return names;
}

std::string op_bench_description(const std::string& op) {
  if (op == "lightconv") return "softmax(W[H,K]) then lightweight_conv (as fairseq LightweightConv1dTBC)";
  if (op == "dynamicconv") return "Linear(C->H*K) + softmax kernels then dynamic_conv (as fairseq DynamicConv1dTBC)";
  if (op == "sdconv")
    return "ConvBERT SDConv (Jiang et al. eq. 5) from Q, Ks, V': softmax(W_f(Q*Ks) + b_f) kernels for H conv heads, "
           "then dynamic_conv over V'";
  if (op == "sdconv-branch")
    return "whole ConvBERT conv branch from X: Q and V' linears, Ks = SepConv_K(X) (depthwise_conv + pointwise "
           "linear), then sdconv; the four C x C linears are the same ATen matmuls on both paths";
  if (op == "convbert-attention")
    return "ConvBERT mixed attention block (the model's module, as HF ConvBertSelfAttention): H / 2 bottleneck "
           "attention heads beside the SDConv branch with H / 2 conv heads, head ratio 2, no dropout";
  if (op == "relpos") return "composite-attention terms q.W^C[r]*scale + beta[r] -> [B,H,T,T] (radius K/2)";
  if (op == "depthwise") return "depthwise_conv (groups=C) with bias";
  if (op == "composite-attention") {
    // The CUDA route in float is process-wide (--cuda-attention): the description names the one the rows took.
    const std::string regions =
        "PyTorch's memory-efficient kernel on the regions beyond the radius and banded products on the strip "
        "inside it (kernels/regions)";
    std::string cuda_route;
    switch (kernels::cuda_attention_route()) {
      case kernels::CudaAttentionRoute::kBlocks:
        cuda_route = "blocks of query rows, each block's scores whole (kernels/chunked; --cuda-attention blocks)";
        break;
      case kernels::CudaAttentionRoute::kRegions: cuda_route = regions + "; --cuda-attention regions"; break;
      case kernels::CudaAttentionRoute::kTiles:
        cuda_route = "cabert's tiled kernels, online softmax in 32 x 32 tiles (kernels/cuda; --cuda-attention tiles)";
        break;
      case kernels::CudaAttentionRoute::kAuto:
        cuda_route =
            "the reference's T x T scores where B H T^2 <= 2^25, beyond it " + regions + " (--cuda-attention auto)";
        break;
    }
    return "composite attention, all relative terms (q.k + q.W^C[r] + beta[r] + k.W^K'[r]) -> softmax -> V, "
           "radius K/2, no dropout, heads as the models give them; fused: on the CPU tiled online softmax, "
           "nothing T x T; on CUDA in float " +
           cuda_route;
  }
  if (op == "sdpa") {
    return "torch scaled_dot_product_attention on plain attention (q, k, v [B,H,T,d] views of [B,T,H,d] as the "
           "models give them), no dropout";
  }
  if (op == "dropout") {
    return "dropout p=0.1 on [B,T,C] hidden states in training; fused: Philox masks drawn in vector lanes and "
           "regenerated in the backward, reference: the same mask through ATen";
  }
  if (op == "torch-dropout") return "torch::dropout p=0.1 on [B,T,C] in training (torch's own generator and mask)";
  if (op == "attention") return "softmax(QK^T/sqrt(d))V with a fused QKV linear, H heads (plain ATen)";
  return "";
}

bool op_bench_has_kernel_paths(const std::string& op) {
  return op != "attention" && op != "sdpa" && op != "torch-dropout";
}

pb::BenchTiming bench_op(const OpBenchConfig& config) {
  if (config.batch < 1 || config.seq < 1 || config.channels < 1 || config.heads < 1 || config.kernel < 1) {
    throw UsageError("bench: expected positive --batch, --seq, --channels, --heads and --kernel");
  }
  if (config.channels % config.heads != 0) {
    throw UsageError(
        str("bench: expected --channels divisible by --heads, got ", config.channels, " and ", config.heads));
  }
  if (config.repeats < 1 || config.warmup < 0) throw UsageError("bench: expected --repeats >= 1 and --warmup >= 0");
  install_cpu_memory_meter();
  torch::manual_seed(config.seed);
  ScopedKernelPath path(config.path);
  OpSetup setup = make_op_setup(config);
  auto run = [&] {
    if (!config.backward) {
      torch::NoGradGuard no_grad;
      setup.forward();
    } else {
      torch::Tensor out = setup.forward();
      torch::autograd::grad({out}, setup.leaves, {torch::ones_like(out)});
    }
  };
  TimedRuns runs(config.device);
  for (int i = 0; i < config.warmup + config.repeats; ++i) {
    const RunTime time = time_run(run, config.device);
    if (i >= config.warmup) runs.add(time);
  }
  profile_if_asked(
      config.profile, op_profile_stem(config),
      str(config.op, ", ", ops::kernel_path_name(config.path), " kernels, ", config.backward ? "fwd+bwd" : "fwd",
          ", B=", config.batch, " T=", config.seq, " C=", config.channels, " H=", config.heads, " K=", config.kernel,
          ", ", c10::toString(config.dtype), " on ", config.device.str()),
      run, config.device);
  return make_timing(runs, config.warmup, peak_extra_bytes_on(run, config.device),
                     memory_method(config.device, "the inputs during one extra run"));
}

std::string op_profile_stem(const OpBenchConfig& config) {
  return profile_stem(str(config.op, "-", ops::kernel_path_name(config.path), "-", config.backward ? "fwdbwd" : "fwd",
                          "-B", config.batch, "-T", config.seq, "-C", config.channels, "-H", config.heads, "-K",
                          config.kernel));
}

pb::BenchEnvironment bench_environment() {
  pb::BenchEnvironment env;
  env.set_cpu_model(read_cpu_model());
  env.set_logical_cores(static_cast<int>(std::thread::hardware_concurrency()));
  env.set_intra_op_threads(at::get_num_threads());
  env.set_libtorch_version(TORCH_VERSION);
  env.set_parallel_info(at::get_parallel_info());
  env.set_blas(blas_lines());
  env.set_git_commit(cabert_build_commit());
  env.set_git_commit_source("the commit the binary was built from, recorded at build time (cabert --version)");
  env.set_cabert_version(cabert_version_and_commit());
  env.set_kernels_build(kernels::describe_build());
  env.set_native_cpu_kernels(kernels::native_cpu_kernels());
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  env.set_omp_wait_policy(wait_policy != nullptr ? wait_policy : "");
  env.set_allocator(describe_malloc());
  return env;
}

}  // namespace cabert::bench
