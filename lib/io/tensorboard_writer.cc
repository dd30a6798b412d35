#include "lib/io/tensorboard_writer.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "formats/tensorboard.pb.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"

namespace fs = std::filesystem;

namespace cabert::io {

namespace {

// Written by hand: Debian 12 packages no C/C++ CRC32C library (only python3-crc32c), and the byte-wise table
// below is all TFRecord framing needs (event files are small; speed is irrelevant here).
std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    table[i] = crc;
  }
  return table;
}

void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

double now_or(double wall_time) { return wall_time < 0 ? unix_seconds() : wall_time; }

}  // namespace

uint32_t crc32c(std::string_view data) {
  static const std::array<uint32_t, 256> table = crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  const uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  put_u32(out, masked_crc32c(std::string_view(out.data(), 8)));
  out.append(data);
  put_u32(out, masked_crc32c(data));
  return out;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorboardWriter::TensorboardWriter(const std::string& dir, const std::string& option) {
  create_output_directory(dir, option);
  const double wall_time = unix_seconds();
  // TensorBoard reads a directory's files in name order: a name taken (a second writer within the same second)
  // moves to a later second, never to a suffix that would sort before the file it follows.
  for (int64_t seconds = static_cast<int64_t>(wall_time), tries = 0; file_ == nullptr; ++seconds, ++tries) {
    path_ = (fs::path(dir) /
             str("events.out.tfevents.", seconds, ".", host_name(), ".", static_cast<int64_t>(getpid()), ".cabert"))
                .string();
    file_ = std::fopen(path_.c_str(), "wbx");  // x: never append to (or truncate) another writer's file
    if (file_ == nullptr && (errno != EEXIST || tries >= 1000)) {
      throw Error(str(option, " ", dir, ": cannot create ", path_, ": ", std::strerror(errno)));
    }
  }
  pb::tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_file_version("brain.Event:2");
  write(event);
}

TensorboardWriter::~TensorboardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorboardWriter::write(const pb::tensorboard::Event& event) {
  const std::string record = tfrecord(event.SerializeAsString());
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0) {
    throw Error(str("cannot write ", path_, ": ", std::strerror(errno)));
  }
  ++events_;
}

void TensorboardWriter::scalar(const std::string& tag, int64_t step, double value, double wall_time) {
  scalars({{tag, value}}, step, wall_time);
}

void TensorboardWriter::scalars(const std::map<std::string, double>& values, int64_t step, double wall_time) {
  if (values.empty()) return;
  pb::tensorboard::Event event;
  event.set_wall_time(now_or(wall_time));
  event.set_step(step);
  for (const auto& [tag, value] : values) {
    auto* entry = event.mutable_summary()->add_value();
    entry->set_tag(tag);
    entry->set_simple_value(static_cast<float>(value));
  }
  write(event);
}

void TensorboardWriter::text(const std::string& tag, int64_t step, const std::string& markdown, double wall_time) {
  pb::tensorboard::Event event;
  event.set_wall_time(now_or(wall_time));
  event.set_step(step);
  auto* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  entry->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* tensor = entry->mutable_tensor();
  tensor->set_dtype(pb::tensorboard::DT_STRING);
  tensor->mutable_tensor_shape();  // shape [] (one string)
  tensor->add_string_val(markdown);
  write(event);
}

void TensorboardWriter::image(const std::string& tag, int64_t step, const std::string& png, int width, int height,
                              int channels, double wall_time) {
  pb::tensorboard::Event event;
  event.set_wall_time(now_or(wall_time));
  event.set_step(step);
  auto* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  auto* image = entry->mutable_image();
  image->set_width(width);
  image->set_height(height);
  image->set_colorspace(channels);
  image->set_encoded_image_string(png);
  write(event);
}

void TensorboardWriter::session_start(int64_t step, double wall_time) {
  pb::tensorboard::Event event;
  event.set_wall_time(now_or(wall_time));
  event.set_step(step);
  event.mutable_session_log()->set_status(pb::tensorboard::SessionLog::START);
  write(event);
}

}  // namespace cabert::io
