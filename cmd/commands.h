// Every subcommand registers itself on the root CLI11 app through add_<name>() and runs through a
// callback; cmd/main.cc is the only place that catches exceptions and maps them to exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace cabert::cmd {

struct GlobalOptions {
  int threads = 0;  // 0 = all cores
  uint64_t seed = 42;
  std::string log_level = "info";
  std::string log_format = "text";
  std::string log_file;
  bool dump_options = false;
  bool quiet = false;
  bool tf32 = false;                    // TF32 tensor cores for float32 products on CUDA (cuBLAS and cuDNN)
  std::string cuda_attention = "auto";  // CUDA's composite attention route: auto, regions, blocks or tiles
  uint64_t max_line_bytes = uint64_t{1} << 20;
};

GlobalOptions& global_options();

void add_tokenize(CLI::App& app);
void add_build_corpus(CLI::App& app);
void add_pretrain(CLI::App& app);
void add_finetune(CLI::App& app);
void add_evaluate(CLI::App& app);
void add_export(CLI::App& app);
void add_bench(CLI::App& app);
void add_inspect(CLI::App& app);
void add_selftest(CLI::App& app);

// Records the resolved options of `command` in the run context, for the headers of output files.
void record_options(const CLI::App& command);

}  // namespace cabert::cmd
