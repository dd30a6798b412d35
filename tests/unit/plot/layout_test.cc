#include "lib/plot/layout.h"

#include <gtest/gtest.h>

#include "lib/core/errors.h"
#include "lib/plot/text.h"

namespace cabert::plot {
namespace {

Figure heatmap_figure(int64_t size, const std::vector<std::string>& labels) {
  Heatmap heatmap;
  heatmap.rows = heatmap.cols = size;
  heatmap.values.assign(size * size, 0.5);
  heatmap.row_labels = heatmap.col_labels = labels;
  Figure figure;
  figure.panels.push_back({"attention", heatmap});
  return figure;
}

std::vector<std::string> labels(int count, const std::string& stem) {
  std::vector<std::string> result;
  for (int i = 0; i < count; ++i) result.push_back(str(stem, i));
  return result;
}

// Every tick lies inside the plot area along its axis, in order.
void expect_ticks_inside(const std::vector<Tick>& ticks, double lo, double length) {
  for (size_t i = 0; i < ticks.size(); ++i) {
    EXPECT_GE(ticks[i].position, lo);
    EXPECT_LE(ticks[i].position, lo + length);
    if (i > 0) {
      EXPECT_GT(ticks[i].position, ticks[i - 1].position);
    }
  }
}

bool inside(const Rect& inner, const Rect& outer) {
  return inner.x >= outer.x && inner.y >= outer.y && inner.x + inner.width <= outer.x + outer.width &&
         inner.y + inner.height <= outer.y + outer.height;
}

// A one-panel figure's title ("bert-tiny-fixed (pretrain step 2): softmax of beta_h over offsets", about 600 px
// in the title's font) was cut to "...: softmax of …" in its 500 px: it now takes the narrow title font whole,
// and only a title too long even for that is cut.
TEST(PlotLayout, ATitleTooWideShrinksBeforeItIsCut) {
  ScratchContext measure;
  const std::vector<Font> fonts{Font::kFigureTitle, Font::kFigureTitleNarrow};
  const std::string title = "bert-tiny-fixed (pretrain step 2): softmax of \u03b2_h over offsets";
  const double wide = text_width(measure.get(), Font::kFigureTitle, title);
  const double narrow = text_width(measure.get(), Font::kFigureTitleNarrow, title);
  ASSERT_LT(narrow, wide);

  FittedText fitted = fit_text(measure.get(), fonts, title, wide);
  EXPECT_EQ(fitted.font, Font::kFigureTitle);
  EXPECT_EQ(fitted.text, title);

  fitted = fit_text(measure.get(), fonts, title, (wide + narrow) / 2);
  EXPECT_EQ(fitted.font, Font::kFigureTitleNarrow);
  EXPECT_EQ(fitted.text, title);

  fitted = fit_text(measure.get(), fonts, title, narrow / 2);
  EXPECT_EQ(fitted.font, Font::kFigureTitleNarrow);
  EXPECT_EQ(fitted.text, ellipsize(measure.get(), Font::kFigureTitleNarrow, title, narrow / 2));
  EXPECT_LE(text_width(measure.get(), Font::kFigureTitleNarrow, fitted.text), narrow / 2);
  EXPECT_EQ(fitted.text.substr(fitted.text.size() - 3), "\u2026");
}

TEST(PlotLayout, ShortLabelsStandLevelAndAllShow) {
  ScratchContext measure;
  PanelLayout layout = layout_panel(measure.get(), heatmap_figure(6, labels(6, "w")), 0);
  EXPECT_EQ(layout.x_angle, LabelAngle::kHorizontal);
  ASSERT_EQ(layout.x_ticks.size(), 6u);
  ASSERT_EQ(layout.y_ticks.size(), 6u);
  EXPECT_EQ(layout.x_ticks[5].label, "w5");
  EXPECT_TRUE(inside(layout.plot, layout.cell));
  EXPECT_EQ(layout.col_edges.front(), layout.plot.x);
  EXPECT_EQ(layout.col_edges.back(), layout.plot.x + layout.plot.width);
}

TEST(PlotLayout, LongerLabelsTurnDiagonalAndManyAreThinnedOut) {
  ScratchContext measure;
  double line = line_height(measure.get(), Font::kTick);
  PanelLayout twelve = layout_panel(measure.get(), heatmap_figure(12, labels(12, "riverbank_")), 0);
  EXPECT_EQ(twelve.x_angle, LabelAngle::kDiagonal);
  EXPECT_EQ(twelve.x_ticks.size(), 12u);
  EXPECT_TRUE(inside(twelve.plot, twelve.cell));

  PanelLayout many = layout_panel(measure.get(), heatmap_figure(200, labels(200, "token_")), 0);
  EXPECT_EQ(many.x_angle, LabelAngle::kVertical);
  EXPECT_LT(many.x_ticks.size(), 200u);
  EXPECT_GT(many.x_ticks.size(), 5u);
  for (const auto* ticks : {&many.x_ticks, &many.y_ticks}) {
    for (size_t i = 1; i < ticks->size(); ++i) EXPECT_GE((*ticks)[i].position - (*ticks)[i - 1].position, line);
  }
  expect_ticks_inside(many.x_ticks, many.plot.x, many.plot.width);
  expect_ticks_inside(many.y_ticks, many.plot.y, many.plot.height);
}

TEST(PlotLayout, NumericHeatmapTicksStartFromTheGivenNumber) {
  Figure figure = heatmap_figure(17, {});
  auto& heatmap = std::get<Heatmap>(figure.panels[0].content);
  heatmap.rows = 12;
  heatmap.values.assign(12 * 17, 1.0);
  heatmap.col_start = -8;
  heatmap.row_start = 1;
  ScratchContext measure;
  PanelLayout layout = layout_panel(measure.get(), figure, 0);
  ASSERT_FALSE(layout.x_ticks.empty());
  EXPECT_EQ(layout.x_ticks.front().label, "-8");
  EXPECT_EQ(layout.x_ticks.back().label, "8");
  EXPECT_EQ(layout.y_ticks.front().label, "1");
  // A tick sits at the centre of the cell it names.
  EXPECT_DOUBLE_EQ(layout.x_ticks.front().position, (layout.col_edges[0] + layout.col_edges[1]) / 2.0);
  // Constant data: one colour bar label.
  ASSERT_EQ(layout.colour_bar_ticks.size(), 1u);
  EXPECT_EQ(layout.colour_bar_ticks[0].label, "1");
}

TEST(PlotLayout, LineChartTickLabelsNeverTouch) {
  LineChart chart;
  Series series;
  for (int step = 0; step <= 123456; step += 1000) {
    series.x.push_back(step);
    series.y.push_back(1.0 / (1 + step));
  }
  chart.series.push_back(series);
  for (bool log_y : {false, true}) {
    chart.log_y = log_y;
    Figure figure;
    figure.panel_width = 240;
    figure.panels.push_back({"", chart});
    ScratchContext measure;
    PanelLayout layout = layout_panel(measure.get(), figure, 0);
    EXPECT_TRUE(inside(layout.plot, layout.cell));
    ASSERT_GE(layout.x_ticks.size(), 2u);
    ASSERT_GE(layout.y_ticks.size(), 2u);
    for (size_t i = 1; i < layout.x_ticks.size(); ++i) {
      double half_widths = (text_width(measure.get(), Font::kTick, layout.x_ticks[i].label) +
                            text_width(measure.get(), Font::kTick, layout.x_ticks[i - 1].label)) /
                           2;
      EXPECT_GT(layout.x_ticks[i].position - layout.x_ticks[i - 1].position, half_widths);
    }
    double line = line_height(measure.get(), Font::kTick);
    for (size_t i = 1; i < layout.y_ticks.size(); ++i) {
      EXPECT_GT(layout.y_ticks[i - 1].position - layout.y_ticks[i].position, line);  // upwards
    }
    expect_ticks_inside(layout.x_ticks, layout.plot.x, layout.plot.width);
    // The last x label stays inside the cell.
    const Tick& last = layout.x_ticks.back();
    EXPECT_LE(last.position + text_width(measure.get(), Font::kTick, last.label) / 2,
              layout.cell.x + layout.cell.width);
  }
}

}  // namespace
}  // namespace cabert::plot
