#include "lib/plot/ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cabert::plot {
namespace {

constexpr double kTolerance = 1e-9;

// "0.500" -> "0.5", "2.000" -> "2", "-0.000" -> "0"; numbers without a fraction stay as they are.
std::string trim_fraction(std::string text) {
  if (text.find('.') == std::string::npos) return text;
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  if (text == "-0") text = "0";
  return text;
}

}  // namespace

double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (double mantissa : {1.0, 2.0, 5.0}) {
    if (mantissa * base >= raw * (1 - kTolerance)) return mantissa * base;
  }
  return 10 * base;
}

double next_nice_step(double step) { return nice_step(step * 1.01); }

double AxisScale::fraction(double value) const {
  if (!log) return (value - lo) / (hi - lo);
  if (!(value > 0)) return NAN;
  return (std::log10(value) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
}

AxisScale axis_scale(double data_lo, double data_hi, bool log) {
  AxisScale scale;
  scale.log = log;
  if (log) {
    if (!(data_lo > 0 && data_lo <= data_hi)) {
      scale.lo = 1;
      scale.hi = 10;
      return scale;
    }
    double lo = std::log10(data_lo), hi = std::log10(data_hi);
    if (hi - lo < kTolerance) {
      lo -= 0.25;
      hi += 0.25;
    }
    double pad = 0.05 * (hi - lo);
    scale.lo = std::pow(10.0, lo - pad);
    scale.hi = std::pow(10.0, hi + pad);
    return scale;
  }
  if (!(data_lo <= data_hi)) return scale;  // 0..1
  double lo = data_lo, hi = data_hi;
  if (hi - lo <= kTolerance * std::max(std::abs(lo), std::abs(hi))) {
    double delta = lo == 0 ? 1 : 0.1 * std::abs(lo);
    lo -= delta;
    hi += delta;
  }
  double pad = 0.05 * (hi - lo);
  double granularity = nice_step((hi - lo + 2 * pad) / 20);
  scale.lo = std::floor((lo - pad) / granularity + kTolerance) * granularity;
  scale.hi = std::ceil((hi + pad) / granularity - kTolerance) * granularity;
  return scale;
}

std::vector<double> linear_ticks(double lo, double hi, double step) {
  std::vector<double> ticks;
  if (!(step > 0) || !(lo <= hi)) return ticks;
  double first = std::ceil(lo / step - 1e-6), last = std::floor(hi / step + 1e-6);
  if (last - first > 1000) return ticks;
  for (double i = first; i <= last; ++i) {
    double value = i * step;
    ticks.push_back(std::abs(value) < step * 1e-6 ? 0.0 : value);
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi, int density, int stride) {
  static const std::vector<double> kMantissas[] = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  std::vector<double> ticks;
  if (!(lo > 0 && lo <= hi) || stride < 1) return ticks;
  const auto& mantissas = kMantissas[std::clamp(density, 0, 2)];
  int first = static_cast<int>(std::floor(std::log10(lo))), last = static_cast<int>(std::ceil(std::log10(hi)));
  for (int decade = first; decade <= last; ++decade) {
    if (density == 0 && ((decade % stride) + stride) % stride != 0) continue;
    for (double mantissa : mantissas) {
      double value = mantissa * std::pow(10.0, decade);
      if (value >= lo * (1 - 1e-6) && value <= hi * (1 + 1e-6)) ticks.push_back(value);
    }
  }
  return ticks;
}

std::string format_number(double value, int significant) {
  if (value == 0) return "0";  // also -0
  char buffer[64];
  double magnitude = std::abs(value);
  if (magnitude >= 1e-4 && magnitude < 1e5) {
    // Fixed notation with `significant` digits, trailing zeros dropped: 0.49965 -> "0.5", 1000 -> "1000".
    int exponent = static_cast<int>(std::floor(std::log10(magnitude)));
    std::snprintf(buffer, sizeof buffer, "%.*f", std::max(0, significant - 1 - exponent), value);
    return trim_fraction(buffer);
  }
  std::snprintf(buffer, sizeof buffer, "%.*g", significant, value);
  std::string text = buffer;
  // "1e+06" -> "1e6", "2.5e-05" -> "2.5e-5"
  size_t e = text.find('e');
  if (e == std::string::npos) return text;
  std::string mantissa = text.substr(0, e), exponent = text.substr(e + 1);
  std::string sign = exponent[0] == '-' ? "-" : "";
  size_t digits = exponent.find_first_not_of("+-0");
  return mantissa + "e" + sign + (digits == std::string::npos ? "0" : exponent.substr(digits));
}

std::string format_tick(double value, double step) {
  if (value == 0) value = 0;  // no "-0.0"
  double magnitude = std::abs(value);
  int step_exponent = static_cast<int>(std::floor(std::log10(step) + kTolerance));
  if (magnitude >= 1e6 || step < 1e-4) {
    if (value == 0) return "0";
    int value_exponent = static_cast<int>(std::floor(std::log10(magnitude) + kTolerance));
    return format_number(value, std::max(1, value_exponent - step_exponent + 1));
  }
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", std::max(0, -step_exponent), value);
  std::string text = buffer;
  // A value that rounds to zero prints without its sign.
  if (text[0] == '-' && text.find_first_not_of("-0.") == std::string::npos) text.erase(0, 1);
  return text;
}

}  // namespace cabert::plot
