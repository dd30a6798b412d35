#include "lib/eval/predict_split.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/core/interrupt.h"
#include "lib/eval/metrics.h"
#include "lib/eval/squad_metrics.h"

namespace cabert::eval {

using tasks::TaskKind;

MetricMap classification_metrics(const tasks::TaskDefinition& definition, const std::vector<int>& predicted,
                                 const std::vector<int>& gold) {
  MetricMap metrics;
  metrics["accuracy"] = eval::accuracy(predicted, gold);
  for (const auto& name : definition.metrics) {
    if (name == "mcc") metrics["mcc"] = eval::matthews_corrcoef(predicted, gold);
    if (name == "f1") metrics["f1"] = eval::binary_f1(predicted, gold, 1);
    if (name == "macro_f1") metrics["macro_f1"] = eval::macro_f1(predicted, gold);
  }
  return metrics;
}

MetricMap regression_metrics(const std::vector<double>& predicted, const std::vector<double>& gold) {
  return {{"pearson", eval::pearson(predicted, gold)}, {"spearman", eval::spearman(predicted, gold)}};
}

namespace {

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", value);
  return buffer;
}

SplitPredictions predict_sentences(models::TaskModel& model, const tasks::TaskDefinition& definition,
                                   const tasks::TaskSplit& split, const text::Tokenizer& tokenizer,
                                   const PredictOptions& options) {
  SplitPredictions out;
  out.labeled = split.labeled;
  tasks::FeatureStats stats;
  const tasks::TaskData* data = &split.data;
  tasks::TaskData copy;
  if (!split.labeled) {
    copy = split.data;
    copy.labeled = false;
    data = &copy;
  }
  auto features = tasks::classification_features(*data, definition, tokenizer, options.max_length, &stats);
  out.truncated_examples = stats.truncated_examples;
  tasks::LabelMap labels(definition.labels);
  std::vector<int> predicted_classes, gold_classes;
  std::vector<double> predicted_values, gold_values;
  for (size_t begin = 0; begin < features.size(); begin += options.batch_size) {
    throw_if_interrupted();
    std::vector<size_t> indices;
    for (size_t i = begin; i < std::min(features.size(), begin + options.batch_size); ++i) indices.push_back(i);
    tasks::Batch batch = tasks::collate(features, indices, definition.kind);
    torch::Tensor output =
        model->forward(batch.ids.to(options.device), batch.segments.to(options.device), batch.mask.to(options.device))
            .to(torch::kCPU, torch::kFloat32);
    if (definition.kind == TaskKind::kRegression) {
      auto values = output.accessor<float, 1>();
      for (size_t r = 0; r < indices.size(); ++r) {
        predicted_values.push_back(values[r]);
        out.predictions.push_back(number(values[r]));
        out.scores.push_back({values[r]});
      }
    } else {
      torch::Tensor probabilities = torch::softmax(output, -1).contiguous();
      torch::Tensor argmax = probabilities.argmax(-1);
      for (size_t r = 0; r < indices.size(); ++r) {
        int cls = static_cast<int>(argmax[r].item<int64_t>());
        predicted_classes.push_back(cls);
        out.predictions.push_back(labels.label(cls));
        const float* row = probabilities[r].data_ptr<float>();
        out.scores.emplace_back(row, row + probabilities.size(1));
      }
    }
  }
  for (const auto& feature : features) {
    const tasks::TaskExample& example = split.data.examples[feature.example];
    out.ids.push_back(example.id);
    out.golds.push_back(split.labeled ? example.label : "");
    if (!split.labeled) continue;
    if (definition.kind == TaskKind::kRegression) {
      gold_values.push_back(feature.target);
    } else {
      gold_classes.push_back(feature.label);
    }
  }
  if (split.labeled) {
    out.metrics = definition.kind == TaskKind::kRegression
                      ? regression_metrics(predicted_values, gold_values)
                      : classification_metrics(definition, predicted_classes, gold_classes);
    out.score = eval::task_score(split.metrics_task, out.metrics);
  }
  return out;
}

SplitPredictions predict_spans(models::TaskModel& model, const tasks::TaskDefinition& definition,
                               const tasks::TaskSplit& split, const text::Tokenizer& tokenizer,
                               const PredictOptions& options) {
  SplitPredictions out;
  tasks::SquadOptions squad = options.squad;
  tasks::SquadFeatures features = tasks::squad_features(split.squad, tokenizer, squad);
  std::vector<std::vector<float>> starts, ends;
  for (size_t begin = 0; begin < features.windows.size(); begin += options.batch_size) {
    throw_if_interrupted();
    std::vector<const tasks::Sequence*> sequences;
    size_t end = std::min(features.windows.size(), begin + options.batch_size);
    for (size_t w = begin; w < end; ++w) sequences.push_back(&features.windows[w].sequence);
    torch::Tensor ids, segments, mask;
    tasks::pad_sequences(sequences, &ids, &segments, &mask);
    torch::Tensor logits = model->forward(ids.to(options.device), segments.to(options.device), mask.to(options.device))
                               .to(torch::kCPU, torch::kFloat32)
                               .contiguous();
    for (size_t r = 0; r < sequences.size(); ++r) {
      torch::Tensor row = logits[r];
      torch::Tensor s = row.select(1, 0).contiguous(), e = row.select(1, 1).contiguous();
      starts.emplace_back(s.data_ptr<float>(), s.data_ptr<float>() + s.size(0));
      ends.emplace_back(e.data_ptr<float>(), e.data_ptr<float>() + e.size(0));
    }
  }
  auto spans = tasks::decode_squad(split.squad, features, starts, ends, squad, definition.squad_v2);
  std::vector<std::vector<std::string>> golds;
  for (size_t q = 0; q < spans.size(); ++q) {
    const auto& question = split.squad.questions[q];
    out.ids.push_back(question.id);
    out.predictions.push_back(spans[q].text);
    out.scores.push_back({static_cast<float>(spans[q].score), static_cast<float>(spans[q].null_score)});
    std::vector<std::string> answers;
    std::string joined;
    for (const auto& answer : question.answers) {
      answers.push_back(answer.text);
      joined += (joined.empty() ? "" : " || ") + answer.text;
    }
    golds.push_back(answers);
    out.golds.push_back(joined);
  }
  eval::SquadScores scores = eval::squad_scores(out.predictions, golds);
  out.metrics["exact"] = scores.exact / 100;
  out.metrics["f1"] = scores.f1 / 100;
  if (definition.squad_v2) {
    out.metrics["has_answer_exact"] = scores.has_answer_exact / 100;
    out.metrics["has_answer_f1"] = scores.has_answer_f1 / 100;
    out.metrics["no_answer_exact"] = scores.no_answer_exact / 100;
    out.metrics["no_answer_f1"] = scores.no_answer_f1 / 100;
  }
  out.score = eval::task_score(split.metrics_task, out.metrics);
  return out;
}

}  // namespace

