// Line chart layout: axis ranges from the drawable points, ticks at nice steps spaced so that their labels
// never touch (coarser steps when they would), margins from the widest y tick label.
#include <algorithm>
#include <cmath>

#include "lib/plot/layout.h"
#include "lib/plot/text.h"

namespace cabert::plot {
namespace {

constexpr double kXTickSpacing = 90, kYTickSpacing = 50;  // pixels per tick to aim for

struct DataRange {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
};

DataRange data_range(const LineChart& chart) {
  DataRange range;
  for (const Series& series : chart.series) {
    for (size_t i = 0; i < series.x.size(); ++i) {
      double x = series.x[i], y = series.y[i];
      if (!std::isfinite(x) || !std::isfinite(y) || (chart.log_y && !(y > 0))) continue;
      range.x_lo = std::min(range.x_lo, x);
      range.x_hi = std::max(range.x_hi, x);
      range.y_lo = std::min(range.y_lo, y);
      range.y_hi = std::max(range.y_hi, y);
    }
  }
  return range;
}

// Whether neighbouring ticks are at least `gap(label, next label)` pixels apart on an axis `length` long.
template <typename Gap>
bool spaced(const AxisScale& scale, const std::vector<double>& values, const std::vector<std::string>& labels,
            double length, Gap gap) {
  for (size_t i = 1; i < values.size(); ++i) {
    double distance = std::abs(scale.fraction(values[i]) - scale.fraction(values[i - 1])) * length;
    if (distance < gap(labels[i - 1], labels[i])) return false;
  }
  return true;
}

std::vector<Tick> to_ticks(const std::vector<double>& values, const std::vector<std::string>& labels) {
  std::vector<Tick> ticks;
  for (size_t i = 0; i < values.size(); ++i) ticks.push_back({values[i], labels[i]});
  return ticks;
}

// Linear ticks at the finest nice step (from about one per `target_spacing` pixels) that keeps labels apart.
template <typename Gap>
std::vector<Tick> linear_axis_ticks(const AxisScale& scale, double length, double target_spacing, Gap gap) {
  double step = nice_step((scale.hi - scale.lo) / std::max(2.0, std::floor(length / target_spacing)));
  for (int attempt = 0; attempt < 40; ++attempt, step = next_nice_step(step)) {
    std::vector<double> values = linear_ticks(scale.lo, scale.hi, step);
    std::vector<std::string> labels;
    for (double value : values) labels.push_back(format_tick(value, step));
    if (spaced(scale, values, labels, length, gap)) return to_ticks(values, labels);
  }
  return {};
}

// Log ticks: powers of ten (every k-th decade when crowded); 1-2-5 or every digit when the axis spans
// too few decades for three powers of ten; linear steps when it spans less than a factor of ~2.
std::vector<Tick> log_axis_ticks(const AxisScale& scale, double length, double gap) {
  auto labels_of = [](const std::vector<double>& values) {
    std::vector<std::string> labels;
    for (double value : values) labels.push_back(format_number(value, 3));
    return labels;
  };
  auto constant_gap = [gap](const std::string&, const std::string&) { return gap; };
  auto fits = [&](const std::vector<double>& values) {
    return spaced(scale, values, labels_of(values), length, constant_gap);
  };
  std::vector<double> decades = log_ticks(scale.lo, scale.hi, 0, 1);
  if (decades.size() >= 3) {
    for (int stride = 2; !fits(decades) && stride < 100; ++stride) decades = log_ticks(scale.lo, scale.hi, 0, stride);
    return to_ticks(decades, labels_of(decades));
  }
  for (int density : {1, 2}) {
    std::vector<double> values = log_ticks(scale.lo, scale.hi, density, 1);
    if (values.size() >= 3 && fits(values)) return to_ticks(values, labels_of(values));
  }
  std::vector<double> one_two_five = log_ticks(scale.lo, scale.hi, 1, 1);
  if (one_two_five.size() >= 2 && fits(one_two_five)) return to_ticks(one_two_five, labels_of(one_two_five));
  return linear_axis_ticks(scale, length, kYTickSpacing, constant_gap);
}

void place(std::vector<Tick>* ticks, const AxisScale& scale, double origin, double length, bool upwards) {
  for (Tick& tick : *ticks) {
    double fraction = scale.fraction(tick.position);
    tick.position = upwards ? origin + length - fraction * length : origin + fraction * length;
  }
}

}  // namespace

void layout_line_chart(cairo_t* cr, const LineChart& chart, Rect frame, PanelLayout* layout) {
  double line = line_height(cr, Font::kTick);
  DataRange range = data_range(chart);
  layout->x_scale = axis_scale(range.x_lo, range.x_hi, false);
  layout->y_scale = axis_scale(range.y_lo, range.y_hi, chart.log_y);

  double y0 = std::ceil(frame.y);
  double height = std::max(1.0, std::floor(frame.y + frame.height - kTickLength - kTickGap - line - y0));
  auto y_gap = [&](const std::string&, const std::string&) { return line + 4; };
  std::vector<Tick> y_ticks = chart.log_y ? log_axis_ticks(layout->y_scale, height, line + 4)
                                          : linear_axis_ticks(layout->y_scale, height, kYTickSpacing, y_gap);
  double label_width = 0;
  for (const Tick& tick : y_ticks) label_width = std::max(label_width, text_width(cr, Font::kTick, tick.label));
  double x0 = std::ceil(frame.x + label_width + kTickLength + kTickGap);

  // The last x tick label is centred on its tick and may reach past the plot area's right edge.
  auto x_gap = [&](const std::string& a, const std::string& b) {
    return (text_width(cr, Font::kTick, a) + text_width(cr, Font::kTick, b)) / 2 + 12;
  };
  double right = frame.x + frame.width;
  double width = 1;
  std::vector<Tick> x_ticks;
  for (int attempt = 0; attempt < 3; ++attempt) {
    width = std::max(1.0, std::floor(right - x0));
    x_ticks = linear_axis_ticks(layout->x_scale, width, kXTickSpacing, x_gap);
    if (x_ticks.empty()) break;
    const Tick& last = x_ticks.back();
    double reach = x0 + layout->x_scale.fraction(last.position) * width + text_width(cr, Font::kTick, last.label) / 2;
    double limit = layout->cell.x + layout->cell.width - 2;
    if (reach <= limit) break;
    right -= std::ceil(reach - limit);
  }
  layout->plot = {x0, y0, width, height};
  place(&x_ticks, layout->x_scale, x0, width, false);
  place(&y_ticks, layout->y_scale, y0, height, true);
  layout->x_ticks = std::move(x_ticks);
  layout->y_ticks = std::move(y_ticks);
}

}  // namespace cabert::plot
