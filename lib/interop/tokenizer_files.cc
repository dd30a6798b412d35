#include "lib/interop/tokenizer_files.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/core/files.h"

namespace fs = std::filesystem;

namespace cabert::interop {

void write_tokenizer_files(const std::string& dir, const text::Tokenizer& tokenizer, int max_length) {
  using text::SpecialTokens;
  write_file_atomically((fs::path(dir) / "tokenizer.model").string(), read_file(tokenizer.path()));
  nlohmann::json j;
  j["model_file"] = "tokenizer.model";
  j["tokenizer_type"] = "sentencepiece";
  j["pad_token"] = "[PAD]", j["unk_token"] = "[UNK]", j["cls_token"] = "[CLS]", j["sep_token"] = "[SEP]";
  j["mask_token"] = "[MASK]";
  j["special_ids"] = {{"[PAD]", SpecialTokens::kPad},
                      {"[UNK]", SpecialTokens::kUnk},
                      {"[CLS]", SpecialTokens::kCls},
                      {"[SEP]", SpecialTokens::kSep},
                      {"[MASK]", SpecialTokens::kMask}};
  nlohmann::json sentinels = nlohmann::json::array();
  for (int i = 0; i < tokenizer.num_sentinels(); ++i) {
    sentinels.push_back({{"piece", tokenizer.id_to_piece(tokenizer.sentinel_id(i))}, {"id", tokenizer.sentinel_id(i)}});
  }
  j["sentinels"] = sentinels;
  j["framing"] = {{"single", "[CLS] a [SEP]"},
                  {"pair", "[CLS] a [SEP] b [SEP]"},
                  {"token_type_ids", "0 for [CLS] a [SEP], 1 for b [SEP]"}};
  j["vocab_size"] = tokenizer.vocab_size();
  j["model_max_length"] = max_length;
  j["cabert_checksum"] = tokenizer.checksum();
  write_file_atomically((fs::path(dir) / "tokenizer_config.json").string(), j.dump(2) + "\n");
}

std::string find_sentencepiece_model(const std::string& dir) {
  for (const char* name : {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model"}) {
    fs::path path = fs::path(dir) / name;
    if (fs::exists(path)) return path.string();
  }
  if (fs::exists(fs::path(dir) / "vocab.txt")) {
    throw DataError(str(dir, ": the tokenizer is a WordPiece vocabulary (vocab.txt); cabert tokenises with "
                             "SentencePiece only and cannot reproduce WordPiece ids. Pass --tokenizer MODEL (a "
                             "SentencePiece model whose ids match the embeddings) to import anyway"));
  }
  if (fs::exists(fs::path(dir) / "tokenizer.json")) {
    throw DataError(str(dir, ": the tokenizer is a tokenizers-library vocabulary (tokenizer.json) without a "
                             "SentencePiece model; cabert tokenises with SentencePiece only. Pass --tokenizer MODEL"));
  }
  throw DataError(str(dir, ": no tokenizer (looked for tokenizer.model, spiece.model, sentencepiece.bpe.model); "
                           "pass --tokenizer MODEL"));
}

}  // namespace cabert::interop
