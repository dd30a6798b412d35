// The data shares of a data-parallel pre-training run (lib/data/pretraining_batches.h): ranks read disjoint
// sets of whole frames that together cover the corpus, the assignment follows from the seed, every example
// keeps its own seed whichever rank reads it, and a rank's stream resumes exactly from its position.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "lib/core/errors.h"
#include "lib/data/pretraining_batches.h"
#include "lib/io/record_file.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

constexpr uint32_t kFrameRecords = 3;

// Shard s holds `counts[s]` examples whose single token is 1000 * s + record index: an example names where
// it lies.
std::vector<std::string> write_corpus(const std::vector<int>& counts) {
  std::vector<std::string> shards;
  io::WriterOptions options;
  options.frame_records = kFrameRecords;
  const std::string dir = testing::temp_dir();
  for (size_t s = 0; s < counts.size(); ++s) {
    std::string path = dir + "/shard-" + std::to_string(s);
    io::RecordWriter writer(path, "cabert.pb.PretrainingExample", {}, options);
    for (int i = 0; i < counts[s]; ++i) {
      pb::PretrainingExample example;
      example.add_token_ids(static_cast<int32_t>(1000 * s + i));
      writer.write(example);
    }
    writer.close();
    shards.push_back(path);
  }
  return shards;
}

int32_t id_of(const pb::PretrainingExample& example) { return example.token_ids(0); }

// One epoch of a rank's stream: example id -> its seed.
std::map<int32_t, uint64_t> first_epoch(const std::vector<std::string>& shards, uint64_t held_out,
                                        data::DataShare share) {
  data::ExampleStream stream(shards, held_out, share);
  std::map<int32_t, uint64_t> seen;
  while (true) {
    uint64_t seed = 0;
    pb::PretrainingExample example = stream.next(&seed);
    if (stream.position().epoch() > 0) break;
    EXPECT_TRUE(seen.emplace(id_of(example), seed).second) << "example " << id_of(example) << " read twice";
  }
  return seen;
}

TEST(DataShare, WriterCutsFramesOfTheRequestedRecordCount) {
  auto shards = write_corpus({10});
  io::RecordReader reader(shards[0]);
  reader.select_frames(1, 2);  // frames 1 and 3: records 3-5 and 9
  pb::PretrainingExample example;
  std::vector<uint64_t> indices;
  std::vector<int32_t> ids;
  while (reader.next(&example)) {
    indices.push_back(reader.last_record_index());
    ids.push_back(id_of(example));
  }
  EXPECT_EQ(indices, (std::vector<uint64_t>{3, 4, 5, 9}));
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 4, 5, 9}));
  EXPECT_EQ(reader.footer().frame_count(), 4u);  // 3 + 3 + 3 + 1 records
}

TEST(DataShare, RanksReadDisjointWholeFramesThatCoverTheCorpus) {
  auto shards = write_corpus({10, 7, 2});
  const uint64_t held_out = 4;
  std::map<int32_t, uint64_t> alone = first_epoch(shards, held_out, {0, 1, 42});
  EXPECT_EQ(alone.size(), 10u - held_out + 7 + 2);
  for (uint32_t world : {2u, 3u}) {
    std::map<int32_t, uint64_t> joint;
    for (uint32_t rank = 0; rank < world; ++rank) {
      std::map<int32_t, uint64_t> mine = first_epoch(shards, held_out, {rank, world, 42});
      EXPECT_FALSE(mine.empty()) << "rank " << rank << " of " << world;
      std::map<std::pair<int, int>, int> frames;  // (shard, frame) -> examples
      for (const auto& [id, seed] : mine) {
        EXPECT_TRUE(joint.emplace(id, seed).second) << "example " << id << " is in two shares";
        ++frames[{id / 1000, (id % 1000) / static_cast<int>(kFrameRecords)}];
      }
      // Whole frames: every frame a rank touches it reads completely (held-out records aside).
      for (const auto& [frame, count] : frames) {
        const int shard = frame.first, first = frame.second * kFrameRecords;
        const int size = std::min<int>(kFrameRecords, std::vector<int>{10, 7, 2}[shard] - first);
        int expected = 0;
        for (int i = first; i < first + size; ++i) expected += !(shard == 0 && i < static_cast<int>(held_out));
        EXPECT_EQ(count, expected) << "shard " << shard << " frame " << frame.second;
      }
    }
    // Together the ranks read every training example once, each with the seed it has in a 1-process run.
    EXPECT_EQ(joint, alone) << world << " ranks";
  }
}

TEST(DataShare, AssignmentFollowsFromTheSeedAndRotatesWithTheEpoch) {
  auto shards = write_corpus({12});
  auto rank0 = [&](uint64_t seed) { return first_epoch(shards, 0, {0, 2, seed}); };
  EXPECT_EQ(rank0(7), rank0(7));
  std::set<std::set<int32_t>> shares;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    std::set<int32_t> ids;
    for (const auto& [id, s] : rank0(seed)) ids.insert(id);
    shares.insert(ids);
  }
  EXPECT_EQ(shares.size(), 2u) << "the seed decides which half of the frames rank 0 reads";
  // Epoch 1 hands rank 0 the frames rank 1 had in epoch 0.
  data::ExampleStream stream(shards, 0, {0, 2, 7});
  std::set<int32_t> epoch0, epoch1;
  while (true) {
    pb::PretrainingExample example = stream.next();
    if (stream.position().epoch() > 1) break;
    (stream.position().epoch() == 0 ? epoch0 : epoch1).insert(id_of(example));
  }
  EXPECT_EQ(epoch0.size() + epoch1.size(), 12u);
  for (int32_t id : epoch0) EXPECT_EQ(epoch1.count(id), 0u) << id;
}

TEST(DataShare, ARankResumesExactlyFromItsPosition) {
  auto shards = write_corpus({10, 8});
  data::ExampleStream stream(shards, 2, {1, 2, 5});
  for (int i = 0; i < 9; ++i) stream.next();
  const pb::DataPosition position = stream.position();
  std::vector<std::pair<int32_t, uint64_t>> expected;
  for (int i = 0; i < 12; ++i) {
    uint64_t seed = 0;
    int32_t id = id_of(stream.next(&seed));
    expected.emplace_back(id, seed);
  }
  data::ExampleStream resumed(shards, 2, {1, 2, 5});
  resumed.seek(position);
  for (const auto& [id, seed] : expected) {
    uint64_t got_seed = 0;
    EXPECT_EQ(id_of(resumed.next(&got_seed)), id);
    EXPECT_EQ(got_seed, seed);
  }
}

TEST(DataShare, TooFewFramesForTheRanksIsAClearError) {
  auto shards = write_corpus({3});  // one frame
  data::ExampleStream stream(shards, 0, {1, 2, 0});
  std::string message = testing::data_error_message([&] {
    for (int i = 0; i < 100; ++i) stream.next();
  });
  std::string expected = "got no training examples: the corpus has too few frames for 2 ranks";
  EXPECT_NE(message.find(expected), std::string::npos) << message;
  EXPECT_NE(message.find("--frame-records"), std::string::npos) << message;
}

}  // namespace
}  // namespace cabert
