// TensorBoard event files, written without TensorFlow. A file is a run of TFRecords, each
//
//   u64 length (little endian) | u32 masked CRC32C of those 8 bytes | data | u32 masked CRC32C of the data
//
// where data is one serialised pb::tensorboard::Event (formats/tensorboard.proto) and the mask is
// ((crc >> 15) | (crc << 17)) + 0xa282ead8. The first event of a file says its version ("brain.Event:2").
// Each event is handed to the operating system as it is written, so TensorBoard (or a test) reads a running
// job's curves, and a job killed outright leaves every event written before the kill readable.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

namespace cabert::pb::tensorboard {
class Event;
}

namespace cabert::io {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses it: crc32c("123456789") = 0xE3069283.
uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);
// One TFRecord holding `data`.
std::string tfrecord(std::string_view data);

// The current time as an Event's wall_time (seconds since the Unix epoch).
double unix_seconds();

class TensorboardWriter {
 public:
  // Creates `dir` (and its parents; `option` names it in errors, e.g. "--tensorboard") and a new file in it,
  // events.out.tfevents.<seconds>.<hostname>.<pid>.cabert (a later <seconds> when that name is taken), whose
  // first event is the file version. A resumed run opens a new file beside the old ones; TensorBoard reads them all,
  // in name order.
  explicit TensorboardWriter(const std::string& dir, const std::string& option = "--tensorboard");
  ~TensorboardWriter();
  TensorboardWriter(const TensorboardWriter&) = delete;
  TensorboardWriter& operator=(const TensorboardWriter&) = delete;

  // A scalar (stored as float, as TensorBoard does). wall_time < 0: now.
  void scalar(const std::string& tag, int64_t step, double value, double wall_time = -1);
  // Several scalars of one step in one event.
  void scalars(const std::map<std::string, double>& values, int64_t step, double wall_time = -1);
  // Text for TensorBoard's text plugin (a DT_STRING tensor; the plugin renders it as Markdown).
  void text(const std::string& tag, int64_t step, const std::string& markdown, double wall_time = -1);
  // A PNG image of `width` x `height` pixels with `channels` colour channels (3 RGB, 4 RGBA).
  void image(const std::string& tag, int64_t step, const std::string& png, int width, int height, int channels,
             double wall_time = -1);
  // Tells readers the run (re)starts at `step`: they drop what they read at steps >= `step` from earlier files
  // (a killed run's steps after its last checkpoint), so a resumed run's curves have every step once.
  void session_start(int64_t step, double wall_time = -1);

  void write(const pb::tensorboard::Event& event);
  const std::string& path() const { return path_; }
  uint64_t events_written() const { return events_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t events_ = 0;
};

}  // namespace cabert::io
