// What `cabert export --from-hf DIR` decides before it allocates anything (torch-free, fuzzed by
// tests/fuzz/hf_import_fuzz.cc): config.json read into a ModelConfig, its sizes checked against the bytes
// model.safetensors holds (a bound from the header alone), and then every tensor the model needs matched by
// name, shape and dtype against the header. Every refusal is a DataError naming the file and the key or tensor.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "formats/model.pb.h"
#include "lib/io/safetensors.h"

namespace cabert::interop {

// config.json larger than this is refused before it is read (a real one is a few kilobytes).
inline constexpr uint64_t kMaxConfigJsonBytes = 16u << 20;
// The fewest bytes a weight is accepted in (F16 / BF16): the bound the config's sizes are compared with.
inline constexpr uint64_t kLeastBytesPerWeight = 2;

// One part of the parameter count a config implies, for the message that names the keys behind it.
struct SizeTerm {
  std::string keys;  // "vocab_size 30522 x embedding_size 128"
  uint64_t weights = 0;
};

// A lower bound of the number of weights any model of `config` holds (each term is a tensor, or a set of
// tensors, every such model has), keyed as `model_type`'s config.json names them.
std::vector<SizeTerm> least_weights(const pb::ModelConfig& config, const std::string& model_type);

struct ImportPlan {
  pb::ModelConfig config;
  std::string model_type;    // "bert", "electra", "convbert", "cabert"
  std::string config_dtype;  // the "dtype" / "torch_dtype" key as a safetensors dtype ("F32"), "" if absent
  uint64_t least_bytes = 0;  // least_weights x kLeastBytesPerWeight
};

// config.json's text read and checked against the tensors of the weights file (its header: `tensors`, the data
// buffer's size `data_bytes`). Throws DataError for invalid JSON, a key cabert cannot import (hf_config_reader.h),
// a "dtype" that is no float type, and sizes that need more bytes than the file holds.
ImportPlan plan_import(const std::string& config_text, const std::string& config_path,
                       const std::vector<io::SafeTensorInfo>& tensors, uint64_t data_bytes,
                       const std::string& weights_path);

// The tensor names of a weights file, looked up with HF's base prefix ("bert.") or without it (a base model's
// save_pretrained writes "embeddings...." where a model with a head writes "bert.embeddings....").
class StoredNames {
 public:
  StoredNames(const std::vector<io::SafeTensorInfo>& tensors, std::string base_prefix);
  // The name as stored, or "" when absent.
  std::string find(const std::string& name) const;
  bool has(const std::string& name) const { return !find(name).empty(); }
  const std::set<std::string>& all() const { return names_; }

 private:
  std::string base_;
  std::set<std::string> names_;
};

// A tensor the model needs, under its name in the file (before the base-prefix lookup) and its shape there.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// Matches `expected` against the header: each present, with the shape the config implies and a floating-point
// dtype torch reads (the config's "dtype" if it has one); and no tensor of the encoder beyond them (a layer
// or a part the config does not describe). Returns the stored name of each expected tensor, in order.
std::vector<std::string> match_tensors(const ImportPlan& plan, const std::vector<ExpectedTensor>& expected,
                                       const std::vector<io::SafeTensorInfo>& tensors, const std::string& weights_path,
                                       const std::string& config_path);

// The prefix of HF's base model in tensor names ("bert."); "" for cabert's own exports.
std::string stored_base_prefix(const std::string& model_type);

}  // namespace cabert::interop
