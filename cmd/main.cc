// The cabert binary: CLI11 root, global flags, and the one place where exceptions become exit codes
// (0 ok, 1 runtime error, 2 usage error, 3 bad input data, 128+signal after a graceful save).
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "cmd/commands.h"
#include "cmd/config_errors.h"
#include "kernels/attention_kernels.h"
#include "kernels/build_info.h"
#include "lib/core/errors.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/malloc_tuning.h"
#include "lib/core/run_context.h"
#include "lib/dist/environment.h"
#include "lib/text/text_source.h"

namespace cabert::cmd {

GlobalOptions& global_options() {
  static GlobalOptions options;
  return options;
}

void record_options(const CLI::App& command) {
  auto& options = run_context().options;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_name() == "--help" || option->get_name() == "-h") continue;
    std::string value;
    if (option->count() > 0) {
      for (const auto& result : option->results()) value += (value.empty() ? "" : ",") + result;
    } else {
      value = option->get_default_str();
    }
    options[option->get_single_name()] = value;  // the long name ("output" for -o,--output)
  }
}

namespace {

// The effective options of this command line as a --config file: CLI11's dump (every option with its value or
// default, dotted keys), narrowed to the global options and the chosen subcommand's, without the options that
// only print something and exit, and without unset ones (an empty list or string read back would be a value).
std::string effective_config(const CLI::App& app, const std::string& subcommand_path) {
  static const std::set<std::string> kNotRecorded = {"config", "dump-options", "dump-config", "list-presets",
                                                     "version"};
  std::istringstream dump(app.config_to_str(/*default_also=*/true, /*write_description=*/false));
  std::string config;
  for (std::string line; std::getline(dump, line);) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = line.substr(0, equals), value = line.substr(equals + 1);
    const size_t dot = key.rfind('.');
    const std::string owner = dot == std::string::npos ? "" : key.substr(0, dot);
    const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
    if (!owner.empty() && owner != subcommand_path) continue;
    if (kNotRecorded.count(name) || value == "\"\"" || value == "''" || value == "[]") continue;
    config += line + "\n";
  }
  return config;
}

void apply_global_options(CLI::App& app) {
  auto& global = global_options();
  set_log_level(parse_log_level(global.log_level));
  set_log_format(parse_log_format(global.log_format));
  std::string subcommand, dotted;
  for (CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    subcommand += (subcommand.empty() ? "" : " ") + sub->get_name();
    dotted += (dotted.empty() ? "" : ".") + sub->get_name();
  }
  set_log_subcommand(subcommand);
  run_context().config = effective_config(app, dotted);
  if (global.dump_options) {
    std::cout << run_context().config << std::flush;
    throw CLI::Success();
  }
  set_quiet(global.quiet);
  if (global.threads < 0) throw UsageError("--threads: expected 0 (all cores) or a positive count");
  if (global.max_line_bytes == 0) throw UsageError("--max-line-bytes: expected a positive byte count");
  text::set_max_line_bytes(global.max_line_bytes);
  // The processes of a data-parallel job on one machine share its cores.
  // (A malformed launcher environment is reported by the subcommands that train; the others ignore it.)
  dist::Environment env;
  try {
    env = dist::read_environment();
  } catch (const UsageError&) {
  }
  if (env.distributed()) {
    set_log_source(str("cabert[rank ", env.rank, "]"));
    if (env.rank != 0) set_quiet(true);  // rank 0 reports progress; every rank reports errors
  }
  // In a data-parallel job every rank but 0 writes its own FILE.rank<R>.
  set_log_file(global.log_file.empty() || env.rank == 0 ? global.log_file : str(global.log_file, ".rank", env.rank));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  int threads = global.threads > 0 ? global.threads : std::max(1, cores / env.local_world_size);
  at::set_num_threads(std::max(threads, 1));
  // float32 computes in float32 unless asked: PyTorch lets cuDNN's convolutions use TF32 (10-bit mantissas)
  // by default, which would set `--kernels reference` apart from the fused kernels on Ampere and newer.
  at::globalContext().setAllowTF32CuBLAS(global.tf32);
  at::globalContext().setAllowTF32CuDNN(global.tf32);
  kernels::set_cuda_attention_route(kernels::parse_cuda_attention_route(global.cuda_attention));
  auto& options = run_context().options;
  options["threads"] = std::to_string(std::max(threads, 1));
  options["seed"] = std::to_string(global.seed);
}

