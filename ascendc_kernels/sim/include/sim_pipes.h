// The pipes of one core and what each has seen of the others. On the device the scalar
// unit (S), the vector unit (V) and the two DMA engines (MTE2: GM -> UB, MTE3: UB -> GM)
// run concurrently; an access to UB that another pipe wrote (or still reads) is safe only
// after a synchronisation between the two: SetFlag/WaitFlag<HardEvent::X_Y>, a queue's
// EnQue/DeQue (and FreeTensor/AllocTensor), PipeBarrier<PIPE_ALL> or SyncAll.
//
// The simulator runs the pipes one after another, so it tracks that ordering instead of
// timing: every pipe counts its accesses, `seen[p][q]` is how far pipe p is ordered after
// pipe q, a SetFlag sends the source pipe's view and the matching WaitFlag merges it into
// the destination's (vector clocks). Each 32-byte UB block remembers its last writer and
// each pipe's last read; an access not ordered after them is a race the hardware could
// lose, and the launch fails naming both pipes and the missing flag.
//
// Within the vector pipe (rule G): its instructions issue in order but overlap, so one that
// touches UB bytes an earlier one wrote, or writes bytes an earlier one reads, needs a
// PipeBarrier<PIPE_V> between them ("具有数据依赖的相同流水之间需要插入此同步", AscendC API
// reference, PipeBarrier), or an ordering through another pipe (V_S then S_V, a queue, a
// V_V flag, PIPE_ALL). bisheng inserts those barriers itself with --cce-auto-sync (on by
// default in custom operator projects); a launch with auto-sync off (Schedule::auto_sync
// false, the default here) checks them, at byte precision.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace sim {

// S, V, MTE2, MTE3 touch UB; the cube core's MTE1 (L1 -> L0A/L0B), M (the cube) and FIX
// (L0C -> GM/L1) only pair up flags here: the simulator does not model L1/L0 accesses per
// pipe (the Matmul API orders its own cube pipes).
enum Pipe : uint8_t { kPipeS = 0, kPipeV, kPipeMte2, kPipeMte3, kPipeMte1, kPipeM, kPipeFix, kPipeCount };
using PipeClock = std::array<uint64_t, kPipeCount>;

const char* PipeName(Pipe p);

struct UbBlockShadow {
  uint8_t writer = kPipeCount;  // kPipeCount: never written
  uint64_t written_at = 0;      // the writer's access count
  uint64_t read_at[kPipeCount] = {};
};

constexpr int kHardEvents = 32;  // the documented HardEvent values (sim_sync.h)
constexpr int kEventIds = 8;  // A2/A3: event IDs 0..7 per HardEvent

// A vector-pipe access not yet known complete: UB bytes [lo, hi) of instruction
// `instruction` (`call`), the pipe's `at`-th access.
struct VectorAccess {
  uint64_t lo, hi, at, instruction;
  bool write;
  const char* call;
};

struct PipeState {
  PipeClock seen[kPipeCount] = {};                   // seen[p][q]: accesses of q that p is ordered after
  std::vector<PipeClock> flags[kHardEvents][kEventIds];  // views sent by SetFlag, not yet waited for (FIFO)
  uint8_t allocated[kHardEvents] = {};               // AllocEventID bitmask
  uint8_t queue_held[kHardEvents] = {};              // IDs the TQues' EnQue/FreeTensor hold (rule C)
  uint8_t fetched[kHardEvents] = {};                 // FetchEventID answers not yet used by a SetFlag
  std::vector<UbBlockShadow> ub;                     // one entry per 32-byte UB block
  // Rule G (auto-sync off): the vector pipe's accesses after vector_done, the last of its
  // accesses known complete (a barrier, or a flag whose sender had seen them).
  std::vector<VectorAccess> vector_pending;
  uint64_t vector_done = 0;
  uint64_t vector_instruction = 0;     // the number of the running (or last) vector instruction
  bool in_vector_instruction = false;
};

// Records an access of `bytes` UB bytes at `ub_ptr` by `pipe` and fails on a race.
void PipeAccess(Pipe pipe, const void* ub_ptr, uint64_t bytes, bool write);
// The view `pipe` would send with a SetFlag, and merging a received view into `pipe`.
PipeClock PipeView(Pipe pipe);
void PipeMerge(Pipe pipe, const PipeClock& view);
// PipeBarrier<PIPE_ALL> / SyncAll: every pipe is ordered after every other.
void PipeBarrierAll();
// PipeBarrier<PIPE_V>: every vector instruction so far is complete before the next starts.
void PipeBarrierVector();

// One vector instruction: its operands' accesses are one instruction's (an in-place
// operation does not order against itself).
class VectorInstruction {
 public:
  VectorInstruction();
  ~VectorInstruction();
};

}  // namespace sim
