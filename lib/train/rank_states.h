// The parts of a pre-training checkpoint that data parallelism adds (lib/dist): which checkpoint every rank
// resumes from, and each rank's own state (data position, generators) gathered on rank 0 when saving and
// handed back to each rank when resuming. With one process they reduce to the single-process fields.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/checkpoint.pb.h"
#include "lib/data/pretraining_batches.h"
#include "lib/dist/communicator.h"
#include "lib/io/checkpoint_file.h"

namespace cabert::train {

// The newest checkpoint in `model_dir` that reads back whole, as rank 0 sees it (a broken newer one is skipped
// with a warning saying why), read by every rank; nullptr when there is none. DataError when none reads back;
// UsageError when a rank cannot read rank 0's file (the directory must be shared) or when the checkpoint was
// written by another number of processes.
std::unique_ptr<io::Checkpoint> load_latest_checkpoint(const std::string& model_dir, dist::Communicator& communicator);

// This rank's data position and generator states.
pb::RankState capture_rank_state(const data::ExampleStream& stream, const std::mt19937_64& rng);

// Collective: every rank's state, in rank order, on rank 0 (other ranks get {}); `at_step` names the exchange.
std::vector<pb::RankState> gather_rank_states(dist::Communicator& communicator, const pb::RankState& mine,
                                              int64_t at_step);

// Writes the gathered states into `info` (nothing with one process: info's own fields hold rank 0's).
void record_rank_states(const std::vector<pb::RankState>& states, int world_size, pb::CheckpointInfo* info);

// Restores this rank's generators and data position from `checkpoint`.
void restore_rank_state(const io::Checkpoint& checkpoint, const dist::Communicator& communicator, std::mt19937_64& rng,
                        data::ExampleStream& stream);

}  // namespace cabert::train
