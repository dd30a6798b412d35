// c10d through lib/dist/communicator.h, two ranks as two threads of this process over 127.0.0.1: sums,
// maxima, byte gathering and broadcast, the bucketed gradient all-reduce of c10d::Reducer against gradients
// averaged by hand, and a peer that never answers turning into a clear error within the timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "lib/core/errors.h"
#include "lib/dist/communicator.h"
#include "lib/dist/local_launcher.h"

namespace cabert::dist {
namespace {

// Runs body(communicator) on 2 ranks (threads) of one job; failures inside are reported by rank.
void run_two_ranks(const std::function<void(Communicator&)>& body, int timeout_seconds = 20) {
  const int port = free_local_port();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Environment env;
        env.rank = rank;
        env.world_size = 2;
        env.local_world_size = 2;
        env.master_port = port;
        Communicator communicator(env, torch::kCPU, std::chrono::seconds(timeout_seconds));
        body(communicator);
      } catch (const std::exception& error) {
        errors[rank] = error.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(Communicator, AloneEveryCollectiveIsTheIdentity) {
  Communicator alone;
  EXPECT_FALSE(alone.distributed());
  std::vector<double> values{1.5, 2};
  alone.all_reduce_sum(values, "values");
  EXPECT_EQ(values, (std::vector<double>{1.5, 2}));
  EXPECT_EQ(alone.gather_to_main("x", "k"), (std::vector<std::string>{"x"}));
  EXPECT_EQ(alone.broadcast_bytes("y", "k"), "y");
}

TEST(Communicator, SumsMaximaGatherAndBroadcast) {
  run_two_ranks([](Communicator& c) {
    std::vector<double> sums{c.rank() + 1.0, 10.0, -0.25 * c.rank()};
    c.all_reduce_sum(sums, "test values");
    EXPECT_EQ(sums, (std::vector<double>{3.0, 20.0, -0.25}));
    std::vector<double> maxima{c.rank() == 0 ? 5.0 : -1.0, static_cast<double>(c.rank())};
    c.all_reduce_max(maxima, "test maxima");
    EXPECT_EQ(maxima, (std::vector<double>{5.0, 1.0}));
    std::vector<std::string> gathered = c.gather_to_main(std::string("state of ") + std::to_string(c.rank()), "g/1");
    if (c.is_main()) {
      EXPECT_EQ(gathered, (std::vector<std::string>{"state of 0", "state of 1"}));
    } else {
      EXPECT_TRUE(gathered.empty());
    }
    EXPECT_EQ(c.broadcast_bytes(c.is_main() ? "checkpoint-3" : "ignored", "b/1"), "checkpoint-3");
    std::vector<torch::Tensor> tensors{torch::full({3}, c.rank() + 7.0), torch::full({2, 2}, c.rank() * 1.0)};
    c.broadcast(tensors, "test tensors");
    EXPECT_TRUE(torch::equal(tensors[0], torch::full({3}, 7.0)));
    EXPECT_TRUE(torch::equal(tensors[1], torch::zeros({2, 2})));
    c.barrier("the end of the test");
  });
}

TEST(Communicator, GradientSyncAveragesTheRanksGradients) {
  // The gradients each rank would compute alone, averaged by hand.
  auto input_of = [](int rank) { return torch::arange(12, torch::kFloat).reshape({4, 3}) * (rank + 1) - 2.0; };
  // The two ranks are threads of one process: they share torch's generator, so models are made one at a time.
  std::mutex generator;
  auto make_model = [&] {
    std::lock_guard<std::mutex> lock(generator);
    torch::manual_seed(3);
    return torch::nn::Sequential(torch::nn::Linear(3, 5), torch::nn::Tanh(), torch::nn::Linear(5, 2));
  };
  std::vector<std::vector<torch::Tensor>> local(2);
  for (int rank = 0; rank < 2; ++rank) {
    auto model = make_model();
    model->forward(input_of(rank)).pow(2).sum().backward();
    for (auto& p : model->parameters()) local[rank].push_back(p.grad().clone());
  }
  run_two_ranks([&](Communicator& c) {
    auto model = make_model();
    std::vector<torch::Tensor> parameters = model->parameters();
    auto sync = c.gradient_sync(parameters);
    for (int accumulated = 0; accumulated < 2; ++accumulated) {
      // Twice, to check that the Reducer is ready again for the next update.
      model->zero_grad();
      torch::Tensor loss = model->forward(input_of(c.rank())).pow(2).sum();
      sync->prepare(loss);
      loss.backward();
      for (size_t i = 0; i < parameters.size(); ++i) {
        torch::Tensor expected = (local[0][i] + local[1][i]) / 2;
        EXPECT_TRUE(torch::allclose(parameters[i].grad(), expected, 1e-5, 1e-6)) << "parameter " << i;
      }
    }
  });
}

TEST(Communicator, APeerThatNeverAnswersIsAClearErrorWithinTheTimeout) {
  const int port = free_local_port();
  std::string message;
  double waited = 0;
  std::thread silent([&] {
    Environment env;
    env.rank = 1;
    env.world_size = 2;
    env.master_port = port;
    Communicator communicator(env, torch::kCPU, std::chrono::seconds(2));
    std::this_thread::sleep_for(std::chrono::seconds(4));  // joins, then never takes part
  });
  {
    Environment env;
    env.world_size = 2;
    env.master_port = port;
    Communicator communicator(env, torch::kCPU, std::chrono::seconds(2));
    std::vector<double> values{1};
    const auto start = std::chrono::steady_clock::now();
    try {
      communicator.all_reduce_sum(values, "the test values");
    } catch (const Error& error) {
      message = error.what();
    }
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  silent.join();
  EXPECT_EQ(message.rfind("rank 0 of 2: all-reduce of the test values failed: a peer process died or did not answer "
                          "within 2 s (--dist-timeout); stopping. c10d said: ",
                          0),
            0u)
      << message;
  EXPECT_LT(waited, 10.0);
}

}  // namespace
}  // namespace cabert::dist
