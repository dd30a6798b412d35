#include "lib/io/record_types.h"

#include "formats/bench.pb.h"
#include "formats/checkpoint.pb.h"
#include "formats/corpus.pb.h"
#include "formats/header.pb.h"
#include "formats/metrics.pb.h"
#include "formats/task.pb.h"
#include "formats/text.pb.h"
#include "lib/core/errors.h"

namespace cabert::io {

const std::vector<RecordType>& all_record_types() {
  static const std::vector<RecordType> types = {
      {"cabert.pb.TokenizedText", "tokenized text", 1, pb::TokenizedText::descriptor()},
      {"cabert.pb.PretrainingExample", "pretraining examples", 1, pb::PretrainingExample::descriptor()},
      {"cabert.pb.CheckpointEntry", "checkpoint", 1, pb::CheckpointEntry::descriptor()},
      {"cabert.pb.MetricsRecord", "training metrics", 1, pb::MetricsRecord::descriptor()},
      {"cabert.pb.TaskMetrics", "task metrics", 1, pb::TaskMetrics::descriptor()},
      {"cabert.pb.BenchRecord", "benchmark records", 1, pb::BenchRecord::descriptor()},
  };
  return types;
}

const RecordType* find_record_type(const std::string& full_name) {
  for (const auto& type : all_record_types()) {
    if (type.full_name == full_name) return &type;
  }
  return nullptr;
}

const RecordType& record_type(const std::string& full_name) {
  const RecordType* type = find_record_type(full_name);
  if (type == nullptr) throw Error(str("internal: record type ", full_name, " is not registered"));
  return *type;
}

std::string describe_record_type(const std::string& full_name) {
  const RecordType* type = find_record_type(full_name);
  return type ? type->description : full_name;
}

}  // namespace cabert::io
