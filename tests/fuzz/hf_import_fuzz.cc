// The refusals of `cabert export --from-hf DIR` (lib/interop/import_plan.h) on the pair of files it reads. One
// input holds both: a 4-byte little-endian length N, N bytes of config.json, then model.safetensors. The header is
// read as the import reads it, config.json planned against it (sizes bounded by the file's bytes), and the
// tensors every BERT-like model of the config has (token and position embeddings, the first layer's FFN)
// matched by name, shape and dtype.
#include <cstring>
#include <string>
#include <vector>

#include "lib/interop/import_plan.h"
#include "lib/io/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t config_bytes = 0;
  for (int i = 3; i >= 0; --i) config_bytes = (config_bytes << 8) | data[i];
  if (config_bytes > size - 4) return 0;
  const std::string config(reinterpret_cast<const char*>(data + 4), config_bytes);
  const uint8_t* weights = data + 4 + config_bytes;
  const size_t weights_size = size - 4 - config_bytes;
  const std::string& path = cabert::fuzz::input_file(weights, weights_size, ".safetensors");
  cabert::fuzz::expect_only<cabert::DataError>("hf import", [&] {
    cabert::io::SafetensorsFile file(path);
    const uint64_t data_bytes = weights_size - file.data_start();
    const cabert::interop::ImportPlan plan =
        cabert::interop::plan_import(config, "config.json", file.tensors(), data_bytes, path);
    if (plan.least_bytes > data_bytes) __builtin_trap();  // planned, yet claiming more than the file holds
    const auto& c = plan.config;
    const std::string base = cabert::interop::stored_base_prefix(plan.model_type);
    const std::string embeddings = plan.model_type == "cabert" ? "encoder.embeddings." : base + "embeddings.";
    std::vector<cabert::interop::ExpectedTensor> expected = {
        {embeddings + (plan.model_type == "cabert" ? "token.weight" : "word_embeddings.weight"),
         {c.vocab_size(), c.embedding_size()}},
        {embeddings + (plan.model_type == "cabert" ? "position.weight" : "position_embeddings.weight"),
         {c.max_length(), c.embedding_size()}},
        {base + "encoder.layer.0.intermediate.dense.weight", {c.intermediate_size(), c.hidden_size()}}};
    auto stored = cabert::interop::match_tensors(plan, expected, file.tensors(), path, "config.json");
    if (stored.size() != expected.size()) __builtin_trap();
    for (size_t i = 0; i < stored.size(); ++i) {
      if (file.info(stored[i]).shape != expected[i].shape) __builtin_trap();  // matched, yet another shape
    }
  });
  return 0;
}
