// The adapter between safetensors files (lib/io/safetensors.h, torch-free) and torch tensors: dtype mapping,
// writing named CPU tensors, reading one tensor into a tensor of its own dtype.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/io/safetensors.h"

namespace cabert::io {

// F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL; nullopt for the rest (F8_*, F4, F6_*, U16/U32/U64, C64).
std::optional<torch::ScalarType> torch_dtype(SafeDtype dtype);
// The names above, for messages.
const char* torch_readable_dtypes();

// Writes the tensors (any device, made contiguous on the CPU) atomically, in the reference writer's order.
// Throws cabert::Error for a dtype safetensors cannot hold.
void write_tensors_safetensors(const std::string& path,
                               const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// One tensor with its stored dtype and shape. DataError "FILE: tensor 'NAME' has dtype D, which cabert cannot
// read (...)" for a dtype torch_dtype() lacks.
torch::Tensor read_tensor(const SafetensorsFile& file, const std::string& name);

}  // namespace cabert::io
