// What the tests of `cabert export` against transformers share (hf_export_test.cc: transformers' own classes;
// hf_remote_code_test.cc: the code cabert writes beside the weights): tiny configs over the shipped tokenizer,
// perturbed weights saved as a checkpoint, a fixed (optionally padded) batch, and the outputs file
// tests/python/hf_reference.py compares against.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/checkpoint.pb.h"
#include "lib/config/presets.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/safetensors_torch.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"

#define CABERT_REQUIRE_TRANSFORMERS(python)                                                \
  std::string python = ::cabert::testing::python_with("transformers, safetensors, torch"); \
  if (python.empty()) GTEST_SKIP() << "the project's Python lacks transformers (run scripts/setup.sh): skipped"

namespace cabert::interop::hf_test {

// The preset at the shipped tokenizer's vocabulary size; `embedding` > 0 sets the embedding size.
inline pb::ModelConfig tiny(const std::string& preset, int embedding = 0) {
  pb::ModelConfig config = config::preset_config(preset);
  config.set_vocab_size(text::Tokenizer(testing::alice_tokenizer()).vocab_size());
  if (embedding) config.set_embedding_size(embedding);
  return config;
}

// Default initialisation plus noise, so that LayerNorms, biases, beta and the depthwise scales are not 1 and 0.
inline void perturb(torch::nn::Module& module, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& parameter : module.parameters()) parameter.add_(torch::randn_like(parameter) * 0.05);
  module.eval();
}

// `module` as a checkpoint of `kind` over the shipped tokenizer; metadata with empty values is left out.
inline void save(const std::string& path, const pb::ModelConfig& config, const std::string& kind,
                 const torch::nn::Module& module, const std::map<std::string, std::string>& metadata = {}) {
  pb::CheckpointInfo info;
  info.set_kind(kind);
  *info.mutable_model() = config;
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  info.set_tokenizer(tokenizer.path());
  info.set_tokenizer_checksum(tokenizer.checksum());
  for (const auto& [key, value] : metadata) {
    if (!value.empty()) (*info.mutable_metadata())[key] = value;
  }
  io::save_checkpoint(path, info, io::module_tensors(module));
}

struct Inputs {
  torch::Tensor ids, segments, mask;
};

// [CLS] ... [SEP] rows of 12 tokens, the second half segment 1; `padded`: the last 4 of row 2 are [PAD].
inline Inputs fixed_inputs(int64_t vocab, bool padded) {
  torch::manual_seed(11);
  Inputs in;
  in.ids = torch::randint(5, vocab, {2, 12}, torch::kLong);
  in.ids.select(1, 0).fill_(2);
  in.ids.select(1, 11).fill_(3);
  in.segments = torch::zeros_like(in.ids);
  in.segments.narrow(1, 6, 6).fill_(1);
  in.mask = torch::ones_like(in.ids);
  if (padded) {
    in.ids[1].narrow(0, 8, 4).fill_(0);
    in.ids[1][7] = 3;
    in.mask[1].narrow(0, 8, 4).fill_(0);
    in.segments[1].narrow(0, 8, 4).fill_(0);
  }
  return in;
}

// The inputs and cabert's outputs, as hf_reference.py reads them.
inline void write_outputs(const std::string& path, const Inputs& in, io::NamedTensors outputs) {
  outputs.insert(outputs.begin(),
                 {{"input_ids", in.ids}, {"token_type_ids", in.segments}, {"attention_mask", in.mask}});
  io::write_tensors_safetensors(path, outputs);
}

// Writes `cases` to `cases_path` and has tests/python/hf_reference.py compare them: every case reports, none fails.
inline void compare_in_python(const std::string& python, const nlohmann::json& cases, const std::string& cases_path) {
  testing::write_text(cases_path, cases.dump());
  const std::string output = testing::run_python(python, testing::source_dir() + "/tests/python/hf_reference.py",
                                                 "compare '" + cases_path + "'");
  for (const auto& c : cases) {
    EXPECT_NE(output.find(c["name"].get<std::string>() + ": " + c["class"].get<std::string>()), std::string::npos)
        << output;
  }
  EXPECT_EQ(output.find("FAIL"), std::string::npos) << output;
  std::cerr << output;
}

}  // namespace cabert::interop::hf_test
