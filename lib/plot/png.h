// PNG bytes to and from Cairo image surfaces, in memory (the writer hands them to an atomic file write).
#pragma once

#include <cairo.h>

#include <string>

namespace cabert::plot {

// The surface as PNG bytes; throws cabert::Error naming `path` when Cairo fails.
std::string encode_png(cairo_surface_t* surface, const std::string& path);

}  // namespace cabert::plot
