#include "lib/plot/text.h"

#include <cmath>

#include "lib/core/errors.h"

namespace cabert::plot {
namespace {

constexpr const char* kFamily = "DejaVu Sans";

double font_size(Font font) {
  switch (font) {
    case Font::kTick: return 13;
    case Font::kAxisTitle: return 14;
    case Font::kPanelTitle: return 15;
    case Font::kFigureTitle: return 18;
    case Font::kFigureTitleNarrow: return 13;
  }
  return 13;
}

bool is_bold(Font font) {
  return font == Font::kPanelTitle || font == Font::kFigureTitle || font == Font::kFigureTitleNarrow;
}

// Length of the UTF-8 sequence that starts with `lead`.
size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

}  // namespace

void use_font(cairo_t* cr, Font font) {
  cairo_font_options_t* options = cairo_font_options_create();
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
  cairo_set_font_options(cr, options);
  cairo_font_options_destroy(options);
  cairo_select_font_face(cr, kFamily, CAIRO_FONT_SLANT_NORMAL,
                         is_bold(font) ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, font_size(font));
}

double text_width(cairo_t* cr, Font font, const std::string& text) {
  use_font(cr, font);
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  return extents.x_advance;
}

double line_height(cairo_t* cr, Font font) {
  use_font(cr, font);
  cairo_font_extents_t extents;
  cairo_font_extents(cr, &extents);
  return extents.ascent + extents.descent;
}

std::string ellipsize(cairo_t* cr, Font font, const std::string& text, double max_width) {
  if (text_width(cr, font, text) <= max_width) return text;
  // Whole UTF-8 characters only, so that the result stays valid UTF-8.
  std::string best = "\u2026";
  for (size_t end = 0; end < text.size();) {
    end += utf8_length(static_cast<unsigned char>(text[end]));
    std::string candidate = text.substr(0, end) + "\u2026";
    if (text_width(cr, font, candidate) > max_width) break;
    best = candidate;
  }
  return best;
}

FittedText fit_text(cairo_t* cr, const std::vector<Font>& fonts, const std::string& text, double max_width) {
  if (fonts.empty()) throw Error("internal: fit_text without a font");
  for (Font font : fonts) {
    if (text_width(cr, font, text) <= max_width) return {font, text};
  }
  return {fonts.back(), ellipsize(cr, fonts.back(), text, max_width)};
}

void draw_text(cairo_t* cr, Font font, const std::string& text, double x, double y, HAlign h, VAlign v,
               double degrees) {
  use_font(cr, font);
  cairo_font_extents_t font_extents;
  cairo_font_extents(cr, &font_extents);
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  double dx = h == HAlign::kLeft ? 0 : h == HAlign::kCentre ? -extents.x_advance / 2 : -extents.x_advance;
  double dy = v == VAlign::kTop      ? font_extents.ascent
              : v == VAlign::kMiddle ? (font_extents.ascent - font_extents.descent) / 2
                                     : -font_extents.descent;
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, degrees * M_PI / 180);
  cairo_move_to(cr, dx, dy);
  cairo_show_text(cr, text.c_str());
  cairo_restore(cr);
}

ScratchContext::ScratchContext()
    : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1)), cr_(cairo_create(surface_)) {}

ScratchContext::~ScratchContext() {
  cairo_destroy(cr_);
  cairo_surface_destroy(surface_);
}

void set_colour(cairo_t* cr, unsigned rgb) {
  cairo_set_source_rgb(cr, ((rgb >> 16) & 0xFF) / 255.0, ((rgb >> 8) & 0xFF) / 255.0, (rgb & 0xFF) / 255.0);
}

}  // namespace cabert::plot
