#include "lib/plot/figure.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "lib/core/errors.h"

namespace cabert::plot {
namespace {

namespace fs = std::filesystem;

// A fresh directory for the current test, removed at the end of it.
class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / str("cabert_plot_", test->test_suite_name(), "_", test->name(), "_", getpid());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  size_t entries() const { return std::distance(fs::directory_iterator(path_), fs::directory_iterator()); }

 private:
  fs::path path_;
};

// The message of the `Exception` that `action` throws; a test failure (and "") when it throws none.
template <typename Exception = Error>
std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Exception& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

// Relative luminance of an sRGB colour.
double luminance(uint32_t rgb) {
  auto linear = [](uint32_t channel) {
    double c = channel / 255.0;
    return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * linear((rgb >> 16) & 0xFF) + 0.7152 * linear((rgb >> 8) & 0xFF) + 0.0722 * linear(rgb & 0xFF);
}

// The pixel that holds a point.
uint32_t pixel_at(const Image& image, Point point) {
  return image.at(static_cast<int>(std::floor(point.x)), static_cast<int>(std::floor(point.y)));
}

// Whether `colour` occurs within `radius` pixels of `point`.
bool colour_near(const Image& image, Point point, uint32_t colour, int radius) {
  int cx = static_cast<int>(std::floor(point.x)), cy = static_cast<int>(std::floor(point.y));
  for (int y = cy - radius; y <= cy + radius; ++y) {
    for (int x = cx - radius; x <= cx + radius; ++x) {
      if (image.at(x, y) == colour) return true;
    }
  }
  return false;
}

Heatmap known_matrix() {
  Heatmap heatmap;
  heatmap.rows = 3;
  heatmap.cols = 5;
  heatmap.values = {0.1, 0.5, -0.2, 0.3, 0.0,  //
                    0.7, NAN, 0.2,  1.9, 0.4,  //
                    0.6, 0.8, 0.05, 1.1, -0.1};
  heatmap.x_label = "offset";
  heatmap.y_label = "head";
  return heatmap;
}

Figure single(const std::string& title, Panel panel) {
  Figure figure;
  figure.title = title;
  figure.panels.push_back(std::move(panel));
  return figure;
}

LineChart parabola() {
  LineChart chart;
  chart.x_label = "x";
  chart.y_label = "(x - 3)^2";
  Series series;
  for (double x = 0; x <= 6; x += 0.25) {
    series.x.push_back(x);
    series.y.push_back((x - 3) * (x - 3));
  }
  chart.series.push_back(series);
  return chart;
}

TEST(Plot, WrittenPngDecodesToFigureSize) {
  TempDir dir;
  Figure figure = single("Kernels", {"layer 1", known_matrix()});
  Size size = figure_size(figure);
  EXPECT_EQ(size.width, 520);
  EXPECT_EQ(size.height, 400 + kFigureTitleBand);
  write_png(figure, dir.file("kernels.png"));
  Image image = read_png(dir.file("kernels.png"));
  EXPECT_EQ(image.width, size.width);
  EXPECT_EQ(image.height, size.height);
  EXPECT_EQ(image.pixels.size(), static_cast<size_t>(size.width) * size.height);
  EXPECT_EQ(image.at(0, 0), 0xFFFFFFu);  // white background
  EXPECT_EQ(dir.entries(), 1u);          // no temporary file left beside it
}

TEST(Plot, GridIsColumnsTimesRowsOfPanelsBelowTheTitleBand) {
  TempDir dir;
  Figure figure;
  figure.title = "Grid";
  figure.columns = 2;
  figure.panel_width = 300;
  figure.panel_height = 220;
  for (int i = 0; i < 5; ++i) {
    Panel panel{str("panel ", i), known_matrix()};
    if (i % 2) panel.content = parabola();
    figure.panels.push_back(panel);
  }
  Size size = figure_size(figure);
  EXPECT_EQ(size.width, 2 * 300);
  EXPECT_EQ(size.height, 3 * 220 + kFigureTitleBand);
  write_png(figure, dir.file("grid.png"));
  Image image = read_png(dir.file("grid.png"));
  EXPECT_EQ(image.width, size.width);
  EXPECT_EQ(image.height, size.height);
  // Panel 3 sits in the second column of the second row, inside its cell.
  Rect area = plot_area(figure, 3);
  EXPECT_GT(area.x, 300);
  EXPECT_LT(area.x + area.width, 600);
  EXPECT_GT(area.y, kFigureTitleBand + 220);
  EXPECT_LT(area.y + area.height, kFigureTitleBand + 2 * 220);

  // Fewer panels than columns: the figure is only as wide as its panels; no title, no band.
  figure.title.clear();
  figure.columns = 4;
  figure.panels.resize(2);
  size = figure_size(figure);
  EXPECT_EQ(size.width, 2 * 300);
  EXPECT_EQ(size.height, 220);
  write_png(figure, dir.file("row.png"));
  image = read_png(dir.file("row.png"));
  EXPECT_EQ(image.width, size.width);
  EXPECT_EQ(image.height, size.height);
}

TEST(Plot, HeatmapCellCentresHaveExactlyTheirColour) {
  TempDir dir;
  for (auto scale : {Heatmap::Scale::kSequential, Heatmap::Scale::kDiverging}) {
    Heatmap heatmap = known_matrix();
    heatmap.scale = scale;
    Figure figure = single("", {"cells", heatmap});
    std::string path = dir.file("cells.png");
    write_png(figure, path);
    Image image = read_png(path);
    Rect area = plot_area(figure, 0);
    for (int64_t row = 0; row < heatmap.rows; ++row) {
      for (int64_t col = 0; col < heatmap.cols; ++col) {
        Point centre = heatmap_cell_centre(figure, 0, row, col);
        EXPECT_GT(centre.x, area.x);
        EXPECT_LT(centre.x, area.x + area.width);
        double value = heatmap.values[row * heatmap.cols + col];
        EXPECT_EQ(pixel_at(image, centre), heatmap_colour(heatmap, value)) << "row " << row << ", column " << col;
      }
    }
    // Row 0 is at the top, column 0 at the left.
    EXPECT_LT(heatmap_cell_centre(figure, 0, 0, 0).y, heatmap_cell_centre(figure, 0, 1, 0).y);
    EXPECT_LT(heatmap_cell_centre(figure, 0, 0, 0).x, heatmap_cell_centre(figure, 0, 0, 1).x);
  }
}

TEST(Plot, OnlyTheMaximumCellHasTheTopColour) {
  TempDir dir;
  Heatmap heatmap = known_matrix();
  uint32_t top = heatmap_colour(heatmap, 1.9);
  EXPECT_EQ(top, 0xFDE725u);  // the bright end of viridis
  EXPECT_EQ(heatmap_colour(heatmap, NAN), 0xD9D9D9u);
  Figure figure = single("", {"", heatmap});
  write_png(figure, dir.file("max.png"));
  Image image = read_png(dir.file("max.png"));
  std::vector<std::pair<int64_t, int64_t>> top_cells;
  for (int64_t row = 0; row < heatmap.rows; ++row) {
    for (int64_t col = 0; col < heatmap.cols; ++col) {
      if (pixel_at(image, heatmap_cell_centre(figure, 0, row, col)) == top) top_cells.emplace_back(row, col);
    }
  }
  EXPECT_EQ(top_cells, (std::vector<std::pair<int64_t, int64_t>>{{1, 3}}));
}

TEST(Plot, ManyLabelledCellsStayExactWhenLabelsAreThinned) {
  TempDir dir;
  Heatmap heatmap;
  heatmap.rows = heatmap.cols = 48;
  for (int i = 0; i < 48; ++i) heatmap.row_labels.push_back(str("token_", i));
  heatmap.col_labels = heatmap.row_labels;
  for (int i = 0; i < 48 * 48; ++i) heatmap.values.push_back((i * 37 % 101) / 100.0);
  heatmap.min = 0;
  heatmap.max = 1;
  Figure figure = single("attention", {"layer 0", heatmap});
  write_png(figure, dir.file("attention.png"));
  Image image = read_png(dir.file("attention.png"));
  for (int64_t i = 0; i < 48; i += 5) {
    Point centre = heatmap_cell_centre(figure, 0, i, 47 - i);
    EXPECT_EQ(pixel_at(image, centre), heatmap_colour(heatmap, heatmap.values[i * 48 + 47 - i]));
  }
}

TEST(Plot, SequentialMapRisesInLuminance) {
  Heatmap heatmap;
  heatmap.min = 0;
  heatmap.max = 1;
  // Strictly rising at the resolution one can tell apart. Between neighbouring 8-bit colours, rounding
  // may step one channel before another: dips stay below 0.0004 (measured over 100,000 samples).
  double previous = -1;
  for (int i = 0; i <= 64; ++i) {
    double current = luminance(heatmap_colour(heatmap, i / 64.0));
    EXPECT_GT(current, previous) << "at " << i / 64.0;
    previous = current;
  }
  previous = -1;
  for (int i = 0; i <= 1000; ++i) {
    double current = luminance(heatmap_colour(heatmap, i / 1000.0));
    EXPECT_GT(current, previous - 0.0005) << "at " << i / 1000.0;
    previous = std::max(previous, current);
  }
  EXPECT_EQ(heatmap_colour(heatmap, 0), 0x440154u);
  EXPECT_EQ(heatmap_colour(heatmap, -5), 0x440154u);  // clamped to the fixed range
  EXPECT_EQ(heatmap_colour(heatmap, 7), 0xFDE725u);
}

TEST(Plot, DivergingMapIsWhiteAtZeroBlueBelowRedAbove) {
  Heatmap heatmap;
  heatmap.rows = 1;
  heatmap.cols = 2;
  heatmap.values = {-2, 0.5};  // the range becomes -2..2
  heatmap.scale = Heatmap::Scale::kDiverging;
  uint32_t zero = heatmap_colour(heatmap, 0);
  for (int shift : {16, 8, 0}) EXPECT_GE((zero >> shift) & 0xFF, 0xF0u) << std::hex << zero;
  uint32_t low = heatmap_colour(heatmap, -2), high = heatmap_colour(heatmap, 2);
  EXPECT_GT(low & 0xFF, low >> 16) << std::hex << low;     // blue over red
  EXPECT_GT(high >> 16, high & 0xFF) << std::hex << high;  // red over blue
  EXPECT_EQ(heatmap_colour(heatmap, 5), high);             // clamped to -2..2
  EXPECT_NE(heatmap_colour(heatmap, 0.5), zero);
  // Symmetric in darkness around zero.
  EXPECT_NEAR(luminance(heatmap_colour(heatmap, -1)), luminance(heatmap_colour(heatmap, 1)), 0.1);
}

TEST(Plot, LineChartDrawsTheSeriesThroughChartPoints) {
  TempDir dir;
  Figure figure = single("", {"parabola", parabola()});
  write_png(figure, dir.file("parabola.png"));
  Image image = read_png(dir.file("parabola.png"));
  const uint32_t blue = 0x1F77B4;  // the first series colour
  Rect area = plot_area(figure, 0);
  for (double x : {0.0, 1.0, 2.0, 3.0, 4.5, 6.0}) {
    Point point = chart_point(figure, 0, x, (x - 3) * (x - 3));
    EXPECT_GE(point.x, area.x);
    EXPECT_LE(point.x, area.x + area.width);
    EXPECT_GE(point.y, area.y);
    EXPECT_LE(point.y, area.y + area.height);
    EXPECT_TRUE(colour_near(image, point, blue, 2)) << "x = " << x;
  }
  // The lowest pixel of the line on screen is at the vertex.
  int lowest_row = -1, lowest_col = -1;
  for (int y = static_cast<int>(area.y); y < area.y + area.height; ++y) {
    for (int x = static_cast<int>(area.x); x < area.x + area.width; ++x) {
      if (image.at(x, y) == blue) {
        lowest_row = y;
        lowest_col = x;
      }
    }
  }
  Point vertex = chart_point(figure, 0, 3, 0);
  EXPECT_NEAR(lowest_row, vertex.y, 2);
  EXPECT_NEAR(lowest_col, vertex.x, 8);  // the flat bottom of the curve is a few pixels wide
}

TEST(Plot, AxisRangesPadTheDataAndLogAxesSpaceDecadesEvenly) {
  Figure figure = single("", {"", parabola()});
  Rect area = plot_area(figure, 0);
  Point low = chart_point(figure, 0, 0, 0), high = chart_point(figure, 0, 6, 9);
  // The data stays inside the frame, with some room at each end.
  EXPECT_GT(low.x, area.x + 0.02 * area.width);
  EXPECT_LT(high.x, area.x + 0.98 * area.width);
  EXPECT_LT(low.y, area.y + 0.98 * area.height);
  EXPECT_GT(high.y, area.y + 0.02 * area.height);

  LineChart curve;
  curve.log_y = true;
  curve.series.push_back({"loss", {0, 1, 2, 3, 4}, {1000, 100, 0, 10, 1}});  // 0 is skipped
  Figure log_figure = single("", {"", curve});
  double y1 = chart_point(log_figure, 0, 0, 1).y, y10 = chart_point(log_figure, 0, 0, 10).y;
  double y100 = chart_point(log_figure, 0, 0, 100).y;
  EXPECT_GT(y1, y10);
  EXPECT_NEAR(y1 - y10, y10 - y100, 1e-6);
  TempDir dir;
  write_png(log_figure, dir.file("log.png"));
  EXPECT_EQ(read_png(dir.file("log.png")).width, 520);
}

TEST(Plot, InvalidFiguresThrowNamingThePathAndTheProblem) {
  TempDir dir;
  std::string path = dir.file("bad.png");
  Heatmap heatmap;
  heatmap.rows = 3;
  heatmap.cols = 4;
  heatmap.values.assign(11, 0.5);
  Figure figure = single("", {"", heatmap});
  EXPECT_EQ(error_message([&] { write_png(figure, path); }),
            path + ": panel 0 (heatmap): expected 12 values (3 rows x 4 columns), got 11");
  EXPECT_EQ(error_message([&] { plot_area(figure, 0); }),
            "invalid figure: panel 0 (heatmap): expected 12 values (3 rows x 4 columns), got 11");

  heatmap.values.assign(12, 0.5);
  heatmap.row_labels = {"a", "b"};
  figure.panels[0].content = heatmap;
  EXPECT_EQ(error_message([&] { write_png(figure, path); }),
            path + ": panel 0 (heatmap): expected 3 row labels (one per row) or none, got 2");

  LineChart chart;
  chart.series.push_back({"loss", {1, 2, 3}, {4, 5}});
  figure.panels.push_back({"curve", chart});
  figure.panels[0].content = known_matrix();
  EXPECT_EQ(error_message([&] { write_png(figure, path); }),
            path + ": panel 1 (line chart): series 0 \"loss\": expected as many y values as x values (3), got 2");

  EXPECT_EQ(error_message([&] { write_png(Figure{}, path); }), path + ": expected at least one panel, got none");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(Plot, GeometryRejectsPanelsOfTheOtherKindAndOutOfRange) {
  Figure figure = single("", {"", known_matrix()});
  figure.panels.push_back({"", parabola()});
  EXPECT_EQ(error_message([&] { chart_point(figure, 0, 1, 1); }),
            "invalid figure: panel 0 is a heatmap, expected a line chart");
  EXPECT_EQ(error_message([&] { heatmap_cell_centre(figure, 1, 0, 0); }),
            "invalid figure: panel 1 is a line chart, expected a heatmap");
  EXPECT_EQ(error_message([&] { plot_area(figure, 2); }), "invalid figure: expected a panel index below 2, got 2");
  EXPECT_EQ(error_message([&] { heatmap_cell_centre(figure, 0, 3, 0); }),
            "panel 0 (heatmap): expected a cell within 3 x 5, got row 3, column 0");
}

TEST(Plot, ReadingANonPngFileThrowsNamingIt) {
  TempDir dir;
  std::string text = dir.file("notes.png");
  std::ofstream(text) << "not an image\n";
  EXPECT_EQ(error_message<DataError>([&] { read_png(text); }), text + ": not a PNG file");

  // A real PNG cut short.
  std::string whole = dir.file("whole.png"), cut = dir.file("cut.png");
  write_png(single("", {"", known_matrix()}), whole);
  std::string bytes(fs::file_size(whole) / 2, '\0');
  std::ifstream(whole, std::ios::binary).read(bytes.data(), bytes.size());
  std::ofstream(cut, std::ios::binary) << bytes;
  EXPECT_EQ(error_message<DataError>([&] { read_png(cut); }).rfind(cut + ": cannot decode the PNG: ", 0), 0u);

  EXPECT_NE(error_message([&] { read_png(dir.file("missing.png")); }).find(dir.file("missing.png")), std::string::npos);
}

}  // namespace
}  // namespace cabert::plot
