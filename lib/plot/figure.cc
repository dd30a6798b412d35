#include "lib/plot/figure.h"

#include <cairo.h>

#include <memory>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/plot/draw.h"
#include "lib/plot/layout.h"
#include "lib/plot/png.h"
#include "lib/plot/text.h"

namespace cabert::plot {
namespace {

// Checks the figure and panel index for the geometry functions.
PanelLayout checked_layout(const Figure& figure, size_t panel) {
  std::string problem = figure_problem(figure);
  if (!problem.empty()) throw Error(str("invalid figure: ", problem));
  if (panel >= figure.panels.size()) {
    throw Error(str("invalid figure: expected a panel index below ", figure.panels.size(), ", got ", panel));
  }
  ScratchContext measure;
  return layout_panel(measure.get(), figure, panel);
}

void draw_figure(cairo_t* cr, const Figure& figure) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  if (!figure.title.empty()) {
    Size size = figure_size(figure);
    set_colour(cr, kInkColour);
    // A one-panel figure is narrower than a long title: smaller before it is cut.
    const FittedText title =
        fit_text(cr, {Font::kFigureTitle, Font::kFigureTitleNarrow}, figure.title, size.width - 2 * kPadding);
    draw_text(cr, title.font, title.text, size.width / 2.0, kFigureTitleBand / 2.0, HAlign::kCentre, VAlign::kMiddle);
  }
  for (size_t panel = 0; panel < figure.panels.size(); ++panel) {
    PanelLayout layout = layout_panel(cr, figure, panel);
    draw_panel(cr, figure.panels[panel], layout);
  }
}

}  // namespace

void write_png(const Figure& figure, const std::string& path) {
  std::string problem = figure_problem(figure);
  if (!problem.empty()) throw Error(str(path, ": ", problem));
  Size size = figure_size(figure);
  std::unique_ptr<cairo_surface_t, void (*)(cairo_surface_t*)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, size.width, size.height), cairo_surface_destroy);
  std::unique_ptr<cairo_t, void (*)(cairo_t*)> cr(cairo_create(surface.get()), cairo_destroy);
  draw_figure(cr.get(), figure);
  cairo_status_t status = cairo_status(cr.get());
  if (status != CAIRO_STATUS_SUCCESS)
    throw Error(str(path, ": cannot draw the figure: ", cairo_status_to_string(status)));
  write_file_atomically(path, encode_png(surface.get(), path));
}

Rect plot_area(const Figure& figure, size_t panel) { return checked_layout(figure, panel).plot; }

Point heatmap_cell_centre(const Figure& figure, size_t panel, int64_t row, int64_t col) {
  PanelLayout layout = checked_layout(figure, panel);
  const auto* heatmap = std::get_if<Heatmap>(&figure.panels[panel].content);
  if (!heatmap) throw Error(str("invalid figure: panel ", panel, " is a line chart, expected a heatmap"));
  if (row < 0 || row >= heatmap->rows || col < 0 || col >= heatmap->cols) {
    throw Error(str("panel ", panel, " (heatmap): expected a cell within ", heatmap->rows, " x ", heatmap->cols,
                    ", got row ", row, ", column ", col));
  }
  return {(layout.col_edges[col] + layout.col_edges[col + 1]) / 2.0,
          (layout.row_edges[row] + layout.row_edges[row + 1]) / 2.0};
}

Point chart_point(const Figure& figure, size_t panel, double x, double y) {
  PanelLayout layout = checked_layout(figure, panel);
  if (!std::holds_alternative<LineChart>(figure.panels[panel].content)) {
    throw Error(str("invalid figure: panel ", panel, " is a heatmap, expected a line chart"));
  }
  return chart_pixel(layout, x, y);
}

}  // namespace cabert::plot
