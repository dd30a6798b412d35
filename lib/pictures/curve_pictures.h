// Training curves from metrics files, the runs overlaid (one series per file, labelled):
//   metrics.cabert of pretrain / translation runs (MetricsRecord): curves_train.png (loss, learning rate, ... per
//     logged step) and curves_eval.png (held-out metrics), a panel per value, loss-like values on a log axis;
//   metrics.cabert of finetune (TaskMetrics, one record per epoch and dev split): curves_dev.png, the dev score
//     and the epoch's training loss per task split, one series per file and run, and curves_dev_by_update.png,
//     the dev scores against the optimizer update at the end of each epoch.
#pragma once

#include <string>
#include <vector>

#include "lib/pictures/figures.h"

namespace cabert::pictures {

struct MetricsRun {
  std::string path;
  std::string label;  // the legend entry ("" = the file's directory name)
};

// Throws DataError naming the file for a file that holds neither kind of metrics.
std::vector<NamedFigure> curve_figures(const std::vector<MetricsRun>& runs);

}  // namespace cabert::pictures
