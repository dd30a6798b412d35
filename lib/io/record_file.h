// The container every cabert file uses. The whole file is a valid zstd stream (`zstd -d` prints the
// length-delimited protobuf bytes), made of:
//
//   magic     skippable frame 0x184D2A5A, 8 bytes: "CABERT\0" + container version
//   then, repeated:
//   marker    skippable frame 0x184D2A5B, 24 bytes: u32 kind (1 header, 2 records, 3 footer),
//             u32 record count, u64 compressed size, u64 decompressed size (little endian)
//   frame     one zstd frame with a content checksum: the header message, a run of varint-length-delimited
//             records (~1 MiB decompressed), or the footer message
//
// The markers let a reader count records and skip frames without decompressing them (N workers of a
// distributed run each read a disjoint set of frames); the footer tells a clean end from a truncation at
// a frame boundary. Writers go through AtomicOutput: a temporary file renamed on close().
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <memory>
#include <string>

#include "formats/header.pb.h"
#include "lib/core/files.h"

namespace google::protobuf {
class Message;
}

namespace cabert::io {

inline constexpr uint32_t kContainerVersion = 1;

struct WriterOptions {
  size_t frame_bytes = 1 << 20;  // decompressed bytes per records frame
  uint32_t frame_records = 0;    // > 0: at most this many records per frame (finer shares for data parallelism)
  int compression_level = 3;
  // A growing file (metrics.cabert): the first flush() renames the file into place, every flush() appends the
  // pending records as complete frames readers see at once, and the header says so (Header.appended), so a
  // reader that finds no footer stops after the last complete frame instead of reporting a truncation. Once
  // flushed, the file stays without close(), as far as it was flushed.
  bool appended = false;
};

class RecordWriter {
 public:
  // `type` must be registered in record_types.cc; `metadata` goes to the header.
  RecordWriter(const std::string& path, const std::string& type,
               const std::map<std::string, std::string>& metadata = {}, WriterOptions options = {});
  ~RecordWriter();  // without close(), the temporary file is removed and nothing is written under `path`
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  void write(const google::protobuf::Message& record);
  // Writes the pending records as a frame now and hands it to the operating system.
  void flush();
  // Flushes the last frame, writes the footer and renames the file into place.
  void close();

  uint64_t records_written() const { return records_; }
  const pb::Header& header() const { return header_; }

 private:
  void flush_frame();
  void write_frame(uint32_t kind, uint32_t record_count, const std::string& data);

  AtomicOutput out_;
  pb::Header header_;
  WriterOptions options_;
  std::string pending_;
  uint32_t pending_records_ = 0;
  uint64_t records_ = 0, frames_ = 0;
  bool closed_ = false;
  struct ZstdContext;
  std::unique_ptr<ZstdContext> zstd_;
};

class RecordReader {
 public:
  // Opens `path` ("-" for stdin) and reads the header.
  explicit RecordReader(const std::string& path);
  // Reads from an already opened stream; `name` is used in messages.
  RecordReader(std::string name, std::unique_ptr<std::istream> in);
  ~RecordReader();

  const pb::Header& header() const { return header_; }
  const std::string& name() const { return name_; }
  // Refuses (DataError) a file of another record type or of a newer schema version.
  void expect(const std::string& type) const;
  // Only frames f (0-based among record frames) with f % stride == phase are decoded; others are skipped.
  void select_frames(uint32_t phase, uint32_t stride);

  // Reads the next record into `record`; false after the footer. Throws DataError on truncation or
  // corruption, naming the file and the byte offset of the frame.
  bool next(google::protobuf::Message* record);
  // Same, without parsing: the serialized bytes of the next record.
  bool next_bytes(std::string* bytes);
  // Before any next(): walks the frames by their markers without decompressing the records (seeking over them in
  // a regular file) and reads the footer, so a truncated or damaged file is refused before a long job starts
  // on it rather than when it gets there. Returns the number of records; DataError as next() would throw.
  uint64_t skip_to_end();

  uint64_t records_read() const { return records_read_; }
  // The position in the file of the record next() returned last (0-based; frames select_frames() skipped
  // count too).
  uint64_t last_record_index() const { return records_read_ + records_skipped_ - 1; }
  uint64_t offset() const { return offset_; }
  // Valid once next() returned false.
  const pb::Footer& footer() const { return footer_; }
  // Once next() returned false: true when a growing file (Header.appended) ended without its footer, because
  // its writer is still running or was killed; the records read are those of its complete frames.
  bool unfinished() const { return unfinished_; }

 private:
  struct Marker {
    uint32_t kind = 0, record_count = 0;
    uint64_t compressed_size = 0, decompressed_size = 0;
    uint64_t offset = 0;
  };
  void read_magic();
  // end_allowed: false at the end of input (a growing file: also inside the marker).
  bool read_marker(Marker* marker, bool end_allowed);
  std::string read_frame(const Marker& marker);
  // The compressed bytes of a frame; false when the input ends first.
  bool read_compressed(const Marker& marker, std::string* compressed);
  std::string decompress_frame(const Marker& marker, const std::string& compressed);
  void skip_frame(const Marker& marker);
  bool load_next_records_frame();
  bool end_unfinished();  // a growing file ends here: returns false
  // The bytes of the next record inside the current frame (valid until the next call).
  bool next_view(const char** data, size_t* size);
  size_t read_some(char* data, size_t size);
  [[noreturn]] void fail(uint64_t offset, const std::string& message) const;

  std::string name_;
  std::unique_ptr<std::istream> in_;
  pb::Header header_;
  pb::Footer footer_;
  uint64_t offset_ = 0, records_read_ = 0, records_skipped_ = 0, record_frame_index_ = 0;
  uint32_t phase_ = 0, stride_ = 1;
  bool skip_all_ = false;
  uint64_t file_size_ = 0;  // a regular file's size, for seeking over skipped frames; 0: not seekable
  std::string frame_;
  size_t frame_position_ = 0;
  uint64_t frame_offset_ = 0;
  uint32_t frame_records_expected_ = 0, frame_records_seen_ = 0;
  bool done_ = false, unfinished_ = false;
  struct ZstdContext;
  std::unique_ptr<ZstdContext> zstd_;
};

// True when the first bytes are the cabert magic frame.
bool starts_with_record_magic(const std::string& prefix);
inline constexpr size_t kMagicSize = 16;

// An istream that first yields `prefix` and then the rest of `in`: lets a caller sniff the first bytes of
// a pipe and still hand the whole input on.
std::unique_ptr<std::istream> prepend(std::string prefix, std::unique_ptr<std::istream> in);

}  // namespace cabert::io
