#include "lib/io/record_file.h"

#include <google/protobuf/message.h>
#include <zstd.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <streambuf>

#include "lib/core/errors.h"
#include "lib/core/run_context.h"
#include "lib/io/record_types.h"

namespace cabert::io {
namespace {

constexpr uint32_t kMagicFrameId = 0x184D2A5A;
constexpr uint32_t kMarkerFrameId = 0x184D2A5B;
constexpr uint32_t kMarkerPayload = 24;
constexpr uint32_t kMarkerSize = 8 + kMarkerPayload;
constexpr char kMagicText[8] = {'C', 'A', 'B', 'E', 'R', 'T', '\0', static_cast<char>(kContainerVersion)};
constexpr uint64_t kMaxFrameBytes = uint64_t{8} << 30;  // sanity bound: larger sizes mean corruption

enum FrameKind : uint32_t { kHeaderFrame = 1, kRecordsFrame = 2, kFooterFrame = 3 };

void put_u32(std::string* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_u64(std::string* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* data) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(data[i]);
  return value;
}
uint64_t get_u64(const char* data) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(data[i]);
  return value;
}

void put_varint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Returns false when the varint is malformed or runs past `end`.
bool get_varint(const std::string& data, size_t* position, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *position < data.size(); shift += 7) {
    auto byte = static_cast<unsigned char>(data[(*position)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

std::string magic_frame() {
  std::string out;
  put_u32(&out, kMagicFrameId);
  put_u32(&out, sizeof(kMagicText));
  out.append(kMagicText, sizeof(kMagicText));
  return out;
}

class PrefixedStreambuf : public std::streambuf {
 public:
  PrefixedStreambuf(std::string prefix, std::unique_ptr<std::istream> in)
      : prefix_(std::move(prefix)), in_(std::move(in)) {
    char* begin = prefix_.data();
    setg(begin, begin, begin + prefix_.size());
  }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    in_->read(buffer_, sizeof(buffer_));
    std::streamsize got = in_->gcount();
    if (got <= 0) return traits_type::eof();
    setg(buffer_, buffer_, buffer_ + got);
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::string prefix_;
  std::unique_ptr<std::istream> in_;
  char buffer_[1 << 16];
};

class PrefixedStream : public std::istream {
 public:
  PrefixedStream(std::string prefix, std::unique_ptr<std::istream> in)
      : std::istream(nullptr), buffer_(std::move(prefix), std::move(in)) {
    rdbuf(&buffer_);
  }

 private:
  PrefixedStreambuf buffer_;
};

}  // namespace

bool starts_with_record_magic(const std::string& prefix) {
  return prefix.size() >= kMagicSize && prefix.compare(0, kMagicSize, magic_frame()) == 0;
}

std::unique_ptr<std::istream> prepend(std::string prefix, std::unique_ptr<std::istream> in) {
  return std::make_unique<PrefixedStream>(std::move(prefix), std::move(in));
}

// ---- writer -------------------------------------------------------------------------------------------

struct RecordWriter::ZstdContext {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ~ZstdContext() { ZSTD_freeCCtx(context); }
};

RecordWriter::RecordWriter(const std::string& path, const std::string& type,
                           const std::map<std::string, std::string>& metadata, WriterOptions options)
    : out_(path), options_(options), zstd_(std::make_unique<ZstdContext>()) {
  const RecordType& record = record_type(type);
  header_.set_magic("cabert");
  header_.set_message_type(record.full_name);
  header_.set_schema_version(record.schema_version);
  header_.set_cabert_version(cabert_version_and_commit());
  for (const auto& arg : run_context().argv) header_.add_argv(arg);
  for (const auto& [key, value] : run_context().options) (*header_.mutable_options())[key] = value;
  header_.set_config(run_context().config);
  for (const auto& [key, value] : metadata) (*header_.mutable_metadata())[key] = value;
  header_.set_appended(options_.appended);
  header_.set_created_unix(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  ZSTD_CCtx_setParameter(zstd_->context, ZSTD_c_compressionLevel, options_.compression_level);
  ZSTD_CCtx_setParameter(zstd_->context, ZSTD_c_checksumFlag, 1);
  std::string magic = magic_frame();
  out_.stream().write(magic.data(), static_cast<std::streamsize>(magic.size()));
  write_frame(kHeaderFrame, 0, header_.SerializeAsString());
}

RecordWriter::~RecordWriter() = default;

void RecordWriter::write(const google::protobuf::Message& record) {
  if (closed_) throw Error("internal: write after close on " + out_.path());
  if (record.GetDescriptor()->full_name() != header_.message_type()) {
    throw Error(
        str("internal: writing a ", record.GetDescriptor()->full_name(), " into a file of ", header_.message_type()));
  }
  const size_t size = record.ByteSizeLong();
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    // Written, it would be a file no protobuf reader can parse: refused while the cause is still known.
    throw DataError(str(display_name(out_.path(), true), ": record ", records_, " (a ",
                        record.GetDescriptor()->full_name(), ") would take ", size,
                        " bytes; protobuf parses records of at most ", std::numeric_limits<int>::max(),
                        " bytes, so it cannot be written"));
  }
  put_varint(&pending_, size);
  record.AppendToString(&pending_);
  ++pending_records_;
  ++records_;
  if (pending_.size() >= options_.frame_bytes ||
      (options_.frame_records > 0 && pending_records_ >= options_.frame_records)) {
    flush_frame();
  }
}

void RecordWriter::flush() {
  if (closed_) throw Error("internal: flush after close on " + out_.path());
  flush_frame();
  if (options_.appended) out_.publish();  // the first time: renamed into place (synced)
  out_.flush();
}

void RecordWriter::flush_frame() {
  if (pending_records_ == 0) return;
  write_frame(kRecordsFrame, pending_records_, pending_);
  pending_.clear();
  pending_records_ = 0;
  ++frames_;
}

void RecordWriter::write_frame(uint32_t kind, uint32_t record_count, const std::string& data) {
  std::string compressed(ZSTD_compressBound(data.size()), '\0');
  size_t size = ZSTD_compress2(zstd_->context, compressed.data(), compressed.size(), data.data(), data.size());
  if (ZSTD_isError(size)) throw Error(str("zstd compression failed: ", ZSTD_getErrorName(size)));
  std::string marker;
  put_u32(&marker, kMarkerFrameId);
  put_u32(&marker, kMarkerPayload);
  put_u32(&marker, kind);
  put_u32(&marker, record_count);
  put_u64(&marker, size);
  put_u64(&marker, data.size());
  auto& stream = out_.stream();
  stream.write(marker.data(), static_cast<std::streamsize>(marker.size()));
  stream.write(compressed.data(), static_cast<std::streamsize>(size));
  if (!stream) throw Error(str("error writing ", display_name(out_.path(), true)));
}

void RecordWriter::close() {
  if (closed_) return;
  flush_frame();
  pb::Footer footer;
  footer.set_record_count(records_);
  footer.set_frame_count(frames_);
  write_frame(kFooterFrame, 0, footer.SerializeAsString());
  out_.commit();
  closed_ = true;
}

// ---- reader -------------------------------------------------------------------------------------------

struct RecordReader::ZstdContext {
  ZSTD_DCtx* context = ZSTD_createDCtx();
  ~ZstdContext() { ZSTD_freeDCtx(context); }
};

RecordReader::RecordReader(const std::string& path) : RecordReader(display_name(path), open_input(path)) {
  file_size_ = file_size_or_zero(path);
}

RecordReader::RecordReader(std::string name, std::unique_ptr<std::istream> in)
    : name_(std::move(name)), in_(std::move(in)), zstd_(std::make_unique<ZstdContext>()) {
  read_magic();
  Marker marker;
  if (!read_marker(&marker, false) || marker.kind != kHeaderFrame) {
    fail(marker.offset, "expected the header frame after the magic");
  }
  std::string data = read_frame(marker);
  if (!header_.ParseFromString(data) || header_.magic() != "cabert") {
    fail(marker.offset, "the header frame does not hold a cabert header");
  }
}

RecordReader::~RecordReader() = default;

void RecordReader::fail(uint64_t offset, const std::string& message) const {
  throw DataError(at_offset(name_, offset, message));
}

size_t RecordReader::read_some(char* data, size_t size) {
  in_->read(data, static_cast<std::streamsize>(size));
  auto got = static_cast<size_t>(in_->gcount());
  offset_ += got;
  return got;
}

void RecordReader::read_magic() {
  char magic[kMagicSize];
  size_t got = read_some(magic, kMagicSize);
  if (got == 0) throw DataError(str(name_, ": empty input, expected a cabert record file"));
  if (got < kMagicSize && magic_frame().compare(0, got, std::string(magic, got)) == 0) {
    throw DataError(at_offset(name_, got, "truncated file: it ends inside the cabert magic"));
  }
  if (!starts_with_record_magic(std::string(magic, got))) {
    if (got >= 12 && get_u32(magic) == kMagicFrameId && std::memcmp(magic + 8, "CABERT", 6) == 0) {
      throw DataError(str(name_, ": cabert container version ", static_cast<int>(magic[15]),
                          " is not readable by this cabert (reads version ", kContainerVersion, ")"));
    }
    throw DataError(at_offset(name_, 0, "not a cabert record file (no cabert magic)"));
  }
}

bool RecordReader::read_marker(Marker* marker, bool end_allowed) {
  marker->offset = offset_;
  char bytes[kMarkerSize];
  size_t got = read_some(bytes, kMarkerSize);
  if (got == 0 && end_allowed) return false;
  if (got < kMarkerSize && end_allowed && header_.appended()) return false;  // its writer is mid-frame
  if (got < kMarkerSize) {
    fail(marker->offset,
         str("truncated file: expected a ", kMarkerSize, "-byte frame marker, got ", got, " bytes before the end"));
  }
  if (get_u32(bytes) != kMarkerFrameId || get_u32(bytes + 4) != kMarkerPayload) {
    fail(marker->offset, "corrupted file: expected a frame marker");
  }
  marker->kind = get_u32(bytes + 8);
  marker->record_count = get_u32(bytes + 12);
  marker->compressed_size = get_u64(bytes + 16);
  marker->decompressed_size = get_u64(bytes + 24);
  if (marker->kind < kHeaderFrame || marker->kind > kFooterFrame || marker->compressed_size > kMaxFrameBytes ||
      marker->decompressed_size > kMaxFrameBytes || (marker->kind != kRecordsFrame && marker->record_count != 0)) {
    fail(marker->offset, "corrupted file: the frame marker holds impossible values");
  }
  return true;
}

bool RecordReader::read_compressed(const Marker& marker, std::string* compressed) {
  // The sizes come from the file: memory grows with the bytes that actually arrive and decompress, never
  // with what a marker merely claims (a 100-byte file must not reserve gigabytes).
  compressed->clear();
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  while (compressed->size() < marker.compressed_size) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, marker.compressed_size - compressed->size()));
    size_t before = compressed->size();
    compressed->resize(before + want);
    size_t got = read_some(compressed->data() + before, want);
    compressed->resize(before + got);
    if (got < want) return false;
  }
  return true;
}

