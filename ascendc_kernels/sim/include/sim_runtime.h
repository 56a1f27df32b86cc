// The simulator's runtime: the SoC description, one context per running block (which
// kernel, which block, which call), the registry of global memory a launch may touch,
// counters, and the launcher that runs every block in its own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
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

// Global memory a launch may touch: every kernel argument is registered with its size and
// what the kernel may do with it. Output: read and written (outputs, and inputs an op
// updates in place, like FLCE's softmax); Input: read only (a write stops the launch).
// Output and Workspace regions are checked for races between cores (sim_race.h).
// SystemWorkspace: reserved for the library (Matmul), not kernel code.
enum class GmRole : uint8_t { Output, Input, Workspace, SystemWorkspace };
struct GmRegion {
  const uint8_t* begin;
  uint64_t bytes;
  std::string name;
  GmRole role = GmRole::Output;
};

// One fixpipe atomic add (a Matmul C block stored with enAtomic = 1), held until the bytes
// are next read or written otherwise (or the launch ends) and then applied together with
// the other pending ones, in an order the launch's schedule seed picks among those that
// no happens-before relation orders (rule F: a result that depends on it shows).
struct AtomicRecord {
  uint32_t thread = 0;     // the core that added
  uint64_t seq = 0;        // creation order in the launch
  uint64_t fix_count = 0;  // the core's FIX-pipe access count at the store (its epoch)
  std::vector<PipeClock> clock;  // the core's vector clock at the store
  float* dst = nullptr;    // C's first element of the block
  uint64_t ldc = 0;        // C's row pitch (elements)
  int64_t rows = 0, cols = 0;
  std::vector<float> values;  // rows x cols
  const uint8_t* lo = nullptr;  // the bytes it covers, for the overlap test
  const uint8_t* hi = nullptr;
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

// DataCacheCleanAndInvalid: the line holding `p` (or, `entire`, every line) that this core
// wrote with GlobalTensor::SetValue goes out to GM.
void CleanDataCacheLine(const void* p, bool entire);

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
  // Rule F: pending fixpipe atomic adds (under atomic_mutex) and the seed that orders them.
  std::vector<AtomicRecord> pending_atomics;
  std::atomic<size_t> pending_atomic_count{0};
  uint64_t atomic_seq = 0;
  uint64_t schedule_seed = 0;
  bool auto_sync = false;  // Schedule::auto_sync: rule G is not checked
  // Rules A and E: the 64-byte data-cache lines a core wrote with GlobalTensor::SetValue
  // and has not yet cleaned with DataCacheCleanAndInvalid (line address / 64 -> thread + 1).
  std::mutex dcache_mutex;
  std::unordered_map<uint64_t, uint32_t> dirty_lines;
  std::atomic<size_t> dirty_line_count{0};
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

// How a launch is scheduled. `seed` picks the order the threads start in and the order of
// atomic adds no synchronisation orders (0: creation order, 1: the reverse, others: a
// seeded mix; kDefaultSeed: a new seed per launch, so an order-dependent result varies
// from run to run). `check_determinism`: run the launch twice, with seeds 0 and 1, from the
// same initial GM, and fail if any Output region differs between the two. `auto_sync`:
// the kernel was compiled with bisheng's --cce-auto-sync (the default of custom operator
// projects), which inserts the vector pipe's own barriers; false (here the default) checks
// that the kernel has them itself (rule G, sim_pipes.h), as CANN's kernels do.
constexpr uint64_t kDefaultSeed = ~uint64_t(0);
struct Schedule {
  uint64_t seed = kDefaultSeed;
  bool check_determinism = false;
  bool auto_sync = false;
};

// Runs `body` once per block, each in its own thread, like CANN's CPU debug mode.
// Throws SimError (the first violation) after all blocks have stopped.
LaunchCounters RunBlocks(const std::string& kernel, uint32_t block_dim, uint64_t tiling_key,
                         const std::vector<GmRegion>& regions,
                         const std::function<void()>& body, const SocSpec& soc = Soc910B(),
                         LaunchKind kind = LaunchKind::Vector, Schedule schedule = Schedule{});

// Rule F: applies every pending atomic add whose bytes overlap [p, p + bytes) -- and, to
// keep the order consistent, every other pending one -- before a non-atomic access.
void FlushAtomicsBefore(Launch& l, const void* p, uint64_t bytes);
// Records one fixpipe atomic add (the values are applied later, see AtomicRecord).
void DeferAtomicAdd(AtomicRecord record);

// The barrier behind SyncAll; raises if a block returned without reaching it.
void SyncAllBlocks();
uint64_t CurrentTilingKey();

// Counters of the launches since the last ResetCounters (per thread of the host caller).
std::vector<LaunchCounters>& RecordedLaunches();

}  // namespace sim
