// cabert bench: time the convolution-branch ops (fused against reference, side by side in the same run)
// and print a table; optionally write BenchRecord files (formats/bench.proto).
#include <google/protobuf/util/json_util.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include "cmd/commands.h"
#include "formats/bench.pb.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/io/record_file.h"
#include "lib/models/layers.h"
#include "lib/models/presets.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/summary.h"
#include "lib/ops/conv_ops.h"
#include "lib/ops/memory_meter.h"
#include "lib/bench/op_bench.h"

namespace cabert::cmd {
namespace {

struct BenchOptions {
  std::vector<std::string> ops;
  std::vector<int64_t> seqs = {128, 512, 2048};
  std::vector<int64_t> kernels = {17};
  int64_t batch = 8, channels = 256, heads = 4;
  bool backward = false;
  std::string kernel_paths = "both";
  int repeats = 10, warmup = 2;
  std::string dtype = "float";
  std::string format = "md";
  std::string output;
  std::string model;  // --model PRESET|CONFIG: model mode
  std::vector<std::string> sets;
};

std::string fixed(double value, int digits = 2) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

class TablePrinter {
 public:
  explicit TablePrinter(std::string format) : format_(std::move(format)) {}

  void header(const pb::BenchEnvironment& env) {
    const std::vector<std::string> columns = {"op", "kernels", "pass", "B", "T", "C", "H", "K", "median ms",
                                              "q1-q3 ms", "min-max ms", "peak extra MiB", "speed-up"};
    if (format_ == "md") {
      std::cout << "cabert bench on " << env.cpu_model() << " (" << env.logical_cores() << " logical cores), "
                << env.intra_op_threads() << " intra-op threads; " << env.kernels_build() << "\n\n|";
      for (const auto& c : columns) std::cout << ' ' << c << " |";
      std::cout << "\n|";
      for (size_t i = 0; i < columns.size(); ++i) std::cout << (i < 2 ? "---|" : "---:|");
      std::cout << '\n';
    } else if (format_ == "tsv") {
      for (size_t i = 0; i < columns.size(); ++i) std::cout << (i ? "\t" : "") << columns[i];
      std::cout << '\n';
    }
    std::cout.flush();
  }

  void row(const pb::BenchRecord& r) {
    if (format_ == "json") {
      std::string json;
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(r, &json, options);
      std::cout << json << '\n';
      std::cout.flush();
      return;
    }
    const auto& t = r.timing();
    const std::vector<std::string> cells = {
        r.op(), r.kernels(), r.backward() ? "fwd+bwd" : "fwd", std::to_string(r.batch()), std::to_string(r.seq()),
        std::to_string(r.channels()), std::to_string(r.heads()), std::to_string(r.kernel()), fixed(t.median_ms()),
        fixed(t.q1_ms()) + "-" + fixed(t.q3_ms()), fixed(t.min_ms()) + "-" + fixed(t.max_ms()),
        fixed(static_cast<double>(t.peak_extra_bytes()) / (1 << 20), 1),
        r.speedup_vs_reference() > 0 ? fixed(r.speedup_vs_reference(), 1) + "x" : "-"};
    if (format_ == "md") {
      std::cout << '|';
      for (const auto& c : cells) std::cout << ' ' << c << " |";
    } else {
      for (size_t i = 0; i < cells.size(); ++i) std::cout << (i ? "\t" : "") << cells[i];
    }
    std::cout << '\n';
    std::cout.flush();
  }

