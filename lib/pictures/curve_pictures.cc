#include "lib/pictures/curve_pictures.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "formats/metrics.pb.h"
#include "formats/task.pb.h"
#include "lib/core/errors.h"
#include "lib/io/record_file.h"

namespace cabert::pictures {

namespace {

// phase -> value name -> run label -> points
using Curves = std::map<std::string, std::map<std::string, std::map<std::string, plot::Series>>>;

std::string run_label(const MetricsRun& run) {
  if (!run.label.empty()) return run.label;
  auto parent = std::filesystem::absolute(run.path).lexically_normal().parent_path();
  return parent.filename().string();
}

void add_point(Curves& curves, const std::string& phase, const std::string& name, const std::string& label, double x,
               double y) {
  plot::Series& series = curves[phase][name][label];
  series.label = label;
  series.x.push_back(x);
  series.y.push_back(y);
}

bool loss_like(const std::string& name) {
  return name.find("loss") != std::string::npos || name.find("perplexity") != std::string::npos;
}

NamedFigure phase_figure(const std::string& phase,
                         const std::map<std::string, std::map<std::string, plot::Series>>& values,
                         const std::string& x_label, const std::string& title) {
  plot::Figure figure;
  figure.title = title;
  figure.columns = grid_columns(values.size(), 3);
  for (const auto& [name, runs] : values) {
    plot::LineChart chart;
    chart.x_label = x_label, chart.y_label = name;
    bool positive = true;
    for (const auto& [label, series] : runs) {
      for (double y : series.y) positive = positive && std::isfinite(y) && y > 0;
      chart.series.push_back(series);
    }
    chart.log_y = loss_like(name) && positive;
    for (const auto& series : chart.series) chart.markers = chart.markers || series.x.size() <= 30;
    figure.panels.push_back({name, chart});
  }
  return {"curves_" + phase + ".png", figure};
}

}  // namespace

std::vector<NamedFigure> curve_figures(const std::vector<MetricsRun>& runs) {
  Curves training, tasks, by_update;
  std::vector<std::string> models;  // named in the titles, in the order of the runs (and of the legend)
  for (const auto& run : runs) {
    io::RecordReader reader(run.path);
    const std::string label = run_label(run);
    const std::string& type = reader.header().message_type();
    auto model = reader.header().metadata().find("model");
    if (model != reader.header().metadata().end() && !model->second.empty() &&
        std::find(models.begin(), models.end(), model->second) == models.end()) {
      models.push_back(model->second);
    }
    if (type == "cabert.pb.MetricsRecord") {
      pb::MetricsRecord record;
      while (reader.next(&record)) {
        for (const auto& [name, value] : record.values()) {
          add_point(training, record.phase(), name, label, static_cast<double>(record.step()), value);
        }
      }
    } else if (type == "cabert.pb.TaskMetrics") {
      std::vector<pb::TaskMetrics> epochs;
      pb::TaskMetrics record;
      uint32_t last_run = 0;
      while (reader.next(&record)) {
        if (record.kind() != pb::TaskMetrics::EPOCH) continue;
        last_run = std::max(last_run, record.run());
        epochs.push_back(record);
      }
      for (const auto& epoch : epochs) {  // a series per run when the file holds several (--runs N)
        const std::string series = last_run > 0 ? str(label, " run ", epoch.run() + 1) : label;
        add_point(tasks, "dev", str(epoch.task(), " dev score"), series, epoch.epoch(), epoch.score());
        add_point(tasks, "dev", str(epoch.task(), " train loss"), series, epoch.epoch(), epoch.train_loss());
        add_point(by_update, "dev_by_update", str(epoch.task(), " dev score"), series,
                  static_cast<double>(epoch.step()), epoch.score());
      }
    } else {
      throw DataError(str(run.path, ": expected training metrics (metrics.cabert of pretrain or finetune), got ",
                          type.empty() ? "another file" : type));
    }
  }
  std::string names;
  for (const auto& name : models) names += (names.empty() ? ": " : ", ") + name;
  std::vector<NamedFigure> figures;
  for (const auto& [phase, values] : training) {
    figures.push_back(phase_figure(phase, values, "step", str("training curves (", phase, ")", names)));
  }
  for (const auto& [phase, values] : tasks) {
    figures.push_back(
        phase_figure(phase, values, "epoch", str("fine-tuning: dev score and training loss per epoch", names)));
  }
  // The same dev scores against optimizer updates: runs whose epochs differ in updates (token budgets, batch
  // sizes) compare on the axis their learning-rate schedules share.
  for (const auto& [phase, values] : by_update) {
    figures.push_back(phase_figure(phase, values, "update", str("fine-tuning: dev score per update", names)));
  }
  return figures;
}

}  // namespace cabert::pictures