SplitPredictions predict_split(models::TaskModel& model, const tasks::TaskDefinition& definition,
                               const tasks::TaskSplit& split, const text::Tokenizer& tokenizer,
                               const PredictOptions& options) {
  torch::NoGradGuard no_grad;
  bool was_training = model->is_training();
  model->eval();
  SplitPredictions out = definition.kind == TaskKind::kSpan
                             ? predict_spans(model, definition, split, tokenizer, options)
                             : predict_sentences(model, definition, split, tokenizer, options);
  if (was_training) model->train();
  return out;
}

std::string predictions_file_text(const SplitPredictions& predictions, const tasks::TaskDefinition& definition) {
  std::string text;
  if (definition.kind == tasks::TaskKind::kSpan) {
    nlohmann::ordered_json json = nlohmann::ordered_json::object();  // the official scripts' {id: answer}
    for (size_t i = 0; i < predictions.ids.size(); ++i) json[predictions.ids[i]] = predictions.predictions[i];
    text = json.dump(2) + "\n";
  } else if (!predictions.labeled) {
    text = "index\tprediction\n";  // GLUE submission format
    for (size_t i = 0; i < predictions.ids.size(); ++i) {
      text += predictions.ids[i] + "\t" + predictions.predictions[i] + "\n";
    }
  } else {
    text = "id\tprediction\tgold\tscores\n";
    for (size_t i = 0; i < predictions.ids.size(); ++i) {
      std::string scores;
      for (float score : predictions.scores[i]) {
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%.4f", score);
        if (!scores.empty()) scores += ',';
        scores += buffer;
      }
      text +=
          predictions.ids[i] + "\t" + predictions.predictions[i] + "\t" + predictions.golds[i] + "\t" + scores + "\n";
    }
  }
  return text;
}

}  // namespace cabert::eval
