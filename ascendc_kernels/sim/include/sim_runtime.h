// The simulator's runtime: the SoC description, one context per running block (which
// kernel, which block, which call), the registry of global memory a launch may touch,
// counters, and the launcher that runs every block in its own thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../common/platform.h"
#include "sim_pipes.h"

namespace sim {

// Hardware facts: the one description in common/platform.h, shared with the tilings.
using SocSpec = ascend_ops_kernels::PlatformFacts;

const SocSpec& Soc910B();

// A violated rule: the message names the kernel, the block and the call.
class SimError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BlockCounters {
  uint64_t gm_read_bytes = 0;
  uint64_t gm_write_bytes = 0;
  uint64_t ub_high_water = 0;
  uint64_t vector_instructions = 0;  // API calls on the vector pipe
  uint64_t vector_repeats = 0;       // 256-byte repeats they issue
};

struct LaunchCounters {
  std::string kernel;
  uint32_t block_dim = 0;
  uint64_t gm_read_bytes = 0;
  uint64_t gm_write_bytes = 0;
  uint64_t ub_high_water = 0;  // the largest over blocks
  uint64_t vector_instructions = 0;
  uint64_t vector_repeats = 0;
  uint64_t max_block_vector_repeats = 0;  // the critical path of the vector work
  uint64_t cube_flops = 0;                // host-composed GEMMs add these
};

// Global memory a launch may touch: every kernel argument is registered with its size.
struct GmRegion {
  const uint8_t* begin;
  uint64_t bytes;
  std::string name;
};

struct Launch;

// The state of the block running on this thread.
struct BlockContext {
  Launch* launch = nullptr;
  uint32_t block_idx = 0;
  const char* call = "kernel body";
  std::vector<uint8_t> ub;  // this core's Unified Buffer
  uint64_t ub_used = 0;     // bytes handed out by TPipe::InitBuffer
  BlockCounters counters;
  std::string deferred_error;  // found in a destructor, raised when the kernel returns
  PipeState pipes;            // flags, event IDs, per-pipe progress, UB shadow (sim_pipes.h)
  int32_t kernel_type = -1;   // KERNEL_TASK_TYPE_DEFAULT, -1 when the kernel declares none
  void* tpipe = nullptr;      // the block's TPipe (GetTPipePtr), null before one is built
};

BlockContext& Ctx();
bool InKernel();

// Sets the API call named in messages for the duration of one call.
class CallScope {
 public:
  explicit CallScope(const char* call);
  ~CallScope();
 private:
  const char* previous_;
};

// GM traffic is charged per 32-byte sector a burst touches: a DMA of 4 bytes moves (at
// least) one sector, so strided small copies cost what they would on the device.
inline uint64_t GmSectorBytes(const void* p, uint64_t bytes) {
  if (bytes == 0) return 0;
  const uint64_t begin = reinterpret_cast<uint64_t>(p), end = begin + bytes;
  return ((end + 31) / 32 - begin / 32) * 32;
}

[[noreturn]] void Fail(const std::string& what);
std::string Where();  // "kernel 'k' block i/n, call X"
void Defer(const std::string& what);

// Bounds check of [p, p + bytes) against the launch's registered regions; returns the
// region's end so a GlobalTensor can remember its limit.
const uint8_t* CheckGm(const void* p, uint64_t bytes, const char* what);

struct Launch {
  std::string kernel;
  uint32_t block_dim;
  uint64_t tiling_key;
  const SocSpec* soc;  // the platform the launch runs on (the tiling's, core count included)
  std::vector<GmRegion> regions;
  // SyncAll: a generation barrier that a failing block can break.
  std::mutex mutex;
  std::condition_variable cv;
  uint32_t arrived = 0;
  uint32_t finished = 0;  // blocks that returned: a SyncAll they never reach would hang
  uint64_t generation = 0;
  bool aborted = false;
  std::string first_error;
};

// Runs `body` once per block, each in its own thread, like CANN's CPU debug mode.
// Throws SimError (the first violation) after all blocks have stopped.
LaunchCounters RunBlocks(const std::string& kernel, uint32_t block_dim, uint64_t tiling_key,
                         const std::vector<GmRegion>& regions,
                         const std::function<void()>& body, const SocSpec& soc = Soc910B());

// The barrier behind SyncAll; raises if a block returned without reaching it.
void SyncAllBlocks();
uint64_t CurrentTilingKey();

// Counters of the launches since the last ResetCounters (per thread of the host caller).
std::vector<LaunchCounters>& RecordedLaunches();

}  // namespace sim
