// metrics.cabert (lib/train/metrics_log.h). Pre-training's: records readable as they are added, a resumed run
// carries the records up to its checkpoint over and its clock goes on from theirs, a damaged file keeps what
// reads back. Fine-tuning's and translation's: the header's metadata, the carried records first, the clock.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/metrics.pb.h"
#include "formats/task.pb.h"
#include "lib/io/record_file.h"
#include "lib/train/metrics_log.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

struct ReadBack {
  std::vector<uint64_t> steps;
  std::vector<double> walls;
  bool unfinished = false;
};

ReadBack read_metrics(const std::string& path) {
  io::RecordReader reader(path);
  reader.expect("cabert.pb.MetricsRecord");
  ReadBack out;
  pb::MetricsRecord record;
  while (reader.next(&record)) {
    out.steps.push_back(record.step());
    out.walls.push_back(record.wall_seconds());
  }
  out.unfinished = reader.unfinished();
  return out;
}

TEST(MetricsLog, RecordsAreReadableAsTheyAreAddedAndComplete) {
  const std::string path = testing::temp_dir() + "/metrics.cabert";
  pb::ModelConfig config;
  config.set_name("tiny");
  {
    train::MetricsLog log(path, config);
    for (uint64_t step = 1; step <= 3; ++step) {
      log.add("train", step, 0.5 * step, {{"loss", 2.0 / step}});
      ReadBack live = read_metrics(path);
      EXPECT_EQ(live.steps.size(), step);
      EXPECT_TRUE(live.unfinished);
    }
  }  // the destructor writes the footer
  ReadBack done = read_metrics(path);
  EXPECT_EQ(done.steps, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_FALSE(done.unfinished);
}

TEST(MetricsLog, AResumeCarriesTheRecordsUpToItsCheckpointAndTheClock) {
  const std::string path = testing::temp_dir() + "/metrics.cabert";
  pb::ModelConfig config;
  {
    train::MetricsLog killed(path, config);
    for (uint64_t step = 1; step <= 8; ++step) killed.add("train", step, 10.0 * step, {});
    killed.add("eval", 4, 41.0, {});
    // As a killed run leaves it: no footer (the destructor would write one, so the file is cut instead).
  }
  std::string bytes = testing::read_text(path);
  {
    io::RecordReader reader(path);
    pb::MetricsRecord record;
    while (reader.next(&record)) {
    }
    ASSERT_FALSE(reader.unfinished());
  }
  // Cut the footer off (the last 32 + footer frame bytes): find the last marker.
  const size_t footer = bytes.rfind(std::string("\x5B\x2A\x4D\x18", 4));
  testing::write_text(path, bytes.substr(0, footer));
  ASSERT_TRUE(read_metrics(path).unfinished);

  train::MetricsLog resumed(path, config, /*keep_until_step=*/5);
  EXPECT_DOUBLE_EQ(resumed.carried_wall_seconds(), 50.0);
  resumed.add("train", 6, resumed.carried_wall_seconds() + 1, {});
  resumed.close();
  ReadBack back = read_metrics(path);
  EXPECT_EQ(back.steps, (std::vector<uint64_t>{1, 2, 3, 4, 5, 4, 6}));
  EXPECT_EQ(back.walls.back(), 51.0);
  EXPECT_FALSE(back.unfinished);
}

TEST(MetricsLog, ADamagedFileKeepsTheRecordsBeforeTheDamage) {
  const std::string path = testing::temp_dir() + "/metrics.cabert";
  pb::ModelConfig config;
  {
    train::MetricsLog first(path, config);
    for (uint64_t step = 1; step <= 6; ++step) first.add("train", step, step, {});
  }
  std::string bytes = testing::read_text(path);
  // Flip a byte inside the last record frame (before the footer marker): its checksum fails.
  const size_t footer = bytes.rfind(std::string("\x5B\x2A\x4D\x18", 4));
  bytes[footer - 3] = static_cast<char>(bytes[footer - 3] ^ 0x5a);
  testing::write_text(path, bytes);
  train::MetricsLog resumed(path, config, 6);
  resumed.close();
  EXPECT_EQ(read_metrics(path).steps, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

pb::TaskMetrics task_record(pb::TaskMetrics::Kind kind, uint64_t step, double seconds) {
  pb::TaskMetrics record;
  record.set_kind(kind);
  record.set_step(step);
  record.set_seconds(seconds);
  return record;
}

TEST(TaskMetricsLog, TheCarriedRecordsComeFirstEachAddReadsAtOnceAndCloseFinishesTheFile) {
  const std::string path = testing::temp_dir() + "/metrics.cabert";
  pb::ModelConfig config;
  train::TaskMetricsLogOptions options;
  options.metadata = {{"task", "translation"}, {"warmup_updates", "150"}};
  // Carried records out of order in time: the clock goes on from the largest.
  options.carried = {task_record(pb::TaskMetrics::TRAIN, 10, 7.5), task_record(pb::TaskMetrics::EPOCH, 12, 9.0),
                     task_record(pb::TaskMetrics::TRAIN, 20, 8.0)};
  train::TaskMetricsLog log(path, config, options);
  EXPECT_DOUBLE_EQ(log.seconds_before(), 9.0);
  EXPECT_EQ(log.tensorboard(), nullptr);
  log.add(task_record(pb::TaskMetrics::TRAIN, 30, 9.5));

  auto read_steps = [&](bool* unfinished) {
    io::RecordReader reader(path);
    reader.expect("cabert.pb.TaskMetrics");
    EXPECT_EQ(reader.header().metadata().at("task"), "translation");
    EXPECT_EQ(reader.header().metadata().at("warmup_updates"), "150");
    std::vector<uint64_t> steps;
    pb::TaskMetrics record;
    while (reader.next(&record)) steps.push_back(record.step());
    *unfinished = reader.unfinished();
    return steps;
  };
  bool unfinished = false;
  EXPECT_EQ(read_steps(&unfinished), (std::vector<uint64_t>{10, 12, 20, 30}));
  EXPECT_TRUE(unfinished);
  log.close();
  EXPECT_EQ(read_steps(&unfinished), (std::vector<uint64_t>{10, 12, 20, 30}));
  EXPECT_FALSE(unfinished);
}

}  // namespace
}  // namespace cabert
