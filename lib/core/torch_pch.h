// Precompiled header for every target that touches LibTorch (see lib/CMakeLists.txt). Only headers that
// change rarely belong here.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>
