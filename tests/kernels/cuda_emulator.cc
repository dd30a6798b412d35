// The fiber scheduler of cuda_emulator.h: one ucontext per thread of a block on the calling thread's stack of
// control, annotated for AddressSanitizer (its fiber-switch interface) so that the sanitizer builds run it too.
#include "tests/kernels/cuda_emulator.h"

#include <ucontext.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/sanitizer/address_sanitizer.h"
#ifdef CABERT_ADDRESS_SANITIZER
#include <sanitizer/common_interface_defs.h>
#endif

namespace cabert::testing::cuda_emulator {
namespace {

// Enough for the kernels' frames with the sanitizers' red zones; committed only where touched.
constexpr size_t kStackBytes = size_t{256} << 10;
constexpr int kWarpSize = 32;

enum class State { kRunnable, kAtBarrier, kInShuffle, kDone, kFailed };

struct Site {
  const char* file = nullptr;
  int line = 0;
  bool operator==(const Site& other) const {
    return line == other.line && (file == other.file || std::strcmp(file, other.file) == 0);
  }
  std::string str() const { return std::string(file) + ":" + std::to_string(line); }
};

struct Fiber {
  ucontext_t context;
  char* stack = nullptr;  // kStackBytes from fiber_stacks()
  Dim3 index;
  State state = State::kRunnable;
  Site site;               // the barrier or shuffle it waits at
  uint64_t published = 0;  // its value in a shuffle
  int source_lane = 0;
  uint64_t received = 0;
  std::string error;
};

struct Grid {
  Dim3 grid, block, block_index;
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  Fiber* current = nullptr;
  ucontext_t scheduler;
  const void* scheduler_stack_bottom = nullptr;  // for AddressSanitizer
  size_t scheduler_stack_size = 0;
};

thread_local Grid* active = nullptr;

// The first `count` fiber stacks of this thread, kept from launch to launch (a test makes hundreds of launches of
// 256 threads; launches do not nest, so no two grids share one).
const std::vector<std::unique_ptr<char[]>>& fiber_stacks(size_t count) {
  static thread_local std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() < count) stacks.emplace_back(new char[kStackBytes]);
  return stacks;
}

void start_switch([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                  [[maybe_unused]] size_t size) {
#ifdef CABERT_ADDRESS_SANITIZER
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}

void finish_switch([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** bottom_from,
                   [[maybe_unused]] size_t* size_from) {
#ifdef CABERT_ADDRESS_SANITIZER
  __sanitizer_finish_switch_fiber(fake_stack, bottom_from, size_from);
#endif
}

Grid& grid_or_die() {
  if (active == nullptr || active->current == nullptr) {
    throw std::logic_error("cuda_emulator: a CUDA built-in was used outside cuda_emulator::launch");
  }
  return *active;
}

// From a fiber back to the scheduler, until the scheduler resumes it.
void yield_to_scheduler(Grid& g, Fiber& f) {
  void* fake_stack = nullptr;
  start_switch(&fake_stack, g.scheduler_stack_bottom, g.scheduler_stack_size);
  swapcontext(&f.context, &g.scheduler);
  finish_switch(fake_stack, &g.scheduler_stack_bottom, &g.scheduler_stack_size);
}

void fiber_main() {
  Grid& g = *active;
  Fiber& f = *g.current;
  finish_switch(nullptr, &g.scheduler_stack_bottom, &g.scheduler_stack_size);
  try {
    (*g.body)();
    f.state = State::kDone;
  } catch (const std::exception& e) {
    f.error = e.what();
    f.state = State::kFailed;
  }
  start_switch(nullptr, g.scheduler_stack_bottom, g.scheduler_stack_size);  // this fiber's stack is done
  setcontext(&g.scheduler);
}

void resume(Grid& g, Fiber& f) {
  g.current = &f;
  void* fake_stack = nullptr;
  start_switch(&fake_stack, f.stack, kStackBytes);
  swapcontext(&g.scheduler, &f.context);
  finish_switch(fake_stack, nullptr, nullptr);
  g.current = nullptr;
}

std::string thread_list(const std::vector<size_t>& threads) {
  std::ostringstream out;
  for (size_t i = 0; i < threads.size() && i < 8; ++i) out << (i ? ", " : "") << threads[i];
  if (threads.size() > 8) out << ", ... (" << threads.size() << " threads)";
  return out.str();
}

[[noreturn]] void fail(const Grid& g, const std::string& what) {
  throw std::runtime_error("cuda_emulator: block " + std::to_string(g.block_index.x) + " of " +
                           std::to_string(g.grid.x) + ": " + what);
}

// Releases the warps whose 32 lanes all wait in the same shuffle; true if any did.
bool release_shuffles(Grid& g) {
  bool released = false;
  for (size_t first = 0; first < g.fibers.size(); first += kWarpSize) {
    if (g.fibers[first].state != State::kInShuffle) continue;
    if (first + kWarpSize > g.fibers.size())
      fail(g, "a warp shuffle in a partial warp at " + g.fibers[first].site.str());
    bool all = true;
    for (size_t lane = 0; lane < kWarpSize; ++lane) {
      const Fiber& f = g.fibers[first + lane];
      if (f.state != State::kInShuffle) all = false;
      if (f.state == State::kInShuffle && !(f.site == g.fibers[first].site)) {
        fail(g, "the lanes of warp " + std::to_string(first / kWarpSize) + " shuffle at different calls, " +
                    g.fibers[first].site.str() + " and " + f.site.str());
      }
    }
    if (!all) continue;
    for (size_t lane = 0; lane < kWarpSize; ++lane) {
      Fiber& f = g.fibers[first + lane];
      f.received = g.fibers[first + static_cast<size_t>(f.source_lane)].published;
      f.state = State::kRunnable;
    }
    released = true;
  }
  return released;
}

// Every fiber has run until it blocked: releases a barrier that all reached, or says why the block is stuck.
// Returns false when every thread has ended.
bool release_barrier(Grid& g) {
  std::vector<size_t> waiting, done, shuffling;
  for (size_t i = 0; i < g.fibers.size(); ++i) {
    const State s = g.fibers[i].state;
    if (s == State::kAtBarrier) waiting.push_back(i);
    if (s == State::kDone) done.push_back(i);
    if (s == State::kInShuffle) shuffling.push_back(i);
  }
  if (done.size() == g.fibers.size()) return false;
  if (waiting.size() == g.fibers.size()) {
    const Site site = g.fibers[0].site;
    for (Fiber& f : g.fibers) {
      if (!(f.site == site)) fail(g, "threads wait at different barriers, " + site.str() + " and " + f.site.str());
      f.state = State::kRunnable;
    }
    return true;
  }
  std::string what = "deadlock:";
  if (!waiting.empty()) {
    what += " threads " + thread_list(waiting) + " wait at __syncthreads() at " + g.fibers[waiting[0]].site.str() + ";";
  }
  if (!shuffling.empty()) {
    what += " threads " + thread_list(shuffling) + " wait in a warp shuffle at " + g.fibers[shuffling[0]].site.str() +
            " without all their warp's lanes;";
  }
  if (!done.empty()) what += " threads " + thread_list(done) + " have ended;";
  fail(g, what);
}

// A fiber that starts in fiber_main on its own stack (getcontext returns once here: the context it saves is
// replaced by makecontext's before anything resumes it).
void start_fiber(Fiber& f, unsigned index) {
  f.index = Dim3{index, 0, 0};
  f.state = State::kRunnable;
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack;
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = nullptr;
  makecontext(&f.context, fiber_main, 0);
}

void run_block(Grid& g) {
  for (size_t i = 0; i < g.fibers.size(); ++i) start_fiber(g.fibers[i], static_cast<unsigned>(i));
  bool forward = true;
  do {
    do {
      for (size_t n = 0; n < g.fibers.size(); ++n) {
        Fiber& f = g.fibers[forward ? n : g.fibers.size() - 1 - n];
        if (f.state != State::kRunnable) continue;
        resume(g, f);
        if (f.state == State::kFailed) fail(g, "thread " + std::to_string(f.index.x) + ": " + f.error);
      }
      forward = !forward;
    } while (release_shuffles(g));
  } while (release_barrier(g));
}

}  // namespace

const Dim3& thread_index() { return grid_or_die().current->index; }
const Dim3& block_index() { return grid_or_die().block_index; }
const Dim3& block_dim() { return grid_or_die().block; }
const Dim3& grid_dim() { return grid_or_die().grid; }

void sync_threads(const char* file, int line) {
  Grid& g = grid_or_die();
  Fiber& f = *g.current;
  f.site = Site{file, line};
  f.state = State::kAtBarrier;
  yield_to_scheduler(g, f);
}

uint64_t exchange_in_warp(uint64_t bits, int source_lane, unsigned mask, int width, const char* file, int line) {
  Grid& g = grid_or_die();
  Fiber& f = *g.current;
  if (mask != 0xffffffffu || width != kWarpSize || source_lane < 0 || source_lane >= kWarpSize) {
    throw std::invalid_argument("warp shuffle at " + Site{file, line}.str() +
                                ": the emulator takes the full mask, width 32 and a source lane in [0, 32)");
  }
  f.site = Site{file, line};
  f.published = bits;
  f.source_lane = source_lane;
  f.state = State::kInShuffle;
  yield_to_scheduler(g, f);
  return f.received;
}

void run_grid(Dim3 grid, Dim3 block, const std::function<void()>& thread_body) {
  if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1) {
    throw std::invalid_argument("cuda_emulator: one-dimensional grids and blocks only");
  }
  if (block.x == 0 || block.x > 1024) {
    throw std::invalid_argument("cuda_emulator: " + std::to_string(block.x) + " threads per block (1 to 1024)");
  }
  if (active != nullptr) throw std::logic_error("cuda_emulator: a launch inside a launch");
  Grid g;
  g.grid = grid;
  g.block = block;
  g.body = &thread_body;
  g.fibers.resize(block.x);
  struct Active {
    explicit Active(Grid* g) { active = g; }
    ~Active() { active = nullptr; }
  } scope(&g);
  const auto& stacks = fiber_stacks(g.fibers.size());
  for (size_t i = 0; i < g.fibers.size(); ++i) g.fibers[i].stack = stacks[i].get();
  for (unsigned b = 0; b < grid.x; ++b) {
    g.block_index = Dim3{b, 0, 0};
    run_block(g);
  }
}

}  // namespace cabert::testing::cuda_emulator
