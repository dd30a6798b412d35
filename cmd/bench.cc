// cabert bench: time the convolution-branch ops (fused against reference, side by side in the same run)
// and print a table; optionally write BenchRecord files (formats/bench.proto).
#include <google/protobuf/util/json_util.h>

#include <ATen/Parallel.h>

#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cmd/commands.h"
#include "formats/bench.pb.h"
#include "lib/bench/model_bench.h"
#include "lib/bench/op_bench.h"
#include "lib/bench/seq2seq_bench.h"
#include "lib/config/model_config_text.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "kernels/build_info.h"
#include "lib/io/record_file.h"
#include "lib/models/summary.h"
#include "lib/ops/conv_ops.h"
#include "lib/ops/device.h"

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
  std::string device = "cpu";
  std::string format = "md";
  std::string output;
  std::string model;  // --model PRESET|CONFIG: model mode
  std::vector<std::string> sets;
  bool amp = false;               // --amp: bfloat16 autocast (--model)
  bench::ProfileRequest profile;  // --profile DIR, --profile-runs N
};

std::string fixed(double value, int digits = 2) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

std::string mebibytes(int64_t bytes) { return fixed(static_cast<double>(bytes) / (1 << 20), 1); }

// One table row of the --model benches: a markdown row ("md") or tab-separated cells ("tsv").
void print_row(const std::vector<std::string>& cells, const std::string& format) {
  for (size_t i = 0; i < cells.size(); ++i) {
    std::cout << (format == "md" ? (i ? " | " : "| ") : (i ? "\t" : "")) << cells[i];
  }
  std::cout << (format == "md" ? " |\n" : "\n");
  std::cout.flush();
}

// One record as one line of JSON (proto field names), flushed: `--format json` output is JSON lines.
void print_json(const pb::BenchRecord& record) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(record, &json, options);
  std::cout << json << '\n';
  std::cout.flush();
}

std::string describe_cuda_device(const torch::Device& device) {
  const int index = device.has_index() ? device.index() : 0;
  for (const auto& d : kernels::cuda_devices()) {
    if (d.index == index) return str(d.name, ", sm_", d.major, d.minor);
  }
  return "unknown";
}

// Where a bench runs, for its table's first line: "cuda:0 (NVIDIA H200, sm_90), host CPU" or the CPU.
std::string describe_bench_machine(const pb::BenchEnvironment& env, const torch::Device& device) {
  return str(device.is_cuda() ? str(device.str(), " (", describe_cuda_device(device), "), host ") : "",
             env.cpu_model());
}

// What a table's times are, after its first line: on CUDA, device time between events.
std::string describe_clock(const torch::Device& device) {
  return device.is_cuda() ? "; times: CUDA events on the device's current stream around each run (device time), "
                            "the device synchronised before it"
                          : "";
}

// The --model tables' precision, before the rest of their first line.
std::string describe_precision(bool amp) {
  return amp ? "bfloat16 autocast (--amp; the conv and relative-position ops in float32 inside); " : "";
}

class TablePrinter {
 public:
  TablePrinter(std::string format, bool cuda) : format_(std::move(format)), cuda_(cuda) {}

