#include "lib/interop/import_plan.h"

#include <algorithm>
#include <limits>
#include <map>

#include "lib/core/errors.h"
#include "lib/core/json_input.h"
#include "lib/interop/hf_config_reader.h"

namespace cabert::interop {

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t times(uint64_t a, uint64_t b) { return a != 0 && b > kMax / a ? kMax : a * b; }
uint64_t plus(uint64_t a, uint64_t b) { return b > kMax - a ? kMax : a + b; }

// config.json's name of a ModelConfig field: Hugging Face's key, or the path into cabert's block.
std::string key(const std::string& model_type, const std::string& field, int64_t value) {
  static const std::map<std::string, std::string> hf = {
      {"num_layers", "num_hidden_layers"}, {"max_length", "max_position_embeddings"},
      {"convbert.conv_kernel_size", "conv_kernel_size"}, {"convbert.ffn_groups", "num_groups"}};
  std::string name = field;
  if (model_type == "cabert") {
    name = "cabert.model." + field;
  } else if (auto it = hf.find(field); it != hf.end()) {
    name = it->second;
  } else if (field == "embedding_size" && model_type == "bert") {
    name = "hidden_size";
  }
  return str(name, " ", value);
}

// Per layer: one H x H projection (every mixer's output) and the feed-forward network's two H x I matrices.
uint64_t layer_weights(const pb::ModelConfig& c, int64_t groups) {
  const uint64_t H = c.hidden_size(), I = c.intermediate_size();
  return plus(times(H, H), times(2, times(H, I)) / static_cast<uint64_t>(groups));
}

uint64_t kernel_sum(const google::protobuf::RepeatedField<int32_t>& kernels, int64_t layers) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < layers && !kernels.empty(); ++i) {
    sum = plus(sum, static_cast<uint64_t>(kernels[static_cast<int>(std::min<int64_t>(i, kernels.size() - 1))]));
  }
  return sum;
}

const char* safe_dtype_of_config(const std::string& dtype) {
  if (dtype == "float32") return "F32";
  if (dtype == "float16") return "F16";
  if (dtype == "bfloat16") return "BF16";
  if (dtype == "float64") return "F64";
  return nullptr;
}

std::string config_dtype(const nlohmann::json& json, const std::string& path) {
  for (const char* name : {"dtype", "torch_dtype"}) {
    auto it = json.find(name);
    if (it == json.end() || it->is_null()) continue;
    const char* safe = it->is_string() ? safe_dtype_of_config(it->get<std::string>()) : nullptr;
    if (!safe) {
      throw DataError(str(path, ": '", name, "' is ", it->dump(),
                          "; cabert imports float32, float16, bfloat16 or float64 weights"));
    }
    return safe;
  }
  return "";
}

bool floating(io::SafeDtype dtype) {
  return dtype == io::SafeDtype::kF32 || dtype == io::SafeDtype::kF16 || dtype == io::SafeDtype::kBF16 ||
         dtype == io::SafeDtype::kF64;
}
bool torch_reads(io::SafeDtype dtype) {
  return floating(dtype) || dtype == io::SafeDtype::kI64 || dtype == io::SafeDtype::kI32 ||
         dtype == io::SafeDtype::kI16 || dtype == io::SafeDtype::kI8 || dtype == io::SafeDtype::kU8 ||
         dtype == io::SafeDtype::kBool;
}

// Whether a stored tensor the model does not take lies inside the encoder, where it means the config describes
// fewer layers or parts than the file has (heads beside the encoder are left behind, a warning says which).
bool inside_encoder(const std::string& name, const std::string& base) {
  std::string rest = !base.empty() && name.rfind(base, 0) == 0 ? name.substr(base.size()) : name;
  if (rest == "embeddings.position_ids" || rest == "embeddings.token_type_ids") return false;  // HF's buffers
  return rest.rfind("embeddings.", 0) == 0 || rest.rfind("encoder.", 0) == 0 ||
         rest.rfind("embeddings_project.", 0) == 0;
}

}  // namespace

std::string stored_base_prefix(const std::string& model_type) {
  return model_type == "cabert" ? "" : model_type + ".";
}

std::vector<SizeTerm> least_weights(const pb::ModelConfig& c, const std::string& type) {
  const int64_t V = c.vocab_size(), E = c.embedding_size(), H = c.hidden_size(), L = c.num_layers();
  std::vector<SizeTerm> terms;
  terms.push_back({str(key(type, "vocab_size", V), " x ", key(type, "embedding_size", E)), times(V, E)});
  if (!c.has_seq2seq() && c.attention().absolute_positions()) {
    terms.push_back({str(key(type, "max_length", c.max_length()), " x ", key(type, "embedding_size", E)),
                     times(c.max_length(), E)});
  }
  if (E != H) terms.push_back({str(key(type, "embedding_size", E), " x ", key(type, "hidden_size", H)), times(E, H)});
  const int64_t groups = c.family() == pb::CONVBERT ? std::max(1, c.convbert().ffn_groups()) : 1;
  const std::string layer_keys =
      str(key(type, "hidden_size", H), " x (", key(type, "hidden_size", H), " + 2 x ",
          key(type, "intermediate_size", c.intermediate_size()),
          groups > 1 ? str(" / ", key(type, "convbert.ffn_groups", groups)) : std::string(), ")");
  terms.push_back({str(key(type, "num_layers", L), " x ", layer_keys), times(L, layer_weights(c, groups))});
  if (c.family() == pb::CONVBERT) {  // the depthwise key convolution, H x k per layer
    terms.push_back({str(key(type, "num_layers", L), " x ", key(type, "hidden_size", H), " x ",
                         key(type, "convbert.conv_kernel_size", c.convbert().conv_kernel_size())),
                     times(L, times(H, c.convbert().conv_kernel_size()))});
  }
  const auto& a = c.attention();
  if (a.relative_fixed() || a.relative_dynamic() || a.relative_key() || a.depthwise_values()) {
    const int64_t radius = a.relative_radius();
    terms.push_back({str(key(type, "num_layers", L), " x (2 x ", key(type, "attention.relative_radius", radius),
                         " + 1)"),
                     times(L, plus(times(2, radius), 1))});
  }
  if (c.has_conv_block()) {
    terms.push_back({str("the conv_block.kernel_sizes of ", key(type, "num_layers", L), " layers"),
                     kernel_sum(c.conv_block().kernel_sizes(), L)});
  }
  if (c.has_seq2seq()) {
    const int64_t D = c.seq2seq().decoder_layers();
    terms.push_back({str(key(type, "seq2seq.decoder_layers", D), " x ", layer_keys), times(D, layer_weights(c, 1))});
    terms.push_back({str("the seq2seq.decoder_kernel_sizes of ", key(type, "seq2seq.decoder_layers", D), " layers"),
                     kernel_sum(c.seq2seq().decoder_kernel_sizes(), D)});
  }
  return terms;
}

