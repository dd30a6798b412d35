// The kinds of record a cabert file can hold, registered explicitly (no static-initialiser registry): the
// protobuf type, the words used in messages ("expected pretraining examples, got tokenized text") and the
// schema version this build writes and reads. Add new record types to record_types.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace google::protobuf {
class Descriptor;
}

namespace cabert::io {

struct RecordType {
  std::string full_name;    // "cabert.pb.TokenizedText"
  std::string description;  // "tokenized text"
  uint32_t schema_version;  // highest version this build reads; the version it writes
  const google::protobuf::Descriptor* descriptor;
};

// nullptr when the type is unknown to this build.
const RecordType* find_record_type(const std::string& full_name);
// Throws Error for an unknown type (a programming error in the caller).
const RecordType& record_type(const std::string& full_name);
const std::vector<RecordType>& all_record_types();
// "tokenized text" for known types, else the protobuf name.
std::string describe_record_type(const std::string& full_name);

}  // namespace cabert::io