 private:
  std::string format_;
};

torch::Dtype parse_dtype(const std::string& name) {
  if (name == "float") return torch::kFloat;
  if (name == "double") return torch::kDouble;
  throw UsageError(str("--dtype: expected float or double, got '", name, "'"));
}

std::vector<ops::KernelPath> parse_paths(const std::string& name) {
  if (name == "both") return {ops::KernelPath::kReference, ops::KernelPath::kFused};
  return {ops::parse_kernel_path(name)};
}

void run_op_bench(const BenchOptions& options) {
  if (options.format != "md" && options.format != "tsv" && options.format != "json") {
    throw UsageError(str("--format: expected md, tsv or json, got '", options.format, "'"));
  }
  for (const auto& op : options.ops) {
    if (bench::op_bench_description(op).empty()) {
      throw bench::unknown_op(op);
    }
  }
  const torch::Dtype dtype = parse_dtype(options.dtype);
  const std::vector<ops::KernelPath> paths = parse_paths(options.kernel_paths);
  const pb::BenchEnvironment env = bench::bench_environment();
  std::unique_ptr<io::RecordWriter> writer;
  if (!options.output.empty()) {
    writer = std::make_unique<io::RecordWriter>(options.output, "cabert.pb.BenchRecord");
  }
  TablePrinter printer(options.format);
  printer.header(env);
  for (const auto& op : options.ops) {
    log_info("bench ", op, ": ", bench::op_bench_description(op));
    for (int64_t seq : options.seqs) {
      for (int64_t kernel : options.kernels) {
        double reference_median = 0;
        const bool has_paths = bench::op_bench_has_kernel_paths(op);
        for (ops::KernelPath path : has_paths ? paths : std::vector<ops::KernelPath>{ops::KernelPath::kFused}) {
          bench::OpBenchConfig config;
          config.op = op;
          config.batch = options.batch;
          config.seq = seq;
          config.channels = options.channels;
          config.heads = options.heads;
          config.kernel = kernel;
          config.backward = options.backward;
          config.path = path;
          config.warmup = options.warmup;
          config.repeats = options.repeats;
          config.dtype = dtype;
          config.seed = global_options().seed;
          pb::BenchRecord record;
          record.set_kind("op");
          record.set_op(op);
          record.set_kernels(has_paths ? ops::kernel_path_name(path) : "aten");
          record.set_backward(options.backward);
          record.set_batch(options.batch);
          record.set_seq(seq);
          record.set_channels(options.channels);
          record.set_heads(options.heads);
          record.set_kernel(kernel);
          record.set_dtype(options.dtype);
          *record.mutable_timing() = bench::bench_op(config);
          if (path == ops::KernelPath::kReference) reference_median = record.timing().median_ms();
          if (path == ops::KernelPath::kFused && reference_median > 0) {
            record.set_speedup_vs_reference(reference_median / record.timing().median_ms());
          }
          *record.mutable_environment() = env;
          record.set_note(bench::op_bench_description(op));
          printer.row(record);
          if (writer) writer->write(record);
        }
      }
    }
  }
  if (writer) {
    writer->close();
    log_info("bench: ", writer->records_written(), " records -> ", options.output);
  }
}


// ---- --model: training-step and inference throughput of a whole MLM model ----

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
  const double H = c.hidden_size(), T = static_cast<double>(seq);
  const double window = 2.0 * c.attention().relative_radius() + 1;
  double mixing = 0;
  for (int layer = 0; layer < c.num_layers(); ++layer) {
    switch (c.family()) {
      case pb::BERT: {
        const auto& a = c.attention();
        mixing += 2 * T * H;  // QK^T and AV: 2 T H multiply-adds
        if (a.relative_dynamic()) mixing += window * H;
        if (a.relative_key()) mixing += window * H;
        if (a.depthwise_values()) mixing += window * H;
        mixing += window * H * ((a.conv_query() ? 1 : 0) + (a.conv_key() ? 1 : 0) + (a.conv_value() ? 1 : 0));
        break;
      }
      case pb::CONVBERT: {
        const auto& cb = c.convbert();
        const double ratio = std::max(1, cb.head_ratio());
        const double width = cb.bottleneck() ? H / ratio : H;
        mixing += 2 * T * width;
        if (cb.conv_kind() != pb::NO_CONV) mixing += cb.conv_kernel_size() * width;  // the conv itself
        if (cb.conv_kind() == pb::SDCONV || cb.conv_kind() == pb::DEPTHWISE_SEPARABLE) {
          mixing += cb.conv_kernel_size() * H;  // depthwise part of the separable conv
        }
        break;
      }
      default: {
        const auto& b = c.conv_block();
        const int index = std::min(layer, b.kernel_sizes_size() - 1);
        mixing += (index >= 0 ? b.kernel_sizes(index) : 0) * H;
      }
    }
  }
  return 2 * (macs + mixing);
}

void run_model_bench(const BenchOptions& options) {
  const pb::ModelConfig config = models::load_model_config(options.model, options.sets);
  const pb::BenchEnvironment env = bench::bench_environment();
  const std::vector<ops::KernelPath> paths = parse_paths(options.kernel_paths);
  std::unique_ptr<io::RecordWriter> writer;
  if (!options.output.empty()) writer = std::make_unique<io::RecordWriter>(options.output, "cabert.pb.BenchRecord");
  ops::install_cpu_memory_meter();
  if (options.format == "md") {
    std::cout << "cabert bench --model " << options.model << " on " << env.cpu_model() << ", "
              << env.intra_op_threads() << " intra-op threads; " << env.kernels_build() << "\n\n"
              << "| model | kernels | B | T | params | GFLOP/token fwd | train step ms (median, q1-q3) | train tok/s | "
                 "train peak MiB | infer ms | infer tok/s | infer peak MiB | train speed-up |\n"
              << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  } else if (options.format == "tsv") {
    std::cout << "model\tkernels\tB\tT\tparams\tflops_per_token\ttrain_ms\ttrain_tok_s\ttrain_peak_mib\tinfer_ms\t"
                 "infer_tok_s\tinfer_peak_mib\ttrain_speedup\n";
  }
  for (int64_t seq : options.seqs) {
    if (seq > config.max_length()) {
      throw UsageError(str("--seq ", seq, " exceeds max_length ", config.max_length(), " of ", options.model,
                           "; raise it with --set max_length=", seq));
    }
    double reference_train_ms = 0;
    for (ops::KernelPath path : paths) {
      ops::set_kernel_path(path);
      torch::manual_seed(global_options().seed);
      models::MlmModel model(config);
      torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-4));
      const int64_t B = options.batch, V = config.vocab_size();
      auto ids = torch::randint(5, V, {B, seq}, torch::kLong);
      auto segments = (torch::arange(seq) >= seq / 2).to(torch::kLong).unsqueeze(0).expand({B, seq}).contiguous();
      auto mask = torch::ones({B, seq}, torch::kBool);
      auto positions = torch::rand({B, seq}) < 0.15;
      positions.index_put_({torch::indexing::Slice(), 1}, true);  // at least one prediction per sequence
      auto labels = ids.masked_select(positions);
      auto train_step = [&] {
        optimizer.zero_grad();
        auto loss = torch::nn::functional::cross_entropy(model->forward(ids, segments, mask, positions), labels);
        loss.backward();
        optimizer.step();
      };
      auto infer = [&] {
        torch::NoGradGuard no_grad;
        model->encoder->forward(ids, segments, mask);
      };
      auto measure = [&](const std::function<void()>& step) {
        std::vector<double> times;
        for (int i = 0; i < options.warmup + options.repeats; ++i) {
          const auto start = std::chrono::steady_clock::now();
          step();
          const auto stop = std::chrono::steady_clock::now();
          if (i >= options.warmup) times.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
        }
        pb::BenchTiming timing = bench::summarize_times(times);
        timing.set_warmup(options.warmup);
        ops::PeakMemoryScope memory;
        step();
        timing.set_peak_extra_bytes(memory.peak_extra_bytes());
        timing.set_memory_method("peak CPU tensor bytes above the model, optimizer state and batch during one "
                                 "extra step (counting c10 allocator; oneDNN/BLAS scratch not counted)");
        return timing;
      };
      model->train();
      train_step();  // creates the optimizer state outside the measured memory
      pb::BenchRecord record;
      record.set_kind("model");
      record.set_model(options.model);
      record.set_kernels(ops::kernel_path_name(path));
      record.set_backward(true);
      record.set_batch(B);
      record.set_seq(seq);
      record.set_channels(config.hidden_size());
      record.set_heads(config.num_heads());
      record.set_dtype("float");
      record.set_parameters(models::count_parameters(*model));
      record.set_flops_per_token(analytic_flops_per_token(model, config, seq));
      *record.mutable_train_timing() = measure(train_step);
      model->eval();
      *record.mutable_inference_timing() = measure(infer);
      const double tokens = static_cast<double>(B * seq);
      record.set_train_tokens_per_second(tokens / (record.train_timing().median_ms() / 1000));
      record.set_inference_tokens_per_second(tokens / (record.inference_timing().median_ms() / 1000));
      if (path == ops::KernelPath::kReference) reference_train_ms = record.train_timing().median_ms();
      if (path == ops::KernelPath::kFused && reference_train_ms > 0) {
        record.set_speedup_vs_reference(reference_train_ms / record.train_timing().median_ms());
      }
      *record.mutable_environment() = env;
      record.set_note("training step = MLM forward + cross-entropy + backward + AdamW step; inference = encoder "
                      "forward without gradients; flops_per_token: analytic forward (training ~3x)");
      const auto& tr = record.train_timing();
      const auto& in = record.inference_timing();
      if (options.format == "json") {
        std::string json;
        google::protobuf::util::JsonPrintOptions json_options;
        json_options.preserve_proto_field_names = true;
        (void)google::protobuf::util::MessageToJsonString(record, &json, json_options);
        std::cout << json << '\n';
      } else {
        const std::vector<std::string> cells = {
            options.model, record.kernels(), std::to_string(B), std::to_string(seq),
            models::human_parameters(record.parameters()), fixed(record.flops_per_token() / 1e9, 4),
            fixed(tr.median_ms()) + " (" + fixed(tr.q1_ms()) + "-" + fixed(tr.q3_ms()) + ")",
            fixed(record.train_tokens_per_second(), 0),
            fixed(static_cast<double>(tr.peak_extra_bytes()) / (1 << 20), 1), fixed(in.median_ms()),
            fixed(record.inference_tokens_per_second(), 0),
            fixed(static_cast<double>(in.peak_extra_bytes()) / (1 << 20), 1),
            record.speedup_vs_reference() > 0 ? fixed(record.speedup_vs_reference(), 2) + "x" : "-"};
        for (size_t i = 0; i < cells.size(); ++i) {
          std::cout << (options.format == "md" ? (i ? " | " : "| ") : (i ? "\t" : "")) << cells[i];
        }
        std::cout << (options.format == "md" ? " |\n" : "\n");
      }
      std::cout.flush();
      if (writer) writer->write(record);
    }
  }
  ops::set_kernel_path(ops::KernelPath::kFused);
  if (writer) writer->close();
}

}  // namespace

