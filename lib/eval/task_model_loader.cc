#include "lib/eval/task_model_loader.h"

#include "lib/core/errors.h"
#include "lib/core/numbers.h"
#include "lib/io/checkpoint_file.h"

namespace cabert::eval {

LoadedTaskModel load_task_model(const std::string& path, torch::Device device) {
  io::Checkpoint checkpoint = io::load_checkpoint(path);
  if (checkpoint.info.kind() != "finetune") {
    throw DataError(str(path, ": expected a fine-tuned checkpoint (from `cabert finetune`), got a '",
                        checkpoint.info.kind(), "' checkpoint"));
  }
  LoadedTaskModel loaded;
  loaded.info = checkpoint.info;
  const auto& metadata = checkpoint.info.metadata();
  auto get = [&](const std::string& key) {
    auto it = metadata.find(key);
    if (it == metadata.end()) throw DataError(str(path, ": the checkpoint lacks the '", key, "' entry"));
    return it->second;
  };
  loaded.definition = tasks::definition_from_json(get("task"), &loaded.source);
  auto integer = [&](const std::string& key) {
    return static_cast<int>(parse_integer(get(key), 0, 1 << 20, str(path, ": metadata '", key, "'")));
  };
  loaded.max_length = integer("max_length");
  loaded.squad.max_length = loaded.max_length;
  loaded.squad.doc_stride = integer("doc_stride");
  loaded.squad.max_query_length = integer("max_query_length");
  loaded.squad.max_answer_length = integer("max_answer_length");
  loaded.squad.n_best = integer("n_best");
  loaded.squad.null_threshold = parse_finite(get("null_threshold"), str(path, ": metadata 'null_threshold'"));
  int64_t labels = loaded.definition.kind == tasks::TaskKind::kClassification ? loaded.definition.labels.size() : 1;
  // Checkpoints from before --pooling have no entry: they pooled [CLS].
  models::Pooling pooling = models::Pooling::kCls;
  if (auto entry = metadata.find("pooling"); entry != metadata.end()) {
    if (entry->second != "cls" && entry->second != "mean") {
      throw DataError(str(path, ": the checkpoint's 'pooling' entry is '", entry->second, "', expected cls or mean"));
    }
    pooling = models::parse_pooling(entry->second);
  }
  loaded.model = models::TaskModel(checkpoint.info.model(), loaded.definition.kind, labels, pooling);
  io::restore_module(*loaded.model, checkpoint, "model/", "");
  loaded.model->to(device);
  loaded.model->eval();
  return loaded;
}

}  // namespace cabert::eval
