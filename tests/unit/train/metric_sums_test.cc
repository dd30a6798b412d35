// A step's metric sums: host values and device tensors added over micro-batches, read in one copy; the same
// totals a plain double sum gives (ELECTRA's and span corruption's sums moved from .item() per micro-batch).
#include <gtest/gtest.h>

#include "lib/core/errors.h"
#include "lib/train/metric_sums.h"

namespace cabert::train {
namespace {

TEST(MetricSums, HostAndTensorValuesAddUpByName) {
  MetricSums sums;
  sums.add("count", 3.0);
  sums.add("count", 4.5);
  sums.add("correct", torch::tensor({true, false, true}).sum());  // an int64 count
  sums.add("loss", torch::tensor(0.1f));                          // a float mean, kept in double
  MetricSums later;
  later.add("correct", torch::tensor(2));
  later.add("loss", torch::tensor({0.2f}));
  later.add("tokens", 10.0);
  sums.add(later);
  const std::map<std::string, double> read = sums.read();
  ASSERT_EQ(read.size(), 4u);
  EXPECT_EQ(read.at("count"), 7.5);
  EXPECT_EQ(read.at("correct"), 4.0);
  EXPECT_EQ(read.at("loss"), static_cast<double>(0.1f) + static_cast<double>(0.2f));
  EXPECT_EQ(read.at("tokens"), 10.0);
  EXPECT_EQ(sums.read(), read);  // reading leaves the sums as they were
}

TEST(MetricSums, NothingAddedReadsEmpty) { EXPECT_TRUE(MetricSums().read().empty()); }

TEST(MetricSums, ATensorOfSeveralValuesIsRefused) {
  MetricSums sums;
  try {
    sums.add("loss", torch::ones({2}));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "internal: metric sum 'loss' has 2 elements");
  }
}

}  // namespace
}  // namespace cabert::train
