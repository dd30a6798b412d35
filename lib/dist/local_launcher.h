// `cabert pretrain|finetune ... --nproc N`: torchrun's single-machine case without Python. The command
// re-executes itself N times with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and
// a free MASTER_PORT, each child in its own process group, and waits:
//   - SIGINT/SIGTERM to the launcher go to every rank once (they save a checkpoint and exit together);
//   - a rank that fails makes the launcher wait `grace` for the others (they notice the lost peer within
//     the job's timeout) and then kill what is left; the exit code is the first failed rank's.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace cabert::dist {

// Returns when every rank has exited with 0. Throws Interrupted when a signal stopped the job, Error (with
// the failed rank's exit code) when a rank failed.
void launch_local_processes(int nproc, const std::vector<std::string>& argv, std::chrono::seconds grace);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0).
int free_local_port();

}  // namespace cabert::dist
