// `cabert export`: a checkpoint out as a directory a Python user loads without cabert:
//   model.safetensors      the model's tensors: Hugging Face's names where HF has the architecture
//                          (lib/interop/hf_layout.h), cabert's module names otherwise
//   config.json            HF's config keys (or cabert's) + a "cabert" block with the exact ModelConfig
//   tokenizer.model        the SentencePiece model, and tokenizer_config.json with cabert's special ids
//   README.md              what the directory holds and how to load it
//   generator/             an ELECTRA checkpoint's generator, as a masked-LM model directory of its own
// Every file is written atomically; optimizer state is left behind.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>

#include "formats/checkpoint.pb.h"
#include "lib/interop/hf_layout.h"
#include "lib/io/checkpoint_file.h"

namespace cabert::interop {

struct ExportOptions {
  std::string checkpoint;
  std::string output_dir;
  std::string tokenizer;  // "" = the one the checkpoint names
};

struct ExportSummary {
  ModelHead head = ModelHead::kEncoder;
  HfFamily family = HfFamily::kNone;
  std::string architecture;  // HF class, or "cabert/..." for the families HF lacks
  std::string why_not;       // family == kNone: why
  size_t tensors = 0;
  bool generator = false;  // generator/ written
};

ExportSummary export_checkpoint(const ExportOptions& options);

// The checkpoint's model tensors ("model/" stripped), and what they hold on top of the encoder, told by which
// tensor names exist (`has`).
std::map<std::string, torch::Tensor> model_tensors(const io::Checkpoint& checkpoint);
ModelHead detect_head(const std::function<bool(const std::string&)>& has);

}  // namespace cabert::interop
