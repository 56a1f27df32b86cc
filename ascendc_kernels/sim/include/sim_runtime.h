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
#include "sim_race.h"
namespace sim {

// Hardware facts: the one description in common/platform.h, shared with the tilings.
using SocSpec = ascend_ops_kernels::PlatformFacts;

const SocSpec& Soc910B();

// A violated rule: the message names the kernel, the block and the call.
class SimError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Which kind of core a simulated block runs on: a vector core (AIV) or, in a MIX launch,
// a cube core (AIC). A MIX 1:2 launch of blockDim B runs B AIC and 2B AIV cores; AI core
// g (a "group") holds AIC g and AIV 2g, 2g+1.
enum class CoreKind : uint8_t { Aiv, Aic };
enum class LaunchKind : uint8_t { Vector, MixAic1To2 };

struct BlockCounters {
  uint64_t cube_flops = 0;  // Matmul multiply-adds x 2 on this core
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
  uint64_t cube_flops = 0;                // Matmul API calls on the cube cores
  uint64_t max_core_cube_flops = 0;       // the busiest cube core
  uint32_t cube_cores = 0;                // AIC cores of a MIX launch (0: a vector launch)
  // The L2 model: bytes of each region's 32-byte sectors touched at least once, by role.
  // A footprint that fits in L2 is read from (or written to) HBM once; every other access
  // is an L2 hit. gm_read_bytes/gm_write_bytes above count every access (L2 traffic).
  uint64_t touched_data_bytes = 0;        // inputs and outputs (role Data)
  uint64_t touched_workspace_bytes = 0;   // the user workspace (role Workspace)
};

// Global memory a launch may touch: every kernel argument is registered with its size.
enum class GmRole : uint8_t { Data, Workspace, SystemWorkspace };
struct GmRegion {
  const uint8_t* begin;
  uint64_t bytes;
  std::string name;
  GmRole role = GmRole::Data;  // SystemWorkspace: reserved for the library (Matmul), not kernel code
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
  PipeState pipes;             // flags, event IDs, per-pipe progress, UB shadow (sim_pipes.h)
  int32_t kernel_type = -1;    // KERNEL_TASK_TYPE_DEFAULT, -1 when the kernel declares none
  void* tpipe = nullptr;       // the block's TPipe (GetTPipePtr), null before one is built
  CoreKind core = CoreKind::Aiv;
  uint32_t group = 0;          // the AI core this block belongs to (MIX launches)
  uint32_t sub_block = 0;      // 0 or 1: which AIV of its group
  bool library_access = false; // set while the Matmul library touches GM (may use the system workspace)
  const uint8_t* sys_workspace = nullptr;  // SetSysWorkspace
  uint32_t matmul_objects = 0;             // Matmul objects initialised on this core
  uint64_t matmul_l1_bytes = 0;            // L1 the registered Matmul objects share (the largest shareL1Size)
  const void* matmul_live = nullptr;       // the Matmul object (MatmulState) that loaded L1/L0C since its last End()
  uint32_t thread = 0;         // index of this core's thread in the launch (race reports)
  VectorClock clock;           // happens-before: this core's vector clock
  bool atomic_store = false;   // set while the Matmul fixpipe adds into GM
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

// Cross-core flag counters of one AI core (CrossCoreSetFlag / CrossCoreWaitFlag, ids 0..10).
// On A2/A3 each core has one counter per flag id, whatever mode set it (a wait is the
// scalar `wait_flag_dev(id)`); a counter holds at most 15 sets not yet waited for.
constexpr int kCrossCoreFlags = 11;
constexpr int64_t kCrossCoreFlagMax = 15;
struct GroupFlags {
  int64_t to_aiv[2][kCrossCoreFlags] = {};     // waits an AIV may pass
  int64_t to_aic[kCrossCoreFlags] = {};        // waits the AIC may pass
  int64_t aiv_mode2[2][kCrossCoreFlags] = {};  // mode-2 sets of each AIV not yet paired
  int64_t aiv_mode1[2][kCrossCoreFlags] = {};  // mode-1 sets of each AIV not yet paired
  // The setters' clocks travelling with the counts above (one per pending set, in order).
  std::vector<VectorClock> to_aiv_clock[2][kCrossCoreFlags];
  std::vector<VectorClock> to_aic_clock[kCrossCoreFlags];
  std::vector<VectorClock> aiv_mode2_clock[2][kCrossCoreFlags];
  std::vector<VectorClock> aiv_mode1_clock[2][kCrossCoreFlags];
  // KFC (REGIST_MATMUL_OBJ without ASCENDC_CUBE_ONLY): the AIC serves Matmul calls of its
  // AIVs' clients until both have ended.
  bool kfc_server = false;
  bool kfc_client_open[2] = {false, false};
  bool kfc_client_ended[2] = {false, false};
};

// Mode 0 (all cores of one kind): each core's sets not yet matched by every other core's.
struct Mode0Flag {
  std::vector<std::vector<VectorClock>> pending;  // per core of the kind: its unmatched sets' clocks
};

struct Launch {
  std::string kernel;
  uint32_t block_dim;
  uint64_t tiling_key;
  const SocSpec* soc;  // the platform the launch runs on (the tiling's, core count included)
  std::vector<GmRegion> regions;
  LaunchKind kind = LaunchKind::Vector;
  uint32_t threads = 0;     // cores simulated: block_dim, or 3 x block_dim for MIX 1:2
  uint32_t aiv_cores = 0;   // the vector cores among them (SyncAll's participants)
  // One lock for every cross-thread state below; waits go through BlockOn, which detects
  // a launch where every core waits and none can proceed.
  std::mutex mutex;
  std::condition_variable cv;
  uint32_t arrived = 0;
  uint32_t finished = 0;          // AIV blocks that returned: a SyncAll they never reach would hang
  uint32_t finished_threads = 0;  // every core that returned
  uint64_t generation = 0;
  bool aborted = false;
  std::string first_error;
  // The blocked cores: what each waits for (its condition, its thread, the call's words).
  struct Waiter {
    const std::function<bool()>* ready;
    uint32_t thread;
    const std::string* what;
  };
  std::vector<Waiter> waiting;
  std::vector<GroupFlags> groups;  // MIX: one per AI core; vector launches: blocks 2g, 2g+1
  Mode0Flag mode0[2][kCrossCoreFlags];  // [0]: the AIVs (or a vector launch's blocks), [1]: the AICs
  std::mutex atomic_mutex;  // serialises atomic-add writes to GM
  // Touched 32-byte sectors per region (the L2 model), one bit each.
  std::vector<std::vector<uint64_t>> touched;
  // Race detection: per Workspace region one RaceUnit per 4 bytes (empty for others),
  // the clocks joined at the SyncAll being assembled and at the last one completed, and
  // each thread's name for messages ("AIC 0", "AIV 3", "block 2").
  std::vector<std::vector<RaceUnit>> race_units;
  std::mutex race_mutex;
  VectorClock barrier_next, barrier_done;
  std::vector<std::string> thread_names;
};

// Blocks the calling core until `ready()` (evaluated under launch.mutex) holds. Raises
// when every core of the launch is blocked or returned and none can proceed (the device
// would hang), naming `what`.
void BlockOn(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready, const std::string& what);
void WakeAll();  // call after changing state some core may wait for (under launch.mutex)

// Runs `body` once per block, each in its own thread, like CANN's CPU debug mode.
// Throws SimError (the first violation) after all blocks have stopped.
LaunchCounters RunBlocks(const std::string& kernel, uint32_t block_dim, uint64_t tiling_key,
                         const std::vector<GmRegion>& regions,
                         const std::function<void()>& body, const SocSpec& soc = Soc910B(),
                         LaunchKind kind = LaunchKind::Vector);

// The barrier behind SyncAll; raises if a block returned without reaching it.
void SyncAllBlocks();
uint64_t CurrentTilingKey();

// Counters of the launches since the last ResetCounters (per thread of the host caller).
std::vector<LaunchCounters>& RecordedLaunches();

}  // namespace sim