ImportPlan plan_import(const std::string& config_text, const std::string& config_path,
                       const std::vector<io::SafeTensorInfo>& tensors, uint64_t data_bytes,
                       const std::string& weights_path) {
  nlohmann::json json;
  try {
    json = parse_json_input(config_text);
  } catch (const JsonInputError& error) {
    throw DataError(error.byte() ? str(config_path, ": not valid JSON at byte ", error.byte(), ": ", error.what())
                                 : str(config_path, ": not valid JSON: ", error.what()));
  }
  ImportPlan plan;
  ConfigReading reading = read_model_config_json(json, config_path);
  plan.config = reading.config;
  plan.model_type = reading.model_type;
  plan.config_dtype = config_dtype(json, config_path);

  uint64_t weights = 0;
  const SizeTerm* largest = nullptr;
  const std::vector<SizeTerm> terms = least_weights(plan.config, plan.model_type);
  for (const auto& term : terms) {
    weights = plus(weights, term.weights);
    if (!largest || term.weights > largest->weights) largest = &term;
  }
  plan.least_bytes = times(weights, kLeastBytesPerWeight);
  if (plan.least_bytes > data_bytes) {
    throw DataError(str(config_path, ": its sizes need at least ", weights, " weights (", plan.least_bytes,
                        " bytes even as F16/BF16; the largest part: ", largest->keys, "), but ", weights_path,
                        " holds ", data_bytes, " bytes of tensors (", tensors.size(), " tensors)"));
  }
  return plan;
}

StoredNames::StoredNames(const std::vector<io::SafeTensorInfo>& tensors, std::string base_prefix)
    : base_(std::move(base_prefix)) {
  for (const auto& info : tensors) names_.insert(info.name);
}

std::string StoredNames::find(const std::string& name) const {
  if (names_.count(name)) return name;
  if (!base_.empty() && name.rfind(base_, 0) == 0 && names_.count(name.substr(base_.size()))) {
    return name.substr(base_.size());
  }
  return "";
}

std::vector<std::string> match_tensors(const ImportPlan& plan, const std::vector<ExpectedTensor>& expected,
                                       const std::vector<io::SafeTensorInfo>& tensors, const std::string& weights_path,
                                       const std::string& config_path) {
  const std::string base = stored_base_prefix(plan.model_type);
  StoredNames names(tensors, base);
  std::map<std::string, const io::SafeTensorInfo*> info_of;
  for (const auto& info : tensors) info_of[info.name] = &info;
  std::vector<std::string> stored_names;
  std::set<std::string> used;
  for (const auto& want : expected) {
    const std::string stored = names.find(want.name);
    if (stored.empty()) {
      throw DataError(str(weights_path, ": no tensor '", want.name, "', which the model ", config_path, " describes needs"));
    }
    const io::SafeTensorInfo& info = *info_of.at(stored);
    const std::string where = str(weights_path, ": tensor '", stored, "'");
    if (!torch_reads(info.dtype)) {
      throw DataError(str(where, " has dtype ", io::safe_dtype_name(info.dtype),
                          ", which cabert cannot read (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)"));
    }
    if (!floating(info.dtype)) {
      throw DataError(str(where, " has dtype ", io::safe_dtype_name(info.dtype), "; expected floating-point weights"));
    }
    if (!plan.config_dtype.empty() && plan.config_dtype != io::safe_dtype_name(info.dtype)) {
      throw DataError(str(where, " has dtype ", io::safe_dtype_name(info.dtype), " but ", config_path,
                          " says 'dtype' ", plan.config_dtype));
    }
    if (info.shape != want.shape) {
      throw DataError(str(where, " has shape ", io::shape_text(info.shape), " but ", config_path, " describes ",
                          io::shape_text(want.shape)));
    }
    stored_names.push_back(stored);
    used.insert(stored);
  }
  for (const auto& info : tensors) {
    if (!used.count(info.name) && inside_encoder(info.name, base)) {
      throw DataError(str(weights_path, ": tensor '", info.name, "' ", io::shape_text(info.shape),
                          " is no part of the model ", config_path, " describes (",
                          key(plan.model_type, "num_layers", plan.config.num_layers()), ")"));
    }
  }
  return stored_names;
}

}  // namespace cabert::interop
