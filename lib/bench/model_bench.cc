#include "lib/bench/model_bench.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>

#include "lib/bench/op_bench.h"
#include "lib/core/errors.h"
#include "lib/models/layers.h"
#include "lib/models/mixer_registry.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/summary.h"
#include "lib/ops/memory_meter.h"
#include "lib/ops/mixed_precision.h"
#include "lib/train/optimizer.h"

namespace cabert::bench {
namespace {

// Analytic forward FLOPs per token: 2 x the multiply-adds of every Linear / GroupedLinear of the encoder
// (read off the module tree, so every variant's projections count as built) plus the token-mixing terms the
// config implies per layer: attention 4 T width (QK^T and AV), convolutions 2 K channels, relative terms
// 2 (2n+1) H. Embedding lookups, LayerNorm, softmax and GELU are not counted; the MLM head is excluded.
double analytic_flops_per_token(models::MlmModel& model, const pb::ModelConfig& c, int64_t seq) {
  double macs = 0;
  for (const auto& item : model->encoder->named_modules()) {
    if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(item.value().get())) macs += linear->weight.numel();
    if (auto* grouped = dynamic_cast<models::GroupedLinearImpl*>(item.value().get())) macs += grouped->weight.numel();
  }
  const models::MixerFamily& family = models::mixer_family(c.family());
  double mixing = 0;
  for (int64_t layer = 0; layer < c.num_layers(); ++layer) mixing += family.mixing_macs_per_token(c, layer, seq);
  return 2 * (macs + mixing);
}

}  // namespace

train::AdamWOptions bench_adamw_options() {
  train::AdamWOptions options;
  options.lr = 1e-4;
  return options;
}

namespace {

// The dense peak the steps are compared with: the best of five n^3 products through LibTorch's matmul at the
// current threads, in the dtype the linears run in (bfloat16 under autocast), in GFLOP/s; n = 1024 on the CPU,
// 4096 on CUDA (where 1024^3 is over in tens of microseconds, launch-bound). Constant operands: no generator
// draw, so the seeded batch and weights do not depend on it.
double measured_matmul_gflops(const torch::Device& device, bool amp) {
  const int64_t n = device.is_cuda() ? 4096 : 1024;
  const auto options = torch::TensorOptions().device(device).dtype(amp ? torch::kBFloat16 : torch::kFloat);
  const torch::Tensor a = torch::full({n, n}, 0.5, options), b = torch::full({n, n}, 0.25, options);
  torch::Tensor c = torch::mm(a, b);  // warm-up: BLAS buffers and threads, cuBLAS's handle
  double best_ms = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 5; ++i) best_ms = std::min(best_ms, time_run([&] { torch::mm_out(c, a, b); }, device).ms);
  return 2.0 * static_cast<double>(n * n * n) / (best_ms / 1000) / 1e9;
}

// One kernel path's model, optimizer and timings.
struct PathRun {
  ops::KernelPath path;
  models::MlmModel model{nullptr};
  std::unique_ptr<train::AdamW> optimizer;
  TimedRuns train, inference;
  int64_t train_peak = 0, inference_peak = 0;
};

}  // namespace

pb::BenchRecord model_record(const std::string& kind, const std::string& model_name, const pb::ModelConfig& config,
                             ops::KernelPath path, int64_t batch, int64_t seq, int64_t parameters,
                             const torch::Device& device, bool amp) {
  pb::BenchRecord record;
  record.set_kind(kind);
  record.set_model(model_name);
  record.set_kernels(ops::kernel_path_name(path));
  record.set_backward(true);
  record.set_batch(batch);
  record.set_seq(seq);
  record.set_channels(config.hidden_size());
  record.set_heads(config.num_heads());
  record.set_dtype(amp ? "bfloat16 autocast" : "float");
  record.set_device(device.str());
  record.set_parameters(parameters);
  return record;
}

