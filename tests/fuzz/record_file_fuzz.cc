// The record container (lib/io/record_file.h): magic, frame markers, zstd frames, varint-delimited records,
// footer. Reads the header, checks the type against every registered one, then every record, parsed as the
// type its header names; a second pass reads every other frame through prepend() (what stdin sniffing
// hands on), as one of two data-parallel ranks does.
#include <google/protobuf/message.h>

#include <memory>
#include <sstream>
#include <string>

#include "lib/io/record_file.h"
#include "lib/io/record_types.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

void read_all(cabert::io::RecordReader& reader) {
  const cabert::io::RecordType* type = cabert::io::find_record_type(reader.header().message_type());
  for (const auto& known : cabert::io::all_record_types()) {
    cabert::fuzz::expect_only<cabert::DataError>("expect", [&] { reader.expect(known.full_name); });
  }
  if (type == nullptr) {
    std::string bytes;
    while (reader.next_bytes(&bytes)) {
    }
    return;
  }
  reader.expect(type->full_name);
  std::unique_ptr<google::protobuf::Message> record(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(type->descriptor)->New());
  while (reader.next(record.get())) {
    (void)reader.last_record_index();
  }
  (void)reader.footer().record_count();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  cabert::fuzz::expect_only<cabert::DataError>("record file", [&] {
    cabert::io::RecordReader reader("fuzz", std::make_unique<std::istringstream>(input));
    read_all(reader);
  });
  cabert::fuzz::expect_only<cabert::DataError>("record file, sniffed, frames 1 of 2", [&] {
    const size_t sniffed = std::min(input.size(), cabert::io::kMagicSize);
    (void)cabert::io::starts_with_record_magic(input.substr(0, sniffed));
    auto rest = std::make_unique<std::istringstream>(input.substr(sniffed));
    cabert::io::RecordReader reader("fuzz", cabert::io::prepend(input.substr(0, sniffed), std::move(rest)));
    reader.select_frames(1, 2);
    read_all(reader);
  });
  return 0;
}
