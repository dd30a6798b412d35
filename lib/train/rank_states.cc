#include "lib/train/rank_states.h"

#include <filesystem>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/core/random.h"
#include "lib/io/checkpoint_lookup.h"
#include "lib/train/checkpoint.h"

namespace cabert::train {

std::unique_ptr<io::Checkpoint> load_latest_checkpoint(const std::string& model_dir, dist::Communicator& communicator) {
  // Rank 0 picks the newest checkpoint that reads back whole (a crash or a full disk can leave a broken newest
  // one); every rank then reads that file.
  std::unique_ptr<io::Checkpoint> checkpoint;
  std::string chosen;
  if (communicator.is_main()) {
    auto existing = io::list_checkpoints(model_dir);
    size_t skipped = 0;
    for (auto it = existing.rbegin(); it != existing.rend() && !checkpoint; ++it) {
      try {
        checkpoint = std::make_unique<io::Checkpoint>(io::load_checkpoint(it->second));
        chosen = it->second;
      } catch (const Error& error) {
        log_warning("--resume: skipping ", it->second, ": ", error.what());
        ++skipped;
      }
    }
    if (!checkpoint && skipped > 0) {
      throw DataError(str("--resume: none of the ", skipped, " checkpoints in ", model_dir,
                          " reads back whole (see the warnings above); move them away to start afresh"));
    }
  }
  const std::string path = communicator.broadcast_bytes(chosen, "resume/checkpoint");
  if (path.empty()) return nullptr;
  if (!communicator.is_main()) {
    if (!std::filesystem::exists(path)) {
      throw UsageError(str(communicator.describe(), ": --resume: cannot read ", path,
                           " (rank 0's checkpoint): the model directory must be on a filesystem every rank sees"));
    }
    checkpoint = std::make_unique<io::Checkpoint>(io::load_checkpoint(path));
  }
  const int saved_world = std::max<int>(1, static_cast<int>(checkpoint->info.world_size()));
  if (saved_world != communicator.world_size()) {
    throw UsageError(str("--resume: ", path, " was written by a run of ", saved_world, " process(es); resume it with ",
                         saved_world, " (this run has ", communicator.world_size(),
                         "): every rank continues from its own data position"));
  }
  return checkpoint;
}

pb::RankState capture_rank_state(const data::ExampleStream& stream, const std::mt19937_64& rng) {
  pb::RankState state;
  *state.mutable_data() = stream.position();
  state.set_torch_rng_state(torch_cpu_rng_state());
  state.set_std_rng_state(rng_state(rng));
  return state;
}

std::vector<pb::RankState> gather_rank_states(dist::Communicator& communicator, const pb::RankState& mine,
                                              int64_t at_step) {
  std::vector<pb::RankState> states;
  for (const auto& bytes : communicator.gather_to_main(mine.SerializeAsString(), str("checkpoint/", at_step))) {
    if (!states.emplace_back().ParseFromString(bytes)) throw Error("internal: unreadable rank state");
  }
  return states;
}

void record_rank_states(const std::vector<pb::RankState>& states, int world_size, pb::CheckpointInfo* info) {
  const pb::RankState& main = states.at(0);
  *info->mutable_data() = main.data();
  info->set_torch_rng_state(main.torch_rng_state());
  info->set_std_rng_state(main.std_rng_state());
  if (world_size == 1) return;
  info->set_world_size(static_cast<uint32_t>(world_size));
  for (const auto& state : states) *info->add_ranks() = state;
}

void restore_rank_state(const io::Checkpoint& checkpoint, const dist::Communicator& communicator, std::mt19937_64& rng,
                        data::ExampleStream& stream) {
  const pb::CheckpointInfo& info = checkpoint.info;
  pb::RankState state;
  if (communicator.distributed()) {
    if (info.ranks_size() != communicator.world_size()) {
      throw DataError(str(checkpoint.path, ": holds the state of ", info.ranks_size(), " ranks, expected ",
                          communicator.world_size()));
    }
    state = info.ranks(communicator.rank());
  } else {
    *state.mutable_data() = info.data();
    state.set_torch_rng_state(info.torch_rng_state());
    state.set_std_rng_state(info.std_rng_state());
  }
  set_torch_cpu_rng_state(state.torch_rng_state());
  set_rng_state(rng, state.std_rng_state());
  stream.seek(state.data());
}

}  // namespace cabert::train