int run(int argc, char** argv) {
  CLI::App app{"cabert: convolutions inside pre-trained language models (Chang et al. 2021, Wu et al. 2019, "
               "Jiang et al. 2020, Tay et al. 2021)"};
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", str("cabert ", cabert_version(), " (commit ", cabert_build_commit(), ")"));
  auto& global = global_options();
  app.add_option(
         "--threads", global.threads,
         "Threads: LibTorch's intra-op pool, and the workers of tokenize encode and build-corpus (0 = all cores)")
      ->capture_default_str();
  app.add_option("--seed", global.seed, "Random seed for everything that draws")->capture_default_str();
  app.add_option("--log-level", global.log_level, "error, warning, info or debug")->capture_default_str();
  app.add_flag("-q,--quiet", global.quiet, "No progress lines or info messages");
  app.add_flag("--tf32", global.tf32,
               "On CUDA, let float32 matrix products and convolutions use TF32 tensor cores (faster, 10-bit "
               "mantissas; off: float32 throughout)");
  // The routes' measurements and what auto picks: kernels/attention_kernels.h, docs/kernels.md.
  app.add_option("--cuda-attention", global.cuda_attention,
                 "CUDA composite attention: auto (the default, fastest measured), regions, blocks or tiles")
      ->capture_default_str();
  app.add_option("--log-format", global.log_format,
                 "text, or json: one JSON object per line (time, level, subcommand, message, progress fields)")
      ->capture_default_str();
  app.set_config("--config", "",
                 "Read options from a TOML (or INI) file: defaults < file < command line; keys of a subcommand "
                 "in its [section] or dotted (pretrain.steps = 100); --dump-options writes one");
  // A key that names no option (a typo) is an error, not silently ignored.
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.add_flag("--dump-options", global.dump_options,
               "Print every effective option of this command line (global and the subcommand's) as a --config "
               "file, and exit");
  app.add_option("--log-file", global.log_file,
                 "Also append every message and progress line to FILE (text lines with a UTC timestamp)");
  app.add_option("--max-line-bytes", global.max_line_bytes,
                 "Longest text or table line read into memory; a longer one is bad input")
      ->capture_default_str();
  app.footer("Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 bad input data, 128+N after signal N.\n" +
             kernels::describe_build());

  add_tokenize(app);
  add_build_corpus(app);
  add_pretrain(app);
  add_finetune(app);
  add_evaluate(app);
  add_export(app);
  add_bench(app);
  add_inspect(app);
  add_selftest(app);
  for (CLI::App* sub : app.get_subcommands({})) {
    sub->fallthrough();
    for (CLI::App* nested : sub->get_subcommands({})) nested->fallthrough();
  }
  app.parse_complete_callback([&app] { apply_global_options(app); });

  for (int i = 0; i < argc; ++i) run_context().argv.emplace_back(argv[i]);
  install_interrupt_handlers();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (const std::string located = locate_config_error(error.what(), run_context().argv); !located.empty()) {
      log_message(LogLevel::kError, located);
      return static_cast<int>(ExitCode::kUsage);
    }
    int code = app.exit(error);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }
  return 0;
}

}  // namespace
}  // namespace cabert::cmd

int main(int argc, char** argv) {
  cabert::tune_malloc_for_tensors();
  try {
    const int code = cabert::cmd::run(argc, argv);
    // What went to stdout (a table, --dump-options, inspect's records) must have reached it: `> /dev/full`, a
    // full disk or a closed file is an error, not a silent exit 0.
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout.good()) {
      const int error = errno;
      throw cabert::Error(cabert::str("cannot write to standard output: ", std::strerror(error != 0 ? error : EIO)));
    }
    return code;
  } catch (const cabert::Error& error) {
    std::string message = error.what();
    if (error.exit_code() == static_cast<int>(cabert::ExitCode::kUsage)) {
      const std::string located = cabert::cmd::locate_config_error(message, cabert::run_context().argv);
      if (!located.empty()) message = located;
    }
    cabert::log_message(cabert::LogLevel::kError, message);
    return error.exit_code();
  } catch (const c10::Error& error) {
    cabert::log_message(cabert::LogLevel::kError, error.what_without_backtrace());
    return static_cast<int>(cabert::ExitCode::kRuntime);
  } catch (const std::exception& error) {
    cabert::log_message(cabert::LogLevel::kError, error.what());
    return static_cast<int>(cabert::ExitCode::kRuntime);
  }
}