std::string RecordReader::read_frame(const Marker& marker) {
  std::string compressed;
  if (!read_compressed(marker, &compressed)) {
    fail(marker.offset, str("truncated file: the frame needs ", marker.compressed_size, " bytes, only ",
                            compressed.size(), " remain"));
  }
  return decompress_frame(marker, compressed);
}

std::string RecordReader::decompress_frame(const Marker& marker, const std::string& compressed) {
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  std::string data;
  ZSTD_DCtx_reset(zstd_->context, ZSTD_reset_session_only);
  ZSTD_inBuffer input{compressed.data(), compressed.size(), 0};
  size_t status = 1;
  while (status != 0) {
    // Geometric growth up to the claimed size, plus one byte that shows a frame holding more than it claims.
    size_t room = static_cast<size_t>(
        std::min<uint64_t>(std::max<uint64_t>(data.size(), kChunk), marker.decompressed_size + 1 - data.size()));
    size_t before = data.size();
    data.resize(before + room);
    ZSTD_outBuffer output{data.data() + before, room, 0};
    status = ZSTD_decompressStream(zstd_->context, &output, &input);
    data.resize(before + output.pos);
    if (ZSTD_isError(status)) fail(marker.offset, str("corrupted zstd frame: ", ZSTD_getErrorName(status)));
    if (data.size() > marker.decompressed_size) {
      fail(marker.offset,
           str("corrupted frame: decompresses to more than the ", marker.decompressed_size, " bytes its marker says"));
    }
    if (status != 0 && input.pos == input.size && output.pos < room) {
      fail(marker.offset, "corrupted zstd frame: it ends before its last block");
    }
  }
  if (input.pos != input.size) fail(marker.offset, "corrupted frame: bytes after the end of its zstd frame");
  if (data.size() != marker.decompressed_size) {
    fail(marker.offset,
         str("corrupted frame: decompressed to ", data.size(), " bytes, the marker says ", marker.decompressed_size));
  }
  return data;
}

