#include "lib/plot/png.h"

#include <cstring>
#include <memory>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/plot/figure.h"

namespace cabert::plot {
namespace {

using SurfacePtr = std::unique_ptr<cairo_surface_t, void (*)(cairo_surface_t*)>;

cairo_status_t append(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

struct Reader {
  const std::string* bytes;
  size_t offset = 0;
};

cairo_status_t take(void* closure, unsigned char* data, unsigned int length) {
  auto* reader = static_cast<Reader*>(closure);
  if (reader->bytes->size() - reader->offset < length) return CAIRO_STATUS_READ_ERROR;
  std::memcpy(data, reader->bytes->data() + reader->offset, length);
  reader->offset += length;
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

std::string encode_png(cairo_surface_t* surface, const std::string& path) {
  std::string bytes;
  cairo_status_t status = cairo_surface_write_to_png_stream(surface, append, &bytes);
  if (status != CAIRO_STATUS_SUCCESS)
    throw Error(str(path, ": cannot encode the PNG: ", cairo_status_to_string(status)));
  return bytes;
}

uint32_t Image::at(int x, int y) const {
  if (x < 0 || y < 0 || x >= width || y >= height) {
    throw Error(str("expected a pixel within ", width, " x ", height, ", got (", x, ", ", y, ")"));
  }
  return pixels[static_cast<size_t>(y) * width + x];
}

Image read_png(const std::string& path) {
  std::string bytes = read_file(path);
  static const std::string kSignature = "\x89PNG\r\n\x1a\n";
  if (bytes.compare(0, kSignature.size(), kSignature) != 0) throw DataError(str(path, ": not a PNG file"));
  Reader reader{&bytes};
  SurfacePtr decoded(cairo_image_surface_create_from_png_stream(take, &reader), cairo_surface_destroy);
  cairo_status_t status = cairo_surface_status(decoded.get());
  if (status != CAIRO_STATUS_SUCCESS) {
    throw DataError(str(path, ": cannot decode the PNG: ", cairo_status_to_string(status)));
  }
  // Composite onto white in RGB24, whatever the PNG's colour type and alpha.
  Image image;
  image.width = cairo_image_surface_get_width(decoded.get());
  image.height = cairo_image_surface_get_height(decoded.get());
  SurfacePtr flat(cairo_image_surface_create(CAIRO_FORMAT_RGB24, image.width, image.height), cairo_surface_destroy);
  cairo_t* cr = cairo_create(flat.get());
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_set_source_surface(cr, decoded.get(), 0, 0);
  cairo_paint(cr);
  cairo_destroy(cr);
  cairo_surface_flush(flat.get());
  const unsigned char* data = cairo_image_surface_get_data(flat.get());
  int stride = cairo_image_surface_get_stride(flat.get());
  image.pixels.resize(static_cast<size_t>(image.width) * image.height);
  for (int y = 0; y < image.height; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + static_cast<size_t>(y) * stride);
    for (int x = 0; x < image.width; ++x) image.pixels[static_cast<size_t>(y) * image.width + x] = row[x] & 0xFFFFFF;
  }
  return image;
}

}  // namespace cabert::plot
