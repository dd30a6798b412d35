#include "lib/core/ordered_pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cabert {
namespace {

struct Numbers {
  int first = 0;
  std::vector<int> values;
};

// Reads chunks of `chunk` consecutive numbers up to `count`, squares them in the workers (the odd chunks slower,
// so that they finish out of order) and collects what the consumer sees.
std::vector<int> squares(int workers, int count, int chunk, size_t in_flight = 0) {
  int next = 0;
  std::vector<int> seen;
  run_ordered_pipeline<Numbers>(
      workers, in_flight,
      [&](Numbers* numbers) {
        numbers->first = next;
        for (; next < count && static_cast<int>(numbers->values.size()) < chunk; ++next)
          numbers->values.push_back(next);
        return !numbers->values.empty();
      },
      [](Numbers* numbers) {
        if ((numbers->first / 3) % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
        for (int& value : numbers->values) value *= value;
      },
      [&](Numbers& numbers) { seen.insert(seen.end(), numbers.values.begin(), numbers.values.end()); });
  return seen;
}

TEST(OrderedPipeline, ConsumesInInputOrderForAnyWorkerCount) {
  std::vector<int> expected;
  for (int i = 0; i < 1000; ++i) expected.push_back(i * i);
  for (int workers : {1, 2, 3, 8}) {
    EXPECT_EQ(squares(workers, 1000, 3), expected) << workers << " workers";
    EXPECT_EQ(squares(workers, 1000, 1, 2), expected) << workers << " workers, 2 chunks in flight";
  }
  EXPECT_TRUE(squares(3, 0, 5).empty());
}

TEST(OrderedPipeline, HoldsAtMostMaxInFlightChunks) {
  std::atomic<int> in_flight{0}, most{0};
  int next = 0;
  run_ordered_pipeline<Numbers>(
      4, 5,
      [&](Numbers* numbers) {
        if (next == 200) return false;
        numbers->first = next++;
        int now = ++in_flight;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        return true;
      },
      [](Numbers*) {},
      [&](Numbers&) {
        --in_flight;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
  // The reader may start one more read between the consumer taking a chunk and consume() running.
  EXPECT_LE(most.load(), 6);
  EXPECT_GE(most.load(), 2);
}

// The first failure in input order is reported, after every earlier chunk was consumed, whichever stage failed.
std::string first_failure(int workers, int read_fails_at, int work_fails_at, int* consumed) {
  int next = 0;
  *consumed = 0;
  try {
    run_ordered_pipeline<Numbers>(
        workers, 0,
        [&](Numbers* numbers) {
          if (next == read_fails_at) throw std::runtime_error("read " + std::to_string(next));
          numbers->first = next++;
          return next <= 100;
        },
        [&](Numbers* numbers) {
          if (numbers->first == work_fails_at) throw std::runtime_error("work " + std::to_string(numbers->first));
        },
        [&](Numbers& numbers) {
          EXPECT_EQ(numbers.first, *consumed);
          ++*consumed;
        });
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "none";
}

TEST(OrderedPipeline, ReportsTheFirstErrorInInputOrder) {
  for (int workers : {1, 2, 3}) {
    int consumed = 0;
    EXPECT_EQ(first_failure(workers, 40, 70, &consumed), "read 40");
    EXPECT_EQ(consumed, 40);
    EXPECT_EQ(first_failure(workers, 70, 40, &consumed), "work 40");
    EXPECT_EQ(consumed, 40);
    EXPECT_EQ(first_failure(workers, -1, -1, &consumed), "none");
    EXPECT_EQ(consumed, 100);
  }
}

TEST(OrderedPipeline, AConsumerErrorStopsTheThreads) {
  int next = 0;
  EXPECT_THROW(run_ordered_pipeline<Numbers>(
                   3, 0,
                   [&](Numbers* numbers) {
                     numbers->first = next++;
                     return true;  // endless: only the consumer's error ends it
                   },
                   [](Numbers*) {},
                   [](Numbers& numbers) {
                     if (numbers.first == 10) throw std::runtime_error("full");
                   }),
               std::runtime_error);
}

}  // namespace
}  // namespace cabert