void RecordReader::skip_frame(const Marker& marker) {
  uint64_t remaining = marker.compressed_size;
  if (file_size_ > 0 && !header_.appended()) {  // a growing file's size is a moving target: read through it
    if (remaining > file_size_ - std::min(offset_, file_size_)) {
      fail(marker.offset, "truncated file: the last frame ends early");
    }
    in_->seekg(static_cast<std::streamoff>(remaining), std::ios::cur);
    if (!*in_) fail(marker.offset, "cannot seek over the frame");
    offset_ += remaining;
    return;
  }
  char buffer[1 << 16];
  while (remaining > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(remaining, sizeof(buffer)));
    size_t got = read_some(buffer, want);
    if (got < want) fail(marker.offset, "truncated file: the last frame ends early");
    remaining -= got;
  }
}

void RecordReader::expect(const std::string& type) const {
  if (header_.message_type() != type) {
    throw DataError(
        str(name_, ": expected ", describe_record_type(type), ", got ", describe_record_type(header_.message_type())));
  }
  const RecordType* known = find_record_type(type);
  if (known && header_.schema_version() > known->schema_version) {
    throw DataError(str(name_, ": ", known->description, " written with schema version ", header_.schema_version(),
                        " (cabert ", header_.cabert_version(), "); this cabert reads up to version ",
                        known->schema_version, ", upgrade it"));
  }
}

