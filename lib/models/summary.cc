#include "lib/models/summary.h"

#include <iomanip>
#include <sstream>

namespace cabert::models {
namespace {

std::string shape_signature(const torch::nn::Module& module) {
  std::ostringstream out;
  for (const auto& p : module.named_parameters(true)) out << p.key() << p.value().sizes() << ";";
  return out.str();
}

void print_tree(const torch::nn::Module& module, const std::string& name, int depth, std::ostringstream& out) {
  out << std::string(2 * depth, ' ') << name << " (" << module.name() << "): " << count_parameters(module);
  int64_t own = 0;
  for (const auto& p : module.named_parameters(false)) own += p.value().numel();
  if (own > 0 && !module.children().empty()) out << " (own " << own << ")";
  if (!module.children().empty() || own == 0) {
    // nothing more on this line
  } else {
    out << "  [";
    bool first = true;
    for (const auto& p : module.named_parameters(false)) {
      out << (first ? "" : ", ") << p.key() << " " << p.value().sizes();
      first = false;
    }
    out << "]";
  }
  out << "\n";
  auto children = module.named_children();
  for (size_t i = 0; i < children.size(); ++i) {
    // Collapse runs of identically shaped siblings (the layers of a stack).
    size_t j = i;
    const std::string signature = shape_signature(*children[i].value());
    while (j + 1 < children.size() && shape_signature(*children[j + 1].value()) == signature &&
           children[j + 1].value()->name() == children[i].value()->name()) {
      ++j;
    }
    print_tree(*children[i].value(), children[i].key(), depth + 1, out);
    if (j > i) {
      out << std::string(2 * (depth + 1), ' ') << children[i + 1].key() << ".." << children[j].key() << " ("
          << children[i].value()->name() << "): " << count_parameters(*children[i].value()) << " each, same as "
          << children[i].key() << "\n";
      i = j;
    }
  }
}

}  // namespace

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters(true)) total += p.numel();
  return total;
}

std::string human_parameters(int64_t count) {
  std::ostringstream out;
  out << std::fixed;
  if (count >= 1000000) {
    out << std::setprecision(2) << count / 1e6 << "M";
  } else if (count >= 1000) {
    out << std::setprecision(1) << count / 1e3 << "K";
  } else {
    out << count;
  }
  return out.str();
}

std::string module_tree(const torch::nn::Module& module, const std::string& root_name) {
  std::ostringstream out;
  print_tree(module, root_name, 0, out);
  const int64_t total = count_parameters(module);
  out << "total parameters: " << total << " (" << human_parameters(total) << ")\n";
  return out.str();
}

}  // namespace cabert::models
