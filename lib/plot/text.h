// Text on a Cairo context for the plot room: the fonts of a figure (DejaVu Sans through Cairo's toy text
// API), measuring, ellipsizing and drawing with alignment and rotation. Metrics are unhinted, so a
// scratch context used for layout measures exactly what the drawing context draws.
#pragma once

#include <cairo.h>

#include <string>
#include <vector>

namespace cabert::plot {

// kFigureTitleNarrow: the figure title's bold at a smaller size, for a title wider than its figure.
enum class Font { kTick, kAxisTitle, kPanelTitle, kFigureTitle, kFigureTitleNarrow };

// Sets up the context's font options and selects `font`.
void use_font(cairo_t* cr, Font font);
double text_width(cairo_t* cr, Font font, const std::string& text);
// Ascent + descent of the font: the height of a line of text.
double line_height(cairo_t* cr, Font font);
// `text`, or its longest prefix + "…" that fits in max_width.
std::string ellipsize(cairo_t* cr, Font font, const std::string& text, double max_width);

// The first of `fonts` (largest first) in which the whole of `text` fits in max_width; when none does, the text
// ellipsized in the last.
struct FittedText {
  Font font;
  std::string text;
};
FittedText fit_text(cairo_t* cr, const std::vector<Font>& fonts, const std::string& text, double max_width);

// Where the anchor lies on the text's box, in the text's own (rotated) frame.
enum class HAlign { kLeft, kCentre, kRight };
enum class VAlign { kTop, kMiddle, kBottom };
// Draws `text` in the current source colour with its box anchored at (x, y), rotated by `degrees`
// (negative = counter-clockwise on screen) around that anchor.
void draw_text(cairo_t* cr, Font font, const std::string& text, double x, double y, HAlign h, VAlign v,
               double degrees = 0);

// A 1x1 image surface and context, for measuring text while laying out a figure.
class ScratchContext {
 public:
  ScratchContext();
  ~ScratchContext();
  ScratchContext(const ScratchContext&) = delete;
  ScratchContext& operator=(const ScratchContext&) = delete;
  cairo_t* get() const { return cr_; }

 private:
  cairo_surface_t* surface_;
  cairo_t* cr_;
};

void set_colour(cairo_t* cr, unsigned rgb);

}  // namespace cabert::plot
