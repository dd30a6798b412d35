// The pictures of the papers: the figures hold the model's numbers (a known kernel's maximum is drawn where
// the kernel has it), the probes record what the mixers compute, and the PNGs decode at their sizes.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/metrics.pb.h"
#include "formats/task.pb.h"
#include "lib/config/presets.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/record_file.h"
#include "lib/models/convbert_mixed_attention.h"
#include "lib/models/pretraining_models.h"
#include "lib/ops/conv_ops.h"
#include "lib/pictures/curve_pictures.h"
#include "lib/pictures/kernel_pictures.h"
#include "lib/pictures/sentence_pictures.h"
#include "tests/test_paths.h"

namespace cabert::pictures {
namespace {

namespace fs = std::filesystem;

// The (row, col) of the cell whose pixel shows `colour` in a heatmap panel; (-1, -1) if none does.
std::pair<int64_t, int64_t> cell_with_colour(const plot::Figure& figure, size_t panel, const plot::Image& image,
                                             uint32_t colour) {
  const auto& heatmap = std::get<plot::Heatmap>(figure.panels[panel].content);
  std::pair<int64_t, int64_t> found{-1, -1};
  for (int64_t r = 0; r < heatmap.rows; ++r) {
    for (int64_t c = 0; c < heatmap.cols; ++c) {
      plot::Point p = plot::heatmap_cell_centre(figure, panel, r, c);
      if (image.at(static_cast<int>(p.x), static_cast<int>(p.y)) == colour) {
        EXPECT_EQ(found.first, -1) << "two cells show the colour";
        found = {r, c};
      }
    }
  }
  return found;
}

TEST(Pictures, AKnownKernelIsDrawnWithItsMaximumWhereTheKernelHasIt) {
  const std::string dir = testing::temp_dir();
  // Two layers of 3 heads over offsets -3..3; layer 1, head 2 peaks at offset +2.
  torch::Tensor flat = torch::zeros({3, 7});
  torch::Tensor peaked = torch::zeros({3, 7});
  peaked[2][5] = 4.0;
  peaked[0][1] = -1.0;
  std::vector<LayerKernel> layers = {{0, flat, -3}, {1, peaked, -3}};
  for (bool softmax : {false, true}) {
    plot::Figure figure = kernel_grid(layers, "test kernels", softmax);
    ASSERT_EQ(figure.panels.size(), 2u);
    EXPECT_EQ(figure.panels[1].title, "layer 1");
    const std::string path = dir + (softmax ? "/soft.png" : "/raw.png");
    plot::write_png(figure, path);
    plot::Image image = plot::read_png(path);
    plot::Size size = plot::figure_size(figure);
    EXPECT_EQ(image.width, size.width);
    EXPECT_EQ(image.height, size.height);
    const auto& heatmap = std::get<plot::Heatmap>(figure.panels[1].content);
    EXPECT_EQ(heatmap.col_start, -3);
    double top = softmax ? torch::softmax(peaked[2], 0)[5].item<double>() : 4.0;
    auto where = cell_with_colour(figure, 1, image, plot::heatmap_colour(heatmap, top));
    EXPECT_EQ(where.first, 2) << (softmax ? "softmax" : "raw");
    EXPECT_EQ(where.second, 5) << (softmax ? "softmax" : "raw");
    if (softmax) {  // each softmax row sums to 1
      for (int64_t r = 0; r < heatmap.rows; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < heatmap.cols; ++c) sum += heatmap.values[r * heatmap.cols + c];
        EXPECT_NEAR(sum, 1.0, 1e-9);
      }
    }
  }
}

TEST(Pictures, KernelFiguresComeFromTheCheckpointTensors) {
  torch::NoGradGuard no_grad;
  pb::ModelConfig config = config::preset_config("bert-tiny-composite-depthwise");
  models::MlmModel model(config);
  std::map<std::string, torch::Tensor> tensors;
  for (auto& [name, tensor] : io::module_tensors(*model, "")) tensors[name] = tensor;
  tensors["encoder.stack.layers.1.attention.relative_beta"][1][0] = 5.0;  // head 1, offset -3
  auto figures = kernel_figures(config, tensors, "bert-tiny-composite-depthwise");
  std::vector<std::string> files;
  for (const auto& f : figures) files.push_back(f.file);
  EXPECT_EQ(files, (std::vector<std::string>{"relative_kernels.png", "relative_kernels_softmax.png",
                                             "depthwise_value_kernels.png"}));
  const auto& raw = std::get<plot::Heatmap>(figures[0].figure.panels[1].content);
  EXPECT_EQ(raw.rows, config.num_heads());
  EXPECT_EQ(raw.cols, 2 * config.attention().relative_radius() + 1);
  EXPECT_EQ(raw.values[1 * raw.cols + 0], 5.0);
  EXPECT_EQ(figures[0].figure.title, "bert-tiny-composite-depthwise: relative-position weights \u03b2_h");
  // The depthwise picture is each head's mean kernel times its scale.
  torch::Tensor w = tensors["encoder.stack.layers.0.attention.depthwise_weight"];
  torch::Tensor expected = w.view({config.num_heads(), -1, w.size(1)}).mean(1) *
                           tensors["encoder.stack.layers.0.attention.depthwise_scale"].unsqueeze(1);
  const auto& depthwise = std::get<plot::Heatmap>(figures[2].figure.panels[0].content);
  EXPECT_NEAR(depthwise.values[3], expected[0][3].item<double>(), 1e-6);
  // An encoder without such kernels has none.
  pb::ModelConfig absolute = config::preset_config("bert-tiny-absolute");
  models::MlmModel plain(absolute);
  std::map<std::string, torch::Tensor> plain_tensors;
  for (auto& [name, tensor] : io::module_tensors(*plain, "")) plain_tensors[name] = tensor;
  EXPECT_TRUE(kernel_figures(absolute, plain_tensors, "x").empty());
}

TEST(Pictures, AttentionByOffsetAveragesEachDiagonal) {
  // One head, T = 3: rows are queries.
  torch::Tensor attention = torch::tensor({0.5, 0.5, 0.0,  //
                                           0.2, 0.6, 0.2,  //
                                           0.0, 0.1, 0.9})
                                .view({1, 3, 3});
  torch::Tensor profile = attention_by_offset(attention, 5);  // D = T - 1 = 2
  ASSERT_EQ(profile.sizes(), (std::vector<int64_t>{1, 5}));
  std::vector<double> want = {0.0, (0.2 + 0.1) / 2, (0.5 + 0.6 + 0.9) / 3, (0.5 + 0.2) / 2, 0.0};
  for (int d = 0; d < 5; ++d) EXPECT_NEAR(profile[0][d].item<double>(), want[d], 1e-6) << d;
}

TEST(Pictures, TheProbeHoldsTheKernelsSdconvApplies) {
  pb::ModelConfig config = config::preset_config("convbert-tiny");
  models::MixedAttention mixer(config);
  mixer->eval();
  torch::manual_seed(3);
  torch::Tensor x = torch::randn({2, 9, config.hidden_size()});
  torch::Tensor mask = torch::ones({2, 9}, torch::kBool);
  mask[1].narrow(0, 6, 3).fill_(false);
  models::MixerProbe probe;
  mixer->probe = &probe;
  torch::NoGradGuard no_grad;
  torch::Tensor out = mixer->forward(x, mask);
  ASSERT_TRUE(probe.conv_kernels.defined());
  ASSERT_TRUE(probe.attention.defined());
  EXPECT_EQ(probe.conv_kernels.sizes(), (std::vector<int64_t>{2, 9, mixer->heads, mixer->kernel}));
  EXPECT_TRUE(torch::allclose(probe.conv_kernels.sum(-1), torch::ones({2, 9, mixer->heads})));
  // The convolution half of the output, recomputed with the probed kernels.
  torch::Tensor conv = ops::dynamic_conv(mixer->conv_value(x), probe.conv_kernels, mixer->kernel / 2, mask);
  conv = conv * mask.unsqueeze(-1).to(conv.scalar_type());
  EXPECT_TRUE(torch::allclose(out.narrow(-1, mixer->attention_width, mixer->conv_width), conv, 1e-5, 1e-6));
  // Attention rows sum to one and padding keys get nothing.
  EXPECT_TRUE(torch::allclose(probe.attention.sum(-1), torch::ones({2, mixer->heads, 9})));
  EXPECT_EQ(probe.attention[1].narrow(-1, 6, 3).abs().max().item<float>(), 0.0f);
}

TEST(Pictures, ASentenceGivesAttentionMapsConvKernelsAndTheOffsetProfile) {
  const std::string dir = testing::temp_dir();
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  pb::ModelConfig config = config::preset_config("convbert-tiny");
  config.set_vocab_size(tokenizer.vocab_size());
  models::MlmModel model(config);
  pb::CheckpointInfo info;
  info.set_kind("pretrain");
  *info.mutable_model() = config;
  io::save_checkpoint(dir + "/m.cabert", info, io::module_tensors(*model));
  io::Checkpoint checkpoint = io::load_checkpoint(dir + "/m.cabert");

  const std::string sentence = "alice was beginning to get very tired";
  auto figures = sentence_figures(checkpoint, tokenizer, sentence, "convbert-tiny");
  std::vector<std::string> files;
  for (const auto& f : figures) files.push_back(f.file);
  EXPECT_EQ(files, (std::vector<std::string>{"attention_layer0.png", "conv_kernels_layer0.png", "attention_layer1.png",
                                             "conv_kernels_layer1.png", "attention_by_offset.png"}));
  std::vector<int> ids = tokenizer.encode(sentence);
  const auto& map = std::get<plot::Heatmap>(figures[0].figure.panels[0].content);
  EXPECT_EQ(map.rows, static_cast<int64_t>(ids.size()) + 2);
  EXPECT_EQ(map.row_labels.front(), "[CLS]");
  EXPECT_EQ(map.row_labels.back(), "[SEP]");
  EXPECT_EQ(map.row_labels[1], "alice");
  EXPECT_EQ(figures[0].figure.title, "convbert-tiny: attention, layer 0");
  const auto& kernels = std::get<plot::Heatmap>(figures[1].figure.panels[0].content);
  EXPECT_EQ(kernels.cols, config.convbert().conv_kernel_size());
  EXPECT_EQ(kernels.col_start, -(config.convbert().conv_kernel_size() / 2));
  auto written = write_figures(figures, dir + "/pictures");
  ASSERT_EQ(written.size(), figures.size());
  for (size_t i = 0; i < written.size(); ++i) {
    plot::Image image = plot::read_png(written[i]);
    EXPECT_EQ(image.width, plot::figure_size(figures[i].figure).width) << written[i];
  }
}

TEST(Pictures, CurvesOverlayRunsAndRefuseOtherFiles) {
  const std::string dir = testing::temp_dir();
  for (int run = 0; run < 2; ++run) {
    fs::create_directories(dir + "/run" + std::to_string(run));
    io::RecordWriter writer(dir + "/run" + std::to_string(run) + "/metrics.cabert", "cabert.pb.MetricsRecord",
                            {{"model", run == 0 ? "zeta" : "alpha"}});
    for (int step = 10; step <= 50; step += 10) {
      pb::MetricsRecord record;
      record.set_phase("train");
      record.set_step(step);
      (*record.mutable_values())["loss"] = 5.0 / step + run;
      (*record.mutable_values())["lr"] = 1e-3;
      writer.write(record);
    }
    pb::MetricsRecord eval;
    eval.set_phase("eval");
    eval.set_step(50);
    (*eval.mutable_values())["mlm_loss"] = 3.0;
    writer.write(eval);
    writer.close();
  }
  auto figures = curve_figures({{dir + "/run0/metrics.cabert", ""}, {dir + "/run1/metrics.cabert", "second"}});
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].file, "curves_eval.png");
  EXPECT_EQ(figures[1].file, "curves_train.png");
  ASSERT_EQ(figures[1].figure.panels.size(), 2u);  // loss, lr
  const auto& loss = std::get<plot::LineChart>(figures[1].figure.panels[0].content);
  EXPECT_TRUE(loss.log_y);
  ASSERT_EQ(loss.series.size(), 2u);
  EXPECT_EQ(loss.series[0].label, "run0");
  EXPECT_EQ(loss.series[1].label, "second");
  EXPECT_EQ(loss.series[1].y[4], 5.0 / 50 + 1);
  EXPECT_EQ(figures[1].figure.title, "training curves (train): zeta, alpha");  // the runs' order, as the legend
  write_figures(figures, dir + "/pictures");
  EXPECT_GT(plot::read_png(dir + "/pictures/curves_train.png").width, 0);

  // Fine-tuning: the dev score per epoch, a series per run.
  io::RecordWriter writer(dir + "/ft.cabert", "cabert.pb.TaskMetrics");
  for (int run = 0; run < 2; ++run) {
    for (int epoch = 1; epoch <= 3; ++epoch) {
      pb::TaskMetrics record;
      record.set_kind(pb::TaskMetrics::EPOCH);
      record.set_task("SST-2");
      record.set_run(run);
      record.set_epoch(epoch);
      record.set_score(70 + epoch + run);
      record.set_train_loss(0.5);
      record.set_step(epoch * (10 + run));  // the runs' epochs hold 10 and 11 updates
      writer.write(record);
    }
  }
  writer.close();
  auto dev = curve_figures({{dir + "/ft.cabert", "ft"}});
  ASSERT_EQ(dev.size(), 2u);
  EXPECT_EQ(dev[0].file, "curves_dev.png");
  const auto& score = std::get<plot::LineChart>(dev[0].figure.panels[0].content);
  EXPECT_EQ(dev[0].figure.panels[0].title, "SST-2 dev score");
  ASSERT_EQ(score.series.size(), 2u);
  EXPECT_EQ(score.series[1].label, "ft run 2");
  EXPECT_EQ(score.series[1].x, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(score.series[1].y, (std::vector<double>{72, 73, 74}));
  // The same scores against the update that ended each epoch.
  EXPECT_EQ(dev[1].file, "curves_dev_by_update.png");
  ASSERT_EQ(dev[1].figure.panels.size(), 1u);
  const auto& by_update = std::get<plot::LineChart>(dev[1].figure.panels[0].content);
  EXPECT_EQ(by_update.x_label, "update");
  ASSERT_EQ(by_update.series.size(), 2u);
  EXPECT_EQ(by_update.series[1].x, (std::vector<double>{11, 22, 33}));
  EXPECT_EQ(by_update.series[1].y, (std::vector<double>{72, 73, 74}));

  io::RecordWriter other(dir + "/corpus.cabert", "cabert.pb.PretrainingExample");
  other.close();
  EXPECT_EQ(testing::data_error_message([&] {
              curve_figures({{dir + "/corpus.cabert", ""}});
            }),
            dir + "/corpus.cabert: expected training metrics (metrics.cabert of pretrain or finetune), got "
                  "cabert.pb.PretrainingExample");
}

TEST(Pictures, TokenLabelsReadLikeWords) {
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  std::vector<int> ids = tokenizer.encode("alice was beginning");
  ids.insert(ids.begin(), text::SpecialTokens::kCls);
  auto labels = token_labels(tokenizer, ids);
  EXPECT_EQ(labels[0], "[CLS]");
  EXPECT_EQ(labels[1], "alice");
  std::string joined;
  for (size_t i = 1; i < labels.size(); ++i) {
    joined += labels[i].rfind("##", 0) == 0 ? labels[i].substr(2) : (i > 1 ? " " : "") + labels[i];
  }
  EXPECT_EQ(joined, "alice was beginning");
}

}  // namespace
}  // namespace cabert::pictures
