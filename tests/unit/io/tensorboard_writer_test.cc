// TensorBoard event files: the CRC32C check value, the TFRecord framing, and files read back by the
// `tensorboard` package's own EventAccumulator (skipped when $CABERT_PYTHON lacks it): tags, steps and float32
// values exactly, while the writer is still open, after a torn last record (a kill mid-write), across a resume,
// and for `export --metrics --tensorboard` of pre-training and fine-tuning records.
#include "lib/io/tensorboard_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "formats/metrics.pb.h"
#include "formats/task.pb.h"
#include "lib/core/errors.h"
#include "lib/io/record_file.h"
#include "lib/io/tensorboard_metrics.h"
#include "tests/test_paths.h"

namespace fs = std::filesystem;

namespace cabert::io {
namespace {

using cabert::testing::python_with;
using cabert::testing::read_text;
using cabert::testing::run_python;
using cabert::testing::temp_dir;
using cabert::testing::write_text;

TEST(Crc32c, StandardCheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  const uint32_t crc = crc32c("123456789");
  EXPECT_EQ(masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(Tfrecord, Framing) {
  const std::string record = tfrecord("abc");
  ASSERT_EQ(record.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(record.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  auto u32_at = [&](size_t offset) {
    uint32_t value = 0;
    for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(record[offset + i]);
    return value;
  };
  EXPECT_EQ(u32_at(8), masked_crc32c(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(u32_at(15), masked_crc32c("abc"));
}

// Prints what TensorBoard reads from the event files of a directory into a file (the package's import warnings
// go to stderr, which run_python mixes in).
const char* kReader = R"(import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={'scalars': 0, 'tensors': 0, 'images': 0})
acc.Reload()
tags = acc.Tags()
lines = []
for tag in sorted(tags['scalars']):
    lines += ['scalar %s %d %.9g' % (tag, e.step, e.value) for e in acc.Scalars(tag)]
for tag in sorted(tags['tensors']):
    for e in acc.Tensors(tag):
        text = e.tensor_proto.string_val[0].decode()
        lines.append('text %s %d %s' % (tag, e.step, text.split('\n')[0]))
for tag in sorted(tags['images']):
    lines += ['image %s %d %dx%d %s' % (tag, e.step, e.width, e.height, e.encoded_image_string.hex())
              for e in acc.Images(tag)]
open(sys.argv[2], 'w').write(''.join(line + '\n' for line in lines))
)";

#define CABERT_REQUIRE_TENSORBOARD(python)         \
  std::string python = python_with("tensorboard"); \
  if (python.empty()) GTEST_SKIP() << "CABERT_PYTHON unset or without the tensorboard package: skipped"

// (temp_dir() empties the test's directory at each call: the reader's files go beside the events, once.)
std::string read_back(const std::string& python, const std::string& events_dir) {
  const std::string dir = (fs::path(events_dir).parent_path() / "reader").string();
  fs::create_directories(dir);
  write_text(dir + "/read.py", kReader);
  run_python(python, dir + "/read.py", str("'", events_dir, "' '", dir, "/read.txt'"));
  return read_text(dir + "/read.txt");
}

// A scalar line as the reader prints it: the value rounded to float32.
std::string scalar_line(const std::string& tag, int64_t step, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(static_cast<float>(value)));
  return str("scalar ", tag, " ", step, " ", buffer, "\n");
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(TensorboardWriter, TensorBoardReadsARunningAndAKilledWritersFile) {
  CABERT_REQUIRE_TENSORBOARD(python);
  const std::string dir = temp_dir() + "/tb";
  std::string path;
  const std::string expected = scalar_line("eval/a", 2, 1.0 / 3.0) + scalar_line("eval/b", 2, 1e10) +
                               scalar_line("train/loss", 1, 0.1) + scalar_line("train/loss", 2, 2.5) +
                               scalar_line("train/loss", 3, -1e-7) + "text run/options 0 first line\n" +
                               "image kernels/layer0 4 3x2 89504e470d0a1a0a\n";
  {
    TensorboardWriter writer(dir);
    path = writer.path();
    writer.text("run/options", 0, "first line\n```\nsecond\n```\n");
    writer.scalar("train/loss", 1, 0.1);
    writer.scalars({{"train/loss", 2.5}, {"eval/a", 1.0 / 3.0}, {"eval/b", 1e10}}, 2);
    writer.scalar("train/loss", 3, -1e-7);
    writer.image("kernels/layer0", 4, std::string("\x89PNG\r\n\x1a\n", 8), 3, 2, 3);
    EXPECT_EQ(writer.events_written(), 6u);  // the file version first
    EXPECT_EQ(read_back(python, dir), expected) << "read while the writer is open";
  }
  const std::string name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - 7), ".cabert") << name;
  // A writer killed in the middle of a record: the torn record is not read, everything before it is.
  const std::string torn = tfrecord(std::string(40, 'x'));
  std::ofstream(path, std::ios::binary | std::ios::app) << torn.substr(0, 21);
  EXPECT_EQ(read_back(python, dir), expected) << "read after a torn record";
}

TEST(TensorboardWriter, AResumedRunReplacesTheStepsAfterItsCheckpoint) {
  CABERT_REQUIRE_TENSORBOARD(python);
  const std::string dir = temp_dir() + "/tb";
  {
    TensorboardWriter killed(dir);  // logged steps 1-5, its last checkpoint at step 3
    for (int step = 1; step <= 5; ++step) killed.scalar("train/loss", step, step);
  }
  {
    TensorboardWriter resumed(dir);
    resumed.session_start(4);
    for (int step = 4; step <= 6; ++step) resumed.scalar("train/loss", step, 10 * step);
  }
  ASSERT_EQ(event_files(dir).size(), 2u);
  EXPECT_EQ(read_back(python, dir), scalar_line("train/loss", 1, 1) + scalar_line("train/loss", 2, 2) +
                                        scalar_line("train/loss", 3, 3) + scalar_line("train/loss", 4, 40) +
                                        scalar_line("train/loss", 5, 50) + scalar_line("train/loss", 6, 60));
}

pb::MetricsRecord metrics_record(const std::string& phase, uint64_t step, std::map<std::string, double> values) {
  pb::MetricsRecord record;
  record.set_phase(phase);
  record.set_step(step);
  record.set_wall_seconds(0.5 * static_cast<double>(step));
  for (const auto& [name, value] : values) (*record.mutable_values())[name] = value;
  return record;
}

pb::TaskMetrics task_record(pb::TaskMetrics::Kind kind, uint64_t step, double loss) {
  pb::TaskMetrics record;
  record.set_kind(kind);
  record.set_task("SST-2");
  record.set_split(kind == pb::TaskMetrics::TRAIN ? "train" : "dev");
  record.set_step(step);
  record.set_epoch(1);
  record.set_train_loss(loss);
  if (kind != pb::TaskMetrics::TRAIN) {
    (*record.mutable_metrics())["accuracy"] = 0.5666666666666667;
    record.set_score(56.666666666666664);
  }
  return record;
}

TEST(TensorboardExport, MetricsFilesBecomeTensorBoardRuns) {
  CABERT_REQUIRE_TENSORBOARD(python);
  const std::string dir = temp_dir();
  fs::create_directories(dir + "/pt");
  fs::create_directories(dir + "/ft");
  {
    RecordWriter writer(dir + "/pt/metrics.cabert", "cabert.pb.MetricsRecord");
    writer.write(metrics_record("train", 1, {{"loss", 6.1789283752441406}, {"lr", 0.0003}, {"grad_norm", 3.6}}));
    writer.write(metrics_record("train", 2, {{"loss", 6.2595186233520508}, {"lr", 0.00027272727272727268}}));
    writer.write(metrics_record("eval", 2, {{"mlm_loss", 6.2171898625203683}}));
    writer.close();
  }
  {
    RecordWriter writer(dir + "/ft/metrics.cabert", "cabert.pb.TaskMetrics");
    writer.write(task_record(pb::TaskMetrics::TRAIN, 4, 0.69480128586292267));
    writer.write(task_record(pb::TaskMetrics::EPOCH, 10, 0.69551847577095027));
    writer.write(task_record(pb::TaskMetrics::BEST_OF_RUN, 10, 0.69551847577095027));
    writer.close();
  }
  const std::string out = dir + "/tb";
  const auto files = export_tensorboard({{dir + "/pt/metrics.cabert", ""}, {dir + "/ft/metrics.cabert", "fine"}}, out);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(fs::path(files[0]).parent_path(), fs::path(out) / "pt");
  EXPECT_EQ(fs::path(files[1]).parent_path(), fs::path(out) / "fine");

  const std::string pt = read_back(python, out + "/pt");
  EXPECT_EQ(pt.substr(0, pt.find("text ")),
            scalar_line("eval/mlm_loss", 2, 6.2171898625203683) + scalar_line("train/grad_norm", 1, 3.6) +
                scalar_line("train/loss", 1, 6.1789283752441406) + scalar_line("train/loss", 2, 6.2595186233520508) +
                scalar_line("train/lr", 1, 0.0003) + scalar_line("train/lr", 2, 0.00027272727272727268));
  EXPECT_NE(pt.find("text run/options 0 cabert "), std::string::npos) << pt;

  const std::string ft = read_back(python, out + "/fine");
  EXPECT_EQ(ft.substr(0, ft.find("text ")), scalar_line("dev/SST-2/accuracy", 10, 0.5666666666666667) +
                                                scalar_line("dev/SST-2/score", 10, 56.666666666666664) +
                                                scalar_line("train/epoch_loss", 10, 0.69551847577095027) +
                                                scalar_line("train/loss", 4, 0.69480128586292267));
  EXPECT_NE(ft.find("text best/SST-2 10 run 1 (seed 0): epoch 1, step 10, score 56.6667"), std::string::npos) << ft;
  EXPECT_NE(ft.find("text run/options 0 cabert "), std::string::npos) << ft;

  // Exporting again adds a file whose restart at step 0 replaces the first export's curves. (The legacy
  // EventAccumulator purges scalars and images at a restart but keeps tensors, so the text shows twice there;
  // TensorBoard's own plugin accumulator purges those too.)
  export_tensorboard({{dir + "/pt/metrics.cabert", ""}}, out);
  EXPECT_EQ(event_files(out + "/pt").size(), 2u);
  const std::string again = read_back(python, out + "/pt");
  EXPECT_EQ(again.substr(0, again.find("text ")), pt.substr(0, pt.find("text ")));
}

TEST(TensorboardExport, RefusesOtherFiles) {
  const std::string dir = temp_dir();
  {
    RecordWriter writer(dir + "/x.cabert", "cabert.pb.TokenizedText");
    writer.close();
  }
  EXPECT_NE(cabert::testing::data_error_message([&] {
              export_tensorboard({{dir + "/x.cabert", ""}}, dir + "/tb");
            }).find("expected training metrics"),
            std::string::npos);
}

}  // namespace
}  // namespace cabert::io
