#include "lib/io/tensorboard_metrics.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "lib/core/errors.h"
#include "lib/io/record_file.h"

namespace fs = std::filesystem;

namespace cabert::io {

namespace {

// A Markdown code block that no line of `text` can close early.
std::string code_block(const std::string& text) {
  std::string fence = "```";
  while (text.find(fence) != std::string::npos) fence += "`";
  return str(fence, "\n", text, text.empty() || text.back() == '\n' ? "" : "\n", fence, "\n");
}

std::string quoted_argv(const pb::Header& header) {
  std::string line;
  for (const auto& arg : header.argv()) {
    const bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    line += (line.empty() ? "" : " ") + (plain ? arg : str("'", arg, "'"));
  }
  return line;
}

std::string unique_label(std::string label, std::set<std::string>& used) {
  if (label.empty() || label == "." || label == "..") label = "run";
  std::string candidate = label;
  for (int n = 2; !used.insert(candidate).second; ++n) candidate = str(label, "-", n);
  return candidate;
}

std::string default_label(const std::string& metrics) {
  const fs::path path = fs::absolute(metrics).lexically_normal();
  const std::string dir = path.parent_path().filename().string();
  return dir.empty() ? path.stem().string() : dir;
}

}  // namespace

std::string run_options_markdown(const pb::Header& header) {
  std::string text = str("cabert ", header.cabert_version().empty() ? "(version unknown)" : header.cabert_version());
  if (header.argv_size() > 0) text += "\n\n" + code_block(quoted_argv(header));
  if (!header.config().empty()) text += "\n" + code_block(header.config());
  return text;
}

void write_summary(TensorboardWriter& writer, const pb::MetricsRecord& record, double wall_time) {
  std::map<std::string, double> values;
  const std::string phase = record.phase().empty() ? "train" : record.phase();
  for (const auto& [name, value] : record.values()) values[str(phase, "/", name)] = value;
  writer.scalars(values, static_cast<int64_t>(record.step()), wall_time);
}

void write_summary(TensorboardWriter& writer, const pb::TaskMetrics& record, double wall_time) {
  const auto step = static_cast<int64_t>(record.step());
  switch (record.kind()) {
    case pb::TaskMetrics::TRAIN: writer.scalar("train/loss", step, record.train_loss(), wall_time); break;
    case pb::TaskMetrics::EPOCH: {
      std::map<std::string, double> values;
      for (const auto& [name, value] : record.metrics())
        values[str(record.split(), "/", record.task(), "/", name)] = value;
      values[str(record.split(), "/", record.task(), "/score")] = record.score();
      values["train/epoch_loss"] = record.train_loss();
      writer.scalars(values, step, wall_time);
      break;
    }
    case pb::TaskMetrics::BEST_OF_RUN: {
      std::map<std::string, double> sorted(record.metrics().begin(), record.metrics().end());
      std::string metrics;
      for (const auto& [name, value] : sorted) metrics += str(metrics.empty() ? "" : ", ", name, " ", value);
      writer.text(str("best/", record.task()), step,
                  str("run ", record.run() + 1, " (seed ", record.seed(), "): epoch ", record.epoch(), ", step ",
                      record.step(), ", score ", record.score(), " (", metrics, "), ", record.checkpoint()),
                  wall_time);
      break;
    }
    default: break;  // EVALUATION records belong to `cabert evaluate`, not to a training curve
  }
}

std::vector<std::string> export_tensorboard(const std::vector<TensorboardRun>& runs, const std::string& dir) {
  std::vector<std::string> files;
  std::set<std::string> used;
  for (const auto& run : runs) {
    RecordReader reader(run.metrics);
    const pb::Header& header = reader.header();
    const std::string label = unique_label(run.label.empty() ? default_label(run.metrics) : run.label, used);
    const auto start = static_cast<double>(header.created_unix());
    auto open = [&](const std::string& subdir) {
      auto writer = std::make_unique<TensorboardWriter>((fs::path(dir) / subdir).string(), "--tensorboard");
      writer->session_start(0, start);
      writer->text("run/options", 0, run_options_markdown(header), start);
      files.push_back(writer->path());
      return writer;
    };
    const std::string& type = header.message_type();
    if (type == "cabert.pb.MetricsRecord") {
      auto writer = open(label);
      pb::MetricsRecord record;
      while (reader.next(&record)) write_summary(*writer, record, start + record.wall_seconds());
    } else if (type == "cabert.pb.TaskMetrics") {
      std::vector<pb::TaskMetrics> records;
      pb::TaskMetrics record;
      uint32_t last_run = 0;
      while (reader.next(&record)) {
        last_run = std::max(last_run, record.run());
        records.push_back(record);
      }
      // --runs N restarts the steps for every run: each is a TensorBoard run of its own.
      std::map<uint32_t, std::unique_ptr<TensorboardWriter>> writers;
      for (const auto& each : records) {
        auto& writer = writers[each.run()];
        if (!writer) writer = open(last_run > 0 ? (fs::path(label) / str("run-", each.run())).string() : label);
        write_summary(*writer, each, start + each.seconds());
      }
      if (records.empty()) open(label);
    } else {
      throw DataError(str(run.metrics, ": expected training metrics (metrics.cabert of pretrain or finetune), got ",
                          type.empty() ? "another file" : type));
    }
  }
  return files;
}

TensorboardLog::TensorboardLog(std::string dir, const pb::Header& header, std::string model_config, int64_t resume_step,
                               uint32_t resume_run, uint32_t runs)
    : dir_(std::move(dir)),
      options_(run_options_markdown(header) + "\nModel config:\n\n" + code_block(model_config)),
      resume_step_(resume_step),
      resume_run_(resume_run),
      runs_(std::max<uint32_t>(runs, 1)) {
  writer(resume_step_ >= 0 ? resume_run_ : 0);  // the file exists (and shows the options) from the start
}

TensorboardWriter& TensorboardLog::writer(uint32_t run) {
  auto& writer = writers_[run];
  if (!writer) {
    writer = std::make_unique<TensorboardWriter>(runs_ > 1 ? (fs::path(dir_) / str("run-", run)).string() : dir_);
    if (resume_step_ >= 0 && run == resume_run_) {
      writer->session_start(resume_step_ + 1);
      writer->text("run/options", resume_step_ + 1, options_);
    } else {
      writer->text("run/options", 0, options_);
    }
  }
  return *writer;
}

void TensorboardLog::image(const std::string& tag, int64_t step, const std::string& png, int width, int height,
                           uint32_t run) {
  writer(run).image(tag, step, png, width, height, 3);
}

void TensorboardLog::add(const pb::MetricsRecord& record) { write_summary(writer(0), record, unix_seconds()); }

void TensorboardLog::add(const pb::TaskMetrics& record) { write_summary(writer(record.run()), record, unix_seconds()); }

}  // namespace cabert::io
