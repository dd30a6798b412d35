// Axis arithmetic of the plot room, free of drawing: "nice" tick steps (1, 2 or 5 times a power of ten),
// axis ranges for line charts, tick positions on linear and log axes, and number formatting for labels.
#pragma once

#include <string>
#include <vector>

namespace cabert::plot {

// The smallest 1/2/5 x 10^k that is >= raw (raw > 0).
double nice_step(double raw);
// The next nice step above `step` (1 -> 2 -> 5 -> 10).
double next_nice_step(double step);

// A line chart axis: values lo..hi (both > 0 on a log axis) fill the plot area.
struct AxisScale {
  double lo = 0, hi = 1;
  bool log = false;
  // 0 at lo, 1 at hi; log10 spacing on a log axis (NaN for non-positive values there).
  double fraction(double value) const;
};
// The data range padded by 5% at both ends; a linear axis is then rounded outwards to a nice step about
// 1/20 of its length (0..9 -> -0.5..9.5, 0..1 -> -0.1..1.1). No data (lo > hi) gives 0..1 (1..10 on a log
// axis); a single value gets a range around it (10% of it, or +-1 around 0; a factor of ~3 on a log axis).
AxisScale axis_scale(double data_lo, double data_hi, bool log);

// Multiples of step within [lo, hi] (with a little tolerance), snapped so that zero prints as "0".
std::vector<double> linear_ticks(double lo, double hi, double step);
// Ticks on a log axis: `density` 0 = powers of ten (every `stride`-th decade), 1 = 1, 2 and 5 per decade,
// 2 = 1..9 per decade.
std::vector<double> log_ticks(double lo, double hi, int density, int stride);

// A tick label: the decimals that `step` needs (0.0, 0.5, 1.0), scientific ("2e6", "5e-5") for very large or small numbers.
std::string format_tick(double value, double step);
// `significant` significant digits, trailing zeros dropped; fixed from 1e-4 to 1e5, else scientific:
// 0.5, 12.3, 1000, 0.0001, 1e-5, 2.5e6.
std::string format_number(double value, int significant = 3);

}  // namespace cabert::plot
