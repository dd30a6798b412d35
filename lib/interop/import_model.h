// `cabert export --from-hf DIR -o CKPT`: a Hugging Face BERT, ELECTRA or ConvBERT directory (config.json +
// model.safetensors + a SentencePiece tokenizer), or a directory `cabert export` wrote, turned into a cabert
// checkpoint that `finetune --init` (and `export`) accept. The encoder and the pre-training head come in (MLM,
// or ELECTRA's discriminator head); a fine-tuned task head is left behind (fine-tuning trains a fresh one)
// with a warning. Every tensor is checked against what config.json describes before anything is written:
// missing tensors, shapes that disagree with the config, dtypes cabert cannot read and untied output
// embeddings are DataErrors naming the file and the tensor.
#pragma once

#include <string>
#include <vector>

#include "lib/interop/hf_layout.h"

namespace cabert::interop {

struct ImportOptions {
  std::string hf_dir;
  std::string output;     // the checkpoint to write
  std::string tokenizer;  // "" = the SentencePiece model in hf_dir
};

struct ImportSummary {
  HfFamily family = HfFamily::kNone;
  ModelHead head = ModelHead::kEncoder;
  size_t tensors = 0;
  std::vector<std::string> ignored;  // tensors of the directory the checkpoint does not take
  std::string tokenizer;             // the tokenizer copy the checkpoint names
};

ImportSummary import_model(const ImportOptions& options);

// Where the tokenizer of an imported checkpoint goes: "<CKPT without .cabert>.tokenizer.model".
std::string imported_tokenizer_path(const std::string& checkpoint);

}  // namespace cabert::interop
