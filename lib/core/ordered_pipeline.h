// A bounded, ordered producer/consumer pipeline for the text commands (tokenize encode, build-corpus): one
// reader thread cuts the input into chunks in order, N workers process chunks in any order, and the calling
// thread consumes them in input order. What the consumer sees, and so the output, does not depend on the number
// of workers; memory is bounded by `max_in_flight` chunks read but not yet consumed.
//
// Errors keep their sequential meaning: an exception from read() or work() is rethrown on the calling thread
// when the consumer reaches that chunk, after every earlier chunk was consumed, so the first error in input
// order is the one reported whatever the thread count. An exception from consume() stops the threads (the
// reader finishes the read it is in) and propagates.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/core/log.h"

namespace cabert {

// Seconds spent in each stage (work: summed over the workers), to tell which one bounds a run.
struct PipelineTimes {
  double read = 0, work = 0, consume = 0, wall = 0;
};

// At --log-level debug, one line: the serial stages (read, consume) bound the speed-up more workers can give.
inline void log_stage_times(const std::string& label, int workers, const PipelineTimes& times) {
  log_debug(label, ": ", workers, " worker(s), ", times.wall, " s: read ", times.read, " s (one thread), work ",
            times.work, " s (all workers), in-order consume ", times.consume, " s (one thread)");
}

// workers <= 1: read, work and consume run one after the other on the calling thread (no threads at all).
// max_in_flight 0: four chunks per worker.
template <class Chunk, class Read, class Work, class Consume>
PipelineTimes run_ordered_pipeline(int workers, size_t max_in_flight, Read read, Work work, Consume consume);

namespace pipeline_detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <class Chunk>
class OrderedPipeline {
 public:
  OrderedPipeline(int workers, size_t max_in_flight) : workers_(workers), max_in_flight_(max_in_flight) {}
  ~OrderedPipeline() { stop_and_join(); }

  template <class Read, class Work, class Consume>
  PipelineTimes run(Read& read, Work& work, Consume& consume) {
    const Clock::time_point start = Clock::now();
    threads_.emplace_back([&] { read_all(read); });
    for (int i = 0; i < workers_; ++i) threads_.emplace_back([&] { work_all(work); });
    while (std::unique_ptr<Slot> slot = next_in_order()) {
      if (slot->error) std::rethrow_exception(slot->error);
      const Clock::time_point begin = Clock::now();
      consume(slot->chunk);
      times_.consume += seconds_since(begin);
    }
    stop_and_join();
    times_.wall = seconds_since(start);
    return times_;
  }

 private:
  struct Slot {
    Chunk chunk;
    bool ready = false;  // worked on (or failed): the consumer may take it
    std::exception_ptr error;
  };

  template <class Read>
  void read_all(Read& read) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stop_ || read_count_ - consumed_ < max_in_flight_; });
      if (stop_) return;
      lock.unlock();
      auto slot = std::make_unique<Slot>();
      bool more = true;
      const Clock::time_point begin = Clock::now();
      try {
        more = read(&slot->chunk);
      } catch (...) {
        slot->error = std::current_exception();
        slot->ready = true;
      }
      const double took = seconds_since(begin);
      lock.lock();
      times_.read += took;
      if (!more) break;
      Slot* raw = slot.get();
      slots_.emplace(read_count_++, std::move(slot));
      if (raw->error) break;  // the end of what can be read: the consumer rethrows when it gets there
      todo_.push_back(raw);
      changed_.notify_all();
    }
    read_done_ = true;
    changed_.notify_all();
  }

  template <class Work>
  void work_all(Work& work) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stop_ || !todo_.empty() || read_done_; });
      if (stop_ || todo_.empty()) return;
      Slot* slot = todo_.front();
      todo_.pop_front();
      lock.unlock();
      const Clock::time_point begin = Clock::now();
      try {
        work(&slot->chunk);
      } catch (...) {
        slot->error = std::current_exception();
      }
      const double took = seconds_since(begin);
      lock.lock();
      times_.work += took;
      slot->ready = true;
      changed_.notify_all();
    }
  }

  // The next chunk in input order once it is ready; null at the end.
  std::unique_ptr<Slot> next_in_order() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] {
      auto found = slots_.find(consumed_);
      return (found != slots_.end() && found->second->ready) || (read_done_ && consumed_ == read_count_);
    });
    auto found = slots_.find(consumed_);
    if (found == slots_.end()) return nullptr;
    std::unique_ptr<Slot> slot = std::move(found->second);
    slots_.erase(found);
    ++consumed_;
    changed_.notify_all();  // room for the reader
    return slot;
  }

  void stop_and_join() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (auto& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    threads_.clear();
  }

  const int workers_;
  const size_t max_in_flight_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, std::unique_ptr<Slot>> slots_;  // read, not yet consumed, by sequence number
  std::deque<Slot*> todo_;                           // read, not yet worked on, in input order
  uint64_t read_count_ = 0, consumed_ = 0;
  bool read_done_ = false, stop_ = false;
  PipelineTimes times_;               // read and work under the mutex; consume and wall by the calling thread
  std::vector<std::thread> threads_;  // last: joined before the state above goes
};

}  // namespace pipeline_detail

template <class Chunk, class Read, class Work, class Consume>
PipelineTimes run_ordered_pipeline(int workers, size_t max_in_flight, Read read, Work work, Consume consume) {
  using pipeline_detail::Clock;
  using pipeline_detail::seconds_since;
  if (workers <= 1) {
    PipelineTimes times;
    const Clock::time_point start = Clock::now();
    for (;;) {
      Chunk chunk;
      Clock::time_point begin = Clock::now();
      const bool more = read(&chunk);
      times.read += seconds_since(begin);
      if (!more) break;
      begin = Clock::now();
      work(&chunk);
      times.work += seconds_since(begin);
      begin = Clock::now();
      consume(chunk);
      times.consume += seconds_since(begin);
    }
    times.wall = seconds_since(start);
    return times;
  }
  if (max_in_flight == 0) max_in_flight = 4 * static_cast<size_t>(workers);
  pipeline_detail::OrderedPipeline<Chunk> pipeline(workers, max_in_flight);
  return pipeline.run(read, work, consume);
}

}  // namespace cabert
