#include "lib/train/tensorboard_pictures.h"

#include <filesystem>
#include <map>
#include <string>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/io/checkpoint_file.h"
#include "lib/pictures/kernel_pictures.h"
#include "lib/plot/figure.h"

namespace cabert::train {

namespace fs = std::filesystem;

// The PNG goes through a hidden file of the log's directory (the figure writer writes files), removed at once.
void log_kernel_pictures(io::TensorboardLog& tensorboard, const pb::ModelConfig& config, torch::nn::Module& module,
                         int64_t step, uint32_t run) {
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [name, tensor] : io::module_tensors(module, "")) tensors.emplace(name, tensor.detach().cpu());
  for (const auto& figure : pictures::kernel_figures(config, tensors, str(config.name(), " (step ", step, ")"))) {
    const std::string path = (fs::path(tensorboard.dir()) / str(".", figure.file, ".tmp")).string();
    plot::write_png(figure.figure, path);
    const std::string png = read_file(path);
    fs::remove(path);
    const plot::Size size = plot::figure_size(figure.figure);
    tensorboard.image(str("pictures/", fs::path(figure.file).stem().string()), step, png, size.width, size.height,
                      run);
  }
}

}  // namespace cabert::train
