// Colour maps of the plot room: viridis for sequential data, ColorBrewer's RdBu (blue = negative) for
// signed data, Tableau 10 for line series. Colours are 0xRRGGBB; maps take t in [0, 1] (clamped).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/plot/figure.h"

namespace cabert::plot {

inline constexpr uint32_t kBlankColour = 0xD9D9D9;  // NaN heatmap cells

uint32_t viridis(double t);
uint32_t blue_white_red(double t);     // 0.5 is white-ish (0xF7F7F7)
uint32_t series_colour(size_t index);  // cycles through 10 colours

// A heatmap's colour range, resolved once from its data (or its fixed min/max).
struct ColourScale {
  Heatmap::Scale scale = Heatmap::Scale::kSequential;
  double lo = 0, hi = 1;  // diverging: lo == -hi
  uint32_t colour(double value) const;
};
ColourScale colour_scale(const Heatmap& heatmap);

}  // namespace cabert::plot
