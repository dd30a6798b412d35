#include "lib/plot/ticks.h"

#include <gtest/gtest.h>

#include <cmath>

namespace cabert::plot {
namespace {

TEST(PlotTicks, NiceStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_step(0.7), 1);
  EXPECT_DOUBLE_EQ(nice_step(1), 1);
  EXPECT_DOUBLE_EQ(nice_step(1.3), 2);
  EXPECT_DOUBLE_EQ(nice_step(3), 5);
  EXPECT_DOUBLE_EQ(nice_step(7), 10);
  EXPECT_DOUBLE_EQ(nice_step(2200), 5000);
  EXPECT_DOUBLE_EQ(nice_step(0.0031), 0.005);
  EXPECT_DOUBLE_EQ(next_nice_step(1), 2);
  EXPECT_DOUBLE_EQ(next_nice_step(2), 5);
  EXPECT_DOUBLE_EQ(next_nice_step(5), 10);
}

TEST(PlotTicks, AxisRangesArePaddedAndRounded) {
  AxisScale scale = axis_scale(0, 9, false);
  EXPECT_DOUBLE_EQ(scale.lo, -0.5);
  EXPECT_DOUBLE_EQ(scale.hi, 9.5);
  scale = axis_scale(0, 1, false);
  EXPECT_DOUBLE_EQ(scale.lo, -0.1);
  EXPECT_DOUBLE_EQ(scale.hi, 1.1);
  EXPECT_DOUBLE_EQ(scale.fraction(0.5), 0.5);
  scale = axis_scale(4, 4, false);  // a single value
  EXPECT_LT(scale.lo, 4);
  EXPECT_GT(scale.hi, 4);
  scale = axis_scale(INFINITY, -INFINITY, false);  // no data
  EXPECT_EQ(scale.lo, 0);
  EXPECT_EQ(scale.hi, 1);
  scale = axis_scale(1, 1000, true);
  EXPECT_LT(scale.lo, 1);
  EXPECT_GT(scale.hi, 1000);
  EXPECT_NEAR(scale.fraction(10) - scale.fraction(1), scale.fraction(1000) - scale.fraction(100), 1e-12);
  EXPECT_TRUE(std::isnan(scale.fraction(0)));
}

TEST(PlotTicks, TicksSitOnMultiplesOfTheStep) {
  EXPECT_EQ(linear_ticks(-0.5, 9.5, 2), (std::vector<double>{0, 2, 4, 6, 8}));
  EXPECT_EQ(linear_ticks(-1, 1, 0.5), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  EXPECT_EQ(log_ticks(0.5, 2000, 0, 1), (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(log_ticks(0.5, 2000, 0, 2), (std::vector<double>{1, 100}));
  EXPECT_EQ(log_ticks(1.5, 12, 1, 1), (std::vector<double>{2, 5, 10}));
}

TEST(PlotTicks, LabelsHaveTheDecimalsTheStepNeeds) {
  EXPECT_EQ(format_tick(0, 0.5), "0.0");
  EXPECT_EQ(format_tick(1, 0.5), "1.0");
  EXPECT_EQ(format_tick(-8, 1), "-8");
  EXPECT_EQ(format_tick(-1e-17, 0.1), "0.0");  // no "-0.0"
  EXPECT_EQ(format_tick(15000, 5000), "15000");
  EXPECT_EQ(format_tick(2e6, 1e6), "2e6");
  EXPECT_EQ(format_tick(1.5e6, 5e5), "1.5e6");
  EXPECT_EQ(format_tick(3e-5, 1e-5), "3e-5");
  EXPECT_EQ(format_number(0.49965), "0.5");
  EXPECT_EQ(format_number(-1.05), "-1.05");
  EXPECT_EQ(format_number(1e-5), "1e-5");
  EXPECT_EQ(format_number(100000), "1e5");
  EXPECT_EQ(format_number(1000), "1000");
  EXPECT_EQ(format_number(0.0001), "0.0001");
  EXPECT_EQ(format_number(123456), "1.23e5");
  EXPECT_EQ(format_number(-0.000049), "-4.9e-5");
}

}  // namespace
}  // namespace cabert::plot
