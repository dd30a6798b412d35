#include "lib/plot/colour_map.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace cabert::plot {
namespace {

// viridis at 11 evenly spaced points (matplotlib's _viridis_data); luminance rises monotonically.
constexpr uint32_t kViridis[] = {0x440154, 0x482576, 0x414487, 0x35608D, 0x2A788E, 0x21908C,
                                 0x22A884, 0x43BF71, 0x7AD151, 0xBBDF27, 0xFDE725};
// ColorBrewer RdBu with 11 classes, reversed so that negative values are blue.
constexpr uint32_t kBlueWhiteRed[] = {0x053061, 0x2166AC, 0x4393C3, 0x92C5DE, 0xD1E5F0, 0xF7F7F7,
                                      0xFDDBC7, 0xF4A582, 0xD6604D, 0xB2182B, 0x67001F};
// Tableau 10, matplotlib's default cycle: distinct on white and for most colour-vision deficiencies.
constexpr uint32_t kSeries[] = {0x1F77B4, 0xFF7F0E, 0x2CA02C, 0xD62728, 0x9467BD,
                                0x8C564B, 0xE377C2, 0x7F7F7F, 0xBCBD22, 0x17BECF};

template <size_t N>
uint32_t interpolate(const uint32_t (&anchors)[N], double t) {
  if (!(t > 0)) t = 0;  // also NaN
  if (t > 1) t = 1;
  double position = t * (N - 1);
  size_t index = std::min(static_cast<size_t>(position), N - 2);
  double fraction = position - index;
  uint32_t colour = 0;
  for (int shift : {16, 8, 0}) {
    double a = (anchors[index] >> shift) & 0xFF, b = (anchors[index + 1] >> shift) & 0xFF;
    colour |= static_cast<uint32_t>(std::lround(a + (b - a) * fraction)) << shift;
  }
  return colour;
}

}  // namespace

uint32_t viridis(double t) { return interpolate(kViridis, t); }
uint32_t blue_white_red(double t) { return interpolate(kBlueWhiteRed, t); }
uint32_t series_colour(size_t index) { return kSeries[index % std::size(kSeries)]; }

uint32_t ColourScale::colour(double value) const {
  if (std::isnan(value)) return kBlankColour;
  double t = hi > lo ? (value - lo) / (hi - lo) : 0.5;
  return scale == Heatmap::Scale::kDiverging ? blue_white_red(t) : viridis(t);
}

ColourScale colour_scale(const Heatmap& heatmap) {
  double lo = INFINITY, hi = -INFINITY;
  for (double value : heatmap.values) {
    if (!std::isfinite(value)) continue;
    lo = std::min(lo, value);
    hi = std::max(hi, value);
  }
  if (heatmap.min) lo = *heatmap.min;
  if (heatmap.max) hi = *heatmap.max;
  ColourScale scale;
  scale.scale = heatmap.scale;
  if (!(lo <= hi)) {  // no finite value and no fixed range
    lo = 0;
    hi = 1;
  }
  if (heatmap.scale == Heatmap::Scale::kDiverging) {
    double a = std::max(std::abs(lo), std::abs(hi));
    lo = -a;
    hi = a;
  }
  scale.lo = lo;
  scale.hi = hi;
  return scale;
}

uint32_t heatmap_colour(const Heatmap& heatmap, double value) { return colour_scale(heatmap).colour(value); }

}  // namespace cabert::plot
