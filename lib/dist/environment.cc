#include "lib/dist/environment.h"

#include <cstdlib>

#include "lib/core/errors.h"

namespace cabert::dist {
namespace {

const char* variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int integer_variable(const char* name, int fallback, int minimum) {
  const char* value = variable(name);
  if (value == nullptr) return fallback;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < minimum || parsed > 1 << 24) {
    throw UsageError(str("environment variable ", name, "='", value, "': expected an integer >= ", minimum));
  }
  return static_cast<int>(parsed);
}

}  // namespace

bool started_by_launcher() { return variable("RANK") != nullptr; }

Environment read_environment() {
  Environment env;
  if (variable("RANK") == nullptr && variable("WORLD_SIZE") == nullptr) return env;
  if (variable("RANK") == nullptr || variable("WORLD_SIZE") == nullptr) {
    throw UsageError("a data-parallel launch sets both RANK and WORLD_SIZE (torchrun does); only one is set");
  }
  env.world_size = integer_variable("WORLD_SIZE", 1, 1);
  env.rank = integer_variable("RANK", 0, 0);
  if (env.rank >= env.world_size) {
    throw UsageError(str("environment: RANK=", env.rank, " is not below WORLD_SIZE=", env.world_size));
  }
  env.local_rank = integer_variable("LOCAL_RANK", env.rank, 0);
  env.local_world_size = integer_variable("LOCAL_WORLD_SIZE", env.world_size, 1);
  if (const char* addr = variable("MASTER_ADDR")) env.master_addr = addr;
  env.master_port = integer_variable("MASTER_PORT", env.master_port, 1);
  if (env.master_port > 65535) throw UsageError(str("environment: MASTER_PORT=", env.master_port, " is not a port"));
  if (env.world_size > 1 && variable("MASTER_ADDR") == nullptr) {
    throw UsageError("environment: WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (rank 0's address)");
  }
  return env;
}

std::string rank_device(const std::string& device, const Environment& env, int64_t cuda_devices) {
  if (device == "cuda" && cuda_devices > 0) return str("cuda:", env.local_rank % cuda_devices);
  if (device.rfind("cuda:", 0) == 0 && env.local_world_size > 1) {
    throw UsageError(str("--device ", device, ": with ", env.local_world_size, " processes on this machine each takes ",
                         "its own GPU; give --device cuda (process LOCAL_RANK takes cuda:LOCAL_RANK)"));
  }
  return device;
}

}  // namespace cabert::dist
