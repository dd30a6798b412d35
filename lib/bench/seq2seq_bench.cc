#include "lib/bench/seq2seq_bench.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>

#include "lib/bench/model_bench.h"
#include "lib/bench/op_bench.h"
#include "lib/core/errors.h"
#include "lib/generate/seq2seq_generator.h"
#include "lib/models/seq2seq_model.h"
#include "lib/models/summary.h"
#include "lib/ops/memory_meter.h"
#include "lib/ops/mixed_precision.h"
#include "lib/train/losses.h"
#include "lib/train/optimizer.h"

namespace cabert::bench {

pb::BenchRecord bench_seq2seq_model(const Seq2SeqBenchConfig& c) {
  if (c.batch < 1 || c.length < 1) throw UsageError("bench: expected positive --batch and --seq");
  if (c.repeats < 1 || c.warmup < 0) throw UsageError("bench: expected --repeats >= 1 and --warmup >= 0");
  ops::install_cpu_memory_meter();
  ops::ScopedKernelPath scope(c.path);
  const torch::Device device = c.device;
  const int64_t B = c.batch, L = c.length, V = c.model.vocab_size();
  torch::manual_seed(c.seed);
  models::Seq2SeqModel model(c.model);
  model->to(device);
  train::AdamW optimizer(*model, bench_adamw_options());
  torch::Tensor source = torch::randint(5, V, {B, L}, torch::kLong);
  torch::Tensor target = torch::randint(5, V, {B, L}, torch::kLong);
  torch::Tensor mask = torch::ones({B, L}, torch::kBool);
  torch::Tensor target_in = torch::cat({torch::full({B, 1}, 2, torch::kLong), target.narrow(1, 0, L - 1)}, 1);
  source = source.to(device), target = target.to(device), mask = mask.to(device), target_in = target_in.to(device);

  model->train();
  auto train_step = [&] {
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      ops::AutocastScope autocast(c.amp, device);
      torch::Tensor logits = model->forward(source, mask, target_in, mask);
      loss = train::label_smoothed_cross_entropy(logits, target, 0.1).loss / static_cast<double>(B * L);
    }
    loss.backward();
    optimizer.step();
  };
  train_step();  // the optimizer state exists before anything is measured
  TimedRuns train(device);
  for (int i = 0; i < c.warmup + c.repeats; ++i) {
    const RunTime time = time_run(train_step, device);
    if (i >= c.warmup) train.add(time);
  }
  const int64_t train_peak = peak_extra_bytes_on(train_step, device);
  const std::string path_name = ops::kernel_path_name(c.path);
  auto profile = [&](const char* what, const std::string& description, const std::function<void()>& run) {
    profile_if_asked(
        c.profile,
        str(std::filesystem::path(c.model_name).stem().string(), "-", path_name, "-", what, "-B", B, "-L", L),
        str(c.model_name, ", ", path_name, " kernels, ", description, c.amp ? " under bfloat16 autocast" : "",
            ", B=", B, " L=", L, " on ", device_words(device)),
        run, device);
  };
  profile("train", "training step (forward, label-smoothed cross-entropy, backward, AdamW)", train_step);

  model->eval();
  torch::Tensor short_source = source.narrow(1, 0, std::min(L, c.generation_source)).contiguous();
  torch::Tensor short_mask = mask.narrow(1, 0, short_source.size(1)).contiguous();
  // A mark before the first step and after each: the steps' own times, read after each timed generation (on CUDA
  // reading them waits for the device, which must not fall inside the generation's own time).
  DeviceClock steps_clock(device);
  steps_clock.reserve(static_cast<int>(L) + 1);
  auto generate = [&] {
    torch::NoGradGuard no_grad;
    ops::AutocastScope autocast(c.amp, device);
    generate::Seq2SeqStepModel steps(model, short_source, short_mask, 1);
    torch::Tensor last = torch::full({B}, 2, torch::TensorOptions().dtype(torch::kLong).device(device));
    steps_clock.mark();
    for (int64_t t = 0; t < L; ++t) {
      torch::Tensor log_probs = steps.log_probs(last, t);
      last = log_probs.argmax(-1);
      steps_clock.mark();
    }
  };
  TimedRuns generation(device);
  double first = 0, last = 0;
  for (int i = 0; i < c.warmup + c.repeats; ++i) {
    const RunTime time = time_run(generate, device);
    const std::vector<double> step_ms = steps_clock.intervals_ms();
    if (i < c.warmup) continue;
    generation.add(time);
    const int64_t tenth = std::max<int64_t>(1, L / 10);
    double a = 0, b = 0;
    for (int64_t t = 0; t < tenth; ++t) a += step_ms.at(t), b += step_ms.at(L - 1 - t);
    first += a / tenth / c.repeats;
    last += b / tenth / c.repeats;
  }
  const int64_t generation_peak = peak_extra_bytes_on(generate, device);
  profile("generate", str("greedy generation of L tokens from a ", short_source.size(1), "-token source"), generate);
  steps_clock.intervals_ms();  // the marks of the peak's and the profile's runs, dropped

  pb::BenchRecord record =
      model_record("seq2seq", c.model_name, c.model, c.path, B, L, models::count_parameters(*model), device, c.amp);
  *record.mutable_train_timing() = make_timing(
      train, c.warmup, train_peak, memory_method(device, "the model, optimizer state and batch during one extra step"));
  *record.mutable_inference_timing() =
      make_timing(generation, c.warmup, generation_peak,
                  memory_method(device, "the model during one extra generation (incremental state included)"));
  record.set_train_tokens_per_second(static_cast<double>(2 * B * L) / (record.train_timing().median_ms() / 1000));
  record.set_inference_tokens_per_second(static_cast<double>(B * L) / (record.inference_timing().median_ms() / 1000));
  record.set_generation_step_ms_first(first);
  record.set_generation_step_ms_last(last);
  *record.mutable_environment() = bench_environment();
  record.set_note(str("training step: source and target of ", L,
                      " tokens (train tok/s counts both), label-smoothed "
                      "CE + backward + AdamW; generation: ",
                      L, " tokens decoded incrementally (greedy, no EOS) ", "from a ", short_source.size(1),
                      "-token source; step ms first/last: mean over the first/last ", "tenth"));
  return record;
}

}  // namespace cabert::bench