std::vector<pb::BenchRecord> bench_model(const ModelBenchConfig& c) {
  if (c.seq > c.model.max_length()) {
    throw UsageError(str("--seq ", c.seq, " exceeds max_length ", c.model.max_length(), " of ", c.model_name,
                         "; raise it with --set max_length=", c.seq));
  }
  if (c.batch < 1 || c.seq < 1) throw UsageError("bench: expected positive --batch and --seq");
  if (c.repeats < 1 || c.warmup < 0) throw UsageError("bench: expected --repeats >= 1 and --warmup >= 0");
  ops::install_cpu_memory_meter();
  const torch::Device device = c.device;
  const double matmul_gflops = measured_matmul_gflops(device, c.amp);
  const int64_t B = c.batch, T = c.seq;
  torch::manual_seed(c.seed);
  auto ids = torch::randint(5, c.model.vocab_size(), {B, T}, torch::kLong);
  auto segments = (torch::arange(T) >= T / 2).to(torch::kLong).unsqueeze(0).expand({B, T}).contiguous();
  auto mask = torch::ones({B, T}, torch::kBool);
  auto positions = torch::rand({B, T}) < 0.15;
  positions.index_put_({torch::indexing::Slice(), 1}, true);  // at least one prediction per sequence
  auto labels = ids.masked_select(positions).to(device);
  ids = ids.to(device), segments = segments.to(device), mask = mask.to(device), positions = positions.to(device);

  std::vector<PathRun> runs;
  for (ops::KernelPath path : c.paths) {
    PathRun run{path, models::MlmModel(nullptr), nullptr, TimedRuns(device), TimedRuns(device)};
    torch::manual_seed(c.seed + 1);  // the same weights on every path
    run.model = models::MlmModel(c.model);
    run.model->to(device);
    run.optimizer = std::make_unique<train::AdamW>(*run.model, bench_adamw_options());
    runs.push_back(std::move(run));
  }
  auto train_step = [&](PathRun& run) {
    run.optimizer->zero_grad();
    torch::Tensor loss;
    {
      ops::AutocastScope autocast(c.amp, device);
      loss = torch::nn::functional::cross_entropy(run.model->forward(ids, segments, mask, positions), labels);
    }
    loss.backward();
    run.optimizer->step();
  };
  auto infer = [&](PathRun& run) {
    torch::NoGradGuard no_grad;
    ops::AutocastScope autocast(c.amp, device);
    run.model->encoder->forward(ids, segments, mask);
  };
  // Each phase: warm-up + repeats with the paths taking turns, then one more step per path for the peak memory.
  auto phase = [&](const std::function<void(PathRun&)>& step, TimedRuns PathRun::*times, int64_t PathRun::*peak) {
    for (int i = 0; i < c.warmup + c.repeats; ++i) {
      for (PathRun& run : runs) {
        ops::ScopedKernelPath scope(run.path);
        const RunTime time = time_run([&] { step(run); }, device);
        if (i >= c.warmup) (run.*times).add(time);
      }
    }
    for (PathRun& run : runs) {
      ops::ScopedKernelPath scope(run.path);
      run.*peak = peak_extra_bytes_on([&] { step(run); }, device);
    }
  };
  for (PathRun& run : runs) {
    ops::ScopedKernelPath scope(run.path);
    run.model->train();
    train_step(run);  // creates the optimizer state outside the measured memory
  }
  phase(train_step, &PathRun::train, &PathRun::train_peak);
  const std::string model_stem = std::filesystem::path(c.model_name).stem().string();
  for (PathRun& run : runs) {
    ops::ScopedKernelPath scope(run.path);
    const std::string path = ops::kernel_path_name(run.path);
    profile_if_asked(
        c.profile, str(model_stem, "-", path, "-train-B", B, "-T", T),
        str(c.model_name, ", ", path,
            " kernels, training step (MLM forward, cross-entropy, backward, "
            "AdamW)",
            c.amp ? " under bfloat16 autocast" : "", ", B=", B, " T=", T, " on ", device_words(device)),
        [&] { train_step(run); }, device);
  }
  for (PathRun& run : runs) run.model->eval();
  phase(infer, &PathRun::inference, &PathRun::inference_peak);

  const pb::BenchEnvironment env = bench_environment();
  std::vector<pb::BenchRecord> records;
  double reference_train_ms = 0;
  for (PathRun& run : runs) {
    pb::BenchRecord record = model_record("model", c.model_name, c.model, run.path, B, T,
                                          models::count_parameters(*run.model), device, c.amp);
    record.set_flops_per_token(analytic_flops_per_token(run.model, c.model, T));
    *record.mutable_train_timing() =
        make_timing(run.train, c.warmup, run.train_peak,
                    memory_method(device, "the model, optimizer state and batch during one extra step"));
    *record.mutable_inference_timing() =
        make_timing(run.inference, c.warmup, run.inference_peak,
                    memory_method(device, "the model and batch during one extra forward"));
    const double tokens = static_cast<double>(B * T);
    record.set_train_tokens_per_second(tokens / (record.train_timing().median_ms() / 1000));
    record.set_inference_tokens_per_second(tokens / (record.inference_timing().median_ms() / 1000));
    record.set_train_gflops_per_second(3 * record.flops_per_token() * tokens /
                                       (record.train_timing().median_ms() / 1000) / 1e9);
    record.set_matmul_gflops(matmul_gflops);
    if (run.path == ops::KernelPath::kReference) reference_train_ms = record.train_timing().median_ms();
    *record.mutable_environment() = env;
    record.set_note(str(
        "training step = MLM forward + cross-entropy + backward + AdamW step (cabert's: PyTorch's fused kernel, "
        "gradients set to none between steps); inference = encoder "
        "forward without gradients; paths interleaved repeat by repeat; flops_per_token: analytic "
        "forward (training ~3x, as train_gflops_per_second counts it)",
        c.amp ? "; forwards under bfloat16 autocast (the conv and relative-position ops compute in float32 inside), "
                "matmul_gflops a bfloat16 product"
              : ""));
    records.push_back(std::move(record));
  }
  for (pb::BenchRecord& record : records) {
    if (record.kernels() == ops::kernel_path_name(ops::KernelPath::kFused) && reference_train_ms > 0) {
      record.set_speedup_vs_reference(reference_train_ms / record.train_timing().median_ms());
    }
  }
  return records;
}

}  // namespace cabert::bench
