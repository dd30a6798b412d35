// The c10d objects behind a Communicator (internal to lib/dist: only communicator.cc and gradient_sync.cc
// include the c10d headers).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "lib/dist/communicator.h"

namespace cabert::dist {

struct Communicator::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> process_group;
};

}  // namespace cabert::dist