void RecordReader::select_frames(uint32_t phase, uint32_t stride) {
  if (stride == 0 || phase >= stride) throw Error("internal: select_frames needs phase < stride");
  phase_ = phase;
  stride_ = stride;
}

bool RecordReader::load_next_records_frame() {
  while (true) {
    Marker marker;
    if (!read_marker(&marker, true)) {
      if (!header_.appended()) {
        fail(offset_, str("truncated file: it ends without the end-of-file frame (", records_read_, " records read)"));
      }
      return end_unfinished();
    }
    if (marker.kind == kFooterFrame) {
      std::string data = read_frame(marker);
      if (!footer_.ParseFromString(data)) fail(marker.offset, "corrupted footer");
      if (footer_.record_count() != records_read_ + records_skipped_) {
        fail(marker.offset, str("corrupted file: the footer counts ", footer_.record_count(), " records, ",
                                records_read_ + records_skipped_, " were found"));
      }
      char extra;  // the footer ends the file: more bytes are a second file appended (`cat a b`) or damage
      if (read_some(&extra, 1) != 0) {
        fail(offset_ - 1, "unexpected bytes after the end-of-file frame, expected the end of the file (files "
                          "concatenated? give each as its own input)");
      }
      done_ = true;
      return false;
    }
    if (marker.kind != kRecordsFrame) fail(marker.offset, "corrupted file: unexpected frame kind");
    bool selected = (record_frame_index_++ % stride_) == phase_ && !skip_all_;
    if (!selected) {
      records_skipped_ += marker.record_count;
      skip_frame(marker);
      continue;
    }
    if (header_.appended()) {
      // A growing file: a frame its writer has not finished yet ends the records read so far.
      std::string compressed;
      if (!read_compressed(marker, &compressed)) return end_unfinished();
      frame_ = decompress_frame(marker, compressed);
    } else {
      frame_ = read_frame(marker);
    }
    frame_position_ = 0;
    frame_offset_ = marker.offset;
    frame_records_expected_ = marker.record_count;
    frame_records_seen_ = 0;
    return true;
  }
}

bool RecordReader::end_unfinished() {
  done_ = true;
  unfinished_ = true;
  frame_.clear();
  frame_position_ = 0;
  frame_records_expected_ = frame_records_seen_ = 0;
  return false;
}

bool RecordReader::next_view(const char** data, size_t* size) {
  while (frame_position_ >= frame_.size()) {
    if (frame_records_seen_ != frame_records_expected_) {
      fail(frame_offset_,
           str("corrupted frame: holds ", frame_records_seen_, " records, its marker says ", frame_records_expected_));
    }
    if (done_) return false;
    if (!load_next_records_frame()) return false;
  }
  uint64_t length = 0;
  if (!get_varint(frame_, &frame_position_, &length) || length > frame_.size() - frame_position_) {
    fail(frame_offset_, "corrupted frame: a record length runs past the frame");
  }
  if (length > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    fail(frame_offset_, str("corrupted frame: a record claims ", length, " bytes, more than protobuf parses"));
  }
  *data = frame_.data() + frame_position_;
  *size = static_cast<size_t>(length);
  frame_position_ += length;
  ++records_read_;
  ++frame_records_seen_;
  return true;
}

uint64_t RecordReader::skip_to_end() {
  if (records_read_ + records_skipped_ > 0 || done_) throw Error("internal: skip_to_end() after next()");
  skip_all_ = true;
  const char* data = nullptr;
  size_t size = 0;
  next_view(&data, &size);  // loads no frame: skips them all up to the footer
  return records_skipped_;
}

bool RecordReader::next_bytes(std::string* bytes) {
  const char* data = nullptr;
  size_t size = 0;
  if (!next_view(&data, &size)) return false;
  bytes->assign(data, size);
  return true;
}

bool RecordReader::next(google::protobuf::Message* record) {
  const char* data = nullptr;
  size_t size = 0;
  if (!next_view(&data, &size)) return false;
  // Parsed straight from the decompressed frame: no copy per record on the training input path.
  if (!record->ParseFromArray(data, static_cast<int>(size))) {
    fail(frame_offset_,
         str("corrupted record ", records_read_, ": not a valid ", record->GetDescriptor()->full_name()));
  }
  return true;
}

}  // namespace cabert::io