void add_bench(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Benchmark convolution ops (time, peak memory, fused vs reference)");
  CLI::Option* op = sub->add_option("--op", options->ops,
                                    "Ops, comma separated: lightconv, dynamicconv, sdconv, sdconv-branch, relpos, "
                                    "convbert-attention, depthwise, attention")
                       ->delimiter(',');
  CLI::Option* model = sub->add_option("--model", options->model,
                                       "Model preset or config file: time MLM training steps and inference instead");
  op->excludes(model);
  sub->add_option("--set", options->sets, "Model config override a.b=value (with --model; repeatable)");
  sub->add_option("--seq", options->seqs, "Sequence lengths, comma separated")->delimiter(',')->capture_default_str();
  sub->add_option("--kernel", options->kernels, "Kernel sizes K, comma separated (relpos: radius K/2)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--batch", options->batch, "Batch size")->capture_default_str();
  sub->add_option("--channels", options->channels, "Channels C (hidden size of the branch)")->capture_default_str();
  sub->add_option("--heads", options->heads, "Heads H (C/H channels each)")->capture_default_str();
  sub->add_flag("--backward", options->backward, "Time forward + backward (gradients of every input)");
  sub->add_option("--kernels", options->kernel_paths,
                  "fused, reference, or both (side by side, with the speed-up of fused over reference)")
      ->capture_default_str();
  sub->add_option("--repeats", options->repeats, "Timed runs per configuration (after warm-up)")
      ->capture_default_str();
  sub->add_option("--warmup", options->warmup, "Untimed runs first")->capture_default_str();
  sub->add_option("--dtype", options->dtype, "float or double")->capture_default_str();
  sub->add_option("--format", options->format, "Table on stdout: md, tsv or json (one JSON record per line)")
      ->capture_default_str();
  sub->add_option("-o,--output", options->output, "Also write BenchRecord records (formats/bench.proto) here");
  sub->callback([sub, options] {
    record_options(*sub);
    if (options->format != "md" && options->format != "tsv" && options->format != "json") {
      throw UsageError(str("--format: expected md, tsv or json, got '", options->format, "'"));
    }
    if (at::get_num_threads() > 1 && std::getenv("OMP_WAIT_POLICY") == nullptr) {
      log_warning("bench: OMP_WAIT_POLICY is unset: OpenMP threads spin while waiting, and on a machine shared "
                  "with other jobs some multi-threaded runs then stall 10-30x; export OMP_WAIT_POLICY=passive "
                  "(or use --threads 1) for stable numbers");
    }
    if (!options->model.empty()) {
      run_model_bench(*options);
    } else if (!options->ops.empty()) {
      run_op_bench(*options);
    } else {
      throw UsageError("bench: expected --op OPS or --model PRESET");
    }
  });
}

}  // namespace cabert::cmd
