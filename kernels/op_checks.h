// Helpers for the argument checks at the ops' entry points, so that a bad argument fails with the same
// "op: expected X, got Y" sentence whichever op and whichever path (reference, CPU, CUDA) it reaches.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace cabert::kernels {

// "[2, 3, 4]", or "none" for an undefined tensor.
std::string shape_of(const at::Tensor& t);

// Throws cabert::UsageError("<op>: <message>") unless ok.
void require(bool ok, const char* op, const std::string& message);

}  // namespace cabert::kernels
