// Bounded-memory shuffling for streams larger than RAM: a buffer of `capacity` items; once full, each new
// item evicts a uniformly chosen one. Inputs that fit in the buffer come out as a uniform permutation;
// larger inputs are shuffled locally (and spread over shards by the caller).
#pragma once

#include <functional>
#include <random>
#include <utility>
#include <vector>

namespace cabert::data {

template <typename Item>
class ShuffleBuffer {
 public:
  ShuffleBuffer(size_t capacity, std::mt19937_64* rng, std::function<void(Item&&)> emit)
      : capacity_(std::max<size_t>(capacity, 1)), rng_(rng), emit_(std::move(emit)) {}

  void push(Item&& item) {
    if (items_.size() < capacity_) {
      items_.push_back(std::move(item));
      return;
    }
    std::uniform_int_distribution<size_t> pick(0, items_.size() - 1);
    size_t index = pick(*rng_);
    Item out = std::move(items_[index]);
    items_[index] = std::move(item);
    emit_(std::move(out));
  }

  void flush() {
    std::shuffle(items_.begin(), items_.end(), *rng_);
    for (auto& item : items_) emit_(std::move(item));
    items_.clear();
  }

 private:
  size_t capacity_;
  std::mt19937_64* rng_;
  std::function<void(Item&&)> emit_;
  std::vector<Item> items_;
};

}  // namespace cabert::data