  void header(const pb::BenchEnvironment& env, const torch::Device& device) {
    std::vector<std::string> columns = {"op",      "kernels", "pass",      "B",        "T",          "C",
                                        "H",       "K",       "median ms", "q1-q3 ms", "min-max ms", "peak extra MiB",
                                        "speed-up"};
    // On CUDA the wall clock of the same runs beside the events' time: where they differ, the host is the bound.
    if (cuda_) columns.insert(columns.begin() + 11, "wall median ms");
    if (format_ == "md") {
      std::cout << "cabert bench on " << describe_bench_machine(env, device) << " (" << env.logical_cores()
                << " logical cores), " << env.intra_op_threads() << " intra-op threads; " << env.kernels_build()
                << "; allocator: " << env.allocator() << describe_clock(device) << "\n\n|";
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
      print_json(r);
      return;
    }
    const auto& t = r.timing();
    std::vector<std::string> cells = {r.op(),
                                      r.kernels(),
                                      r.backward() ? "fwd+bwd" : "fwd",
                                      std::to_string(r.batch()),
                                      std::to_string(r.seq()),
                                      std::to_string(r.channels()),
                                      std::to_string(r.heads()),
                                      std::to_string(r.kernel()),
                                      fixed(t.median_ms()),
                                      fixed(t.q1_ms()) + "-" + fixed(t.q3_ms()),
                                      fixed(t.min_ms()) + "-" + fixed(t.max_ms()),
                                      mebibytes(t.peak_extra_bytes()),
                                      r.speedup_vs_reference() > 0 ? fixed(r.speedup_vs_reference(), 1) + "x" : "-"};
    if (cuda_) cells.insert(cells.begin() + 11, fixed(t.wall_median_ms()));
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
  bool cuda_;
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

// Every size and count is checked before the first row runs: a bad value late in a list (--seq 128,512,0) came
// after the earlier rows had run, and their records were lost with it.
void check_bench_options(const BenchOptions& options) {
  auto positive = [](const char* option, int64_t value) {
    if (value < 1) throw UsageError(str(option, ": expected a positive number, got ", value));
  };
  positive("--batch", options.batch);
  for (int64_t seq : options.seqs) positive("--seq", seq);
  positive("--repeats", options.repeats);
  if (options.warmup < 0) throw UsageError(str("--warmup: expected 0 or more, got ", options.warmup));
  if (options.model.empty()) {
    positive("--channels", options.channels);
    positive("--heads", options.heads);
    for (int64_t kernel : options.kernels) positive("--kernel", kernel);
    if (options.channels % options.heads != 0) {
      throw UsageError(
          str("bench: expected --channels divisible by --heads, got ", options.channels, " and ", options.heads));
    }
    if (!options.sets.empty()) throw UsageError("--set: changes the model of --model; --op benches take none");
  }
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
  const torch::Device device = ops::indexed_device(ops::parse_device(options.device));
  const std::vector<ops::KernelPath> paths = parse_paths(options.kernel_paths);
  const pb::BenchEnvironment env = bench::bench_environment();
  std::unique_ptr<io::RecordWriter> writer;
  if (!options.output.empty()) {
    writer = std::make_unique<io::RecordWriter>(options.output, "cabert.pb.BenchRecord");
  }
  TablePrinter printer(options.format, device.is_cuda());
  printer.header(env, device);
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
          config.device = device;
          config.seed = global_options().seed;
          config.profile = options.profile;
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
          record.set_device(device.str());
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

// ---- --model with an encoder-decoder: training step and generation versus length ----

void run_seq2seq_bench(const BenchOptions& options, const pb::ModelConfig& model) {
  bench::Seq2SeqBenchConfig config;
  config.model = model;
  config.model_name = options.model;
  config.batch = options.batch;
  config.warmup = std::min(options.warmup, 1);
  config.repeats = std::max(1, std::min(options.repeats, 3));
  if (config.warmup != options.warmup || config.repeats != options.repeats) {
    log_info("bench --model ", options.model, ": an encoder-decoder runs ", config.warmup, " warm-up and ",
             config.repeats, " timed runs per row (generation is slow; asked: --warmup ", options.warmup,
             ", --repeats ", options.repeats, ")");
  }
  config.seed = global_options().seed;
  config.profile = options.profile;
  config.device = ops::indexed_device(ops::parse_device(options.device));
  config.amp = options.amp;
  std::vector<ops::KernelPath> paths = parse_paths(options.kernel_paths);
  std::unique_ptr<io::RecordWriter> writer;
  if (!options.output.empty()) writer = std::make_unique<io::RecordWriter>(options.output, "cabert.pb.BenchRecord");
  if (options.format == "md") {
    const pb::BenchEnvironment env = bench::bench_environment();
    std::cout << "cabert bench --model " << options.model << " (encoder-decoder) on "
              << describe_bench_machine(env, config.device) << ", " << env.intra_op_threads() << " intra-op threads; "
              << describe_precision(options.amp) << "train: source = target = L tokens; "
              << "generate: L tokens from a source of min(L, 32) tokens" << describe_clock(config.device) << "\n\n"
              << "| model | kernels | B | L | params | train step ms | train tok/s | train peak MiB | generate ms | "
                 "gen tok/s | step ms first 10% | step ms last 10% | gen peak MiB |\n"
              << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  } else if (options.format == "tsv") {
    std::cout << "model\tkernels\tB\tL\tparams\ttrain_ms\ttrain_tok_s\ttrain_peak_mib\tgenerate_ms\tgen_tok_s\t"
                 "step_ms_first\tstep_ms_last\tgen_peak_mib\n";
  }
  for (int64_t length : options.seqs) {
    for (ops::KernelPath path : paths) {
      config.length = length;
      config.path = path;
      const pb::BenchRecord record = bench::bench_seq2seq_model(config);
      if (options.format == "json") {
        print_json(record);
      } else {
        const auto& tr = record.train_timing();
        const auto& gen = record.inference_timing();
        const std::vector<std::string> cells = {options.model,
                                                record.kernels(),
                                                std::to_string(record.batch()),
                                                std::to_string(length),
                                                models::human_parameters(record.parameters()),
                                                fixed(tr.median_ms()),
                                                fixed(record.train_tokens_per_second(), 0),
                                                mebibytes(tr.peak_extra_bytes()),
                                                fixed(gen.median_ms()),
                                                fixed(record.inference_tokens_per_second(), 0),
                                                fixed(record.generation_step_ms_first(), 3),
                                                fixed(record.generation_step_ms_last(), 3),
                                                mebibytes(gen.peak_extra_bytes())};
        print_row(cells, options.format);
      }
      if (writer) writer->write(record);
    }
  }
  if (writer) writer->close();
}

// ---- --model: training-step and inference throughput of a whole MLM model ----

void run_model_bench(const BenchOptions& options) {
  bench::ModelBenchConfig config;
  config.model = config::load_model_config(options.model, options.sets);
  if (config.model.has_seq2seq()) {
    run_seq2seq_bench(options, config.model);
    return;
  }
  config.model_name = options.model;
  config.batch = options.batch;
  config.paths = parse_paths(options.kernel_paths);
  config.warmup = options.warmup;
  config.repeats = options.repeats;
  config.seed = global_options().seed;
  config.profile = options.profile;
  config.device = ops::indexed_device(ops::parse_device(options.device));
  config.amp = options.amp;
  std::unique_ptr<io::RecordWriter> writer;
  if (!options.output.empty()) writer = std::make_unique<io::RecordWriter>(options.output, "cabert.pb.BenchRecord");
  if (options.format == "md") {
    const pb::BenchEnvironment env = bench::bench_environment();
    std::cout
        << "cabert bench --model " << options.model << " on " << describe_bench_machine(env, config.device) << ", "
        << env.intra_op_threads() << " intra-op threads; " << describe_precision(options.amp) << env.kernels_build()
        << "; allocator: " << env.allocator() << describe_clock(config.device) << "\n\n"
        << "| model | kernels | B | T | params | GFLOP/token fwd | train step ms (median, q1-q3) | train tok/s | "
           "train peak MiB | infer ms | infer tok/s | infer peak MiB | train speed-up | train GFLOP/s (of matmul peak) |\n"
        << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  } else if (options.format == "tsv") {
    std::cout << "model\tkernels\tB\tT\tparams\tflops_per_token\ttrain_ms\ttrain_tok_s\ttrain_peak_mib\tinfer_ms\t"
                 "infer_tok_s\tinfer_peak_mib\ttrain_speedup\ttrain_gflops\tmatmul_gflops\n";
  }
  for (int64_t seq : options.seqs) {
    config.seq = seq;
    for (const pb::BenchRecord& record : bench::bench_model(config)) {
      if (options.format == "json") {
        print_json(record);
      } else {
        const auto& tr = record.train_timing();
        const auto& in = record.inference_timing();
        std::vector<std::string> cells = {
            options.model,
            record.kernels(),
            std::to_string(record.batch()),
            std::to_string(seq),
            models::human_parameters(record.parameters()),
            fixed(record.flops_per_token() / 1e9, 4),
            fixed(tr.median_ms()) + " (" + fixed(tr.q1_ms()) + "-" + fixed(tr.q3_ms()) + ")",
            fixed(record.train_tokens_per_second(), 0),
            mebibytes(tr.peak_extra_bytes()),
            fixed(in.median_ms()),
            fixed(record.inference_tokens_per_second(), 0),
            mebibytes(in.peak_extra_bytes()),
            record.speedup_vs_reference() > 0 ? fixed(record.speedup_vs_reference(), 2) + "x" : "-"};
        if (options.format == "tsv") {
          cells.push_back(fixed(record.train_gflops_per_second(), 1));
          cells.push_back(fixed(record.matmul_gflops(), 1));
        } else {
          cells.push_back(fixed(record.train_gflops_per_second(), 0) + " (" +
                          fixed(100 * record.train_gflops_per_second() / record.matmul_gflops(), 0) + "%)");
        }
        print_row(cells, options.format);
      }
      if (writer) writer->write(record);
    }
  }
  if (writer) writer->close();
}

}  // namespace

void add_bench(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Benchmark convolution ops (time, peak memory, fused vs reference)");
  CLI::Option* op = sub->add_option("--op", options->ops,
                                    "Ops, comma separated: lightconv, dynamicconv, sdconv, sdconv-branch, relpos, "
                                    "convbert-attention, depthwise, attention, composite-attention, sdpa, dropout, "
                                    "torch-dropout")
                        ->delimiter(',');
  CLI::Option* model = sub->add_option(
      "--model", options->model,
      "Model preset or config file: time MLM training steps and inference instead (encoder-decoders: training "
      "steps and incremental generation versus --seq; at most 1 warm-up and 3 timed runs)");
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
  sub->add_option("--repeats", options->repeats, "Timed runs per configuration (after warm-up)")->capture_default_str();
  sub->add_option("--warmup", options->warmup, "Untimed runs first")->capture_default_str();
  sub->add_option("--dtype", options->dtype, "float or double")->capture_default_str();
  sub->add_option("--device", options->device,
                  "cpu, cuda or cuda:N, for --op and --model (on CUDA: times from CUDA events on the device's current "
                  "stream, the device synchronised before each run, the wall clock beside them; peak memory from "
                  "the CUDA caching allocator)")
      ->capture_default_str();
  CLI::Option* amp = sub->add_flag("--amp", options->amp,
                                   "With --model: bfloat16 autocast around the forwards, as pretrain --amp (the "
                                   "conv and relative-position ops compute in float32 inside; matmul peak in "
                                   "bfloat16)");
  amp->excludes(op);
  sub->add_option("--format", options->format, "Table on stdout: md, tsv or json (one JSON record per line)")
      ->capture_default_str();
  sub->add_option("-o,--output", options->output, "Also write BenchRecord records (formats/bench.proto) here");
  sub->add_option("--profile", options->profile.dir,
                  "After each row's timed runs, --profile-runs more under PyTorch's profiler (Kineto; CUDA kernels "
                  "too with --device cuda): DIR/ROW.md (host ops by self time, device kernels by time, top-level "
                  "calls and kernel launches per run) and DIR/ROW.trace.json (Chrome trace, for Perfetto)");
  sub->add_option("--profile-runs", options->profile.runs, "Runs under the profiler per row (with --profile)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
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
    check_bench_options(*options);
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
