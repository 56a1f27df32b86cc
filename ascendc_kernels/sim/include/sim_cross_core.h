// The cores of a MIX launch and their synchronisation: which core a block runs on
// (ASCEND_IS_AIC / ASCEND_IS_AIV, GetSubBlockIdx, GetTaskRation), the kernel type a
// kernel declares (KERNEL_TASK_TYPE_DEFAULT), and CrossCoreSetFlag / CrossCoreWaitFlag
// with the documented modes (A2/A3: flag ids 0..10):
//   mode 1: within an AI core, the two AIVs: a wait passes once both AIVs have set;
//   mode 2: within an AI core, AIC <-> AIV: an AIC set lets both AIVs pass one wait, and
//           the AIC passes one wait once both AIVs have set.
// A wait that can never be satisfied is raised as a hang; a flag still set when the
// launch ends is raised too (the counters would leak into the next kernel).
#pragma once

#include <string>

#include "sim_runtime.h"
#include "sim_sync.h"

// The kernel types (KernelMetaType) and KERNEL_TASK_TYPE_DEFAULT live in sim_sync.h.

namespace sim {

inline bool IsAic() { return Ctx().core == CoreKind::Aic; }
inline bool IsMix() { return Ctx().launch->kind == LaunchKind::MixAic1To2; }

inline void RequireMix(const char* what) {
  if (!IsMix()) Fail(std::string(what) + " needs a MIX kernel (KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2)); "
                     "this launch runs vector cores only");
  if (Ctx().kernel_type < 0)
    Fail(std::string(what) + " before KERNEL_TASK_TYPE_DEFAULT: declare the MIX kernel type first");
}

inline void CheckFlagId(uint16_t id) {
  if (id >= kCrossCoreFlags)
    Fail("flagId " + std::to_string(id) + " outside [0, " + std::to_string(kCrossCoreFlags - 1) + "] (A2/A3)");
}

inline void CrossCoreSet(uint8_t mode, uint16_t id) {
  CallScope scope("CrossCoreSetFlag");
  RequireMix("CrossCoreSetFlag");
  CheckFlagId(id);
  BlockContext& c = Ctx();
  if (mode != 1 && mode != 2)
    Fail("mode " + std::to_string(mode) + " is not modelled (modes 1 and 2 are; mode 4 is Atlas 350 only)");
  if (mode == 1 && c.core == CoreKind::Aic) Fail("mode 1 synchronises the two AIVs of an AI core; called on the AIC");
  Launch& l = *c.launch;
  std::lock_guard<std::mutex> lock(l.mutex);
  GroupFlags& f = l.groups[c.group];
  // The flag carries the setter's clock (happens-before for the race check).
  const VectorClock token = c.clock;
  ++c.clock[c.thread];
  auto pop = [](std::vector<VectorClock>& q) {
    VectorClock front = q.front();
    q.erase(q.begin());
    return front;
  };
  if (c.core == CoreKind::Aic) {
    for (int s = 0; s < 2; ++s) {
      ++f.to_aiv[s][id];
      f.to_aiv_clock[s][id].push_back(token);
    }
  } else if (mode == 2) {
    ++f.aiv_mode2[c.sub_block][id];
    f.aiv_mode2_clock[c.sub_block][id].push_back(token);
    while (f.aiv_mode2[0][id] > 0 && f.aiv_mode2[1][id] > 0) {
      --f.aiv_mode2[0][id];
      --f.aiv_mode2[1][id];
      VectorClock both = pop(f.aiv_mode2_clock[0][id]);
      JoinClock(both, pop(f.aiv_mode2_clock[1][id]));
      ++f.to_aic[id];
      f.to_aic_clock[id].push_back(both);
    }
  } else {
    ++f.aiv_mode1[c.sub_block][id];
    f.aiv_mode1_clock[c.sub_block][id].push_back(token);
    while (f.aiv_mode1[0][id] > 0 && f.aiv_mode1[1][id] > 0) {
      --f.aiv_mode1[0][id];
      --f.aiv_mode1[1][id];
      VectorClock both = pop(f.aiv_mode1_clock[0][id]);
      JoinClock(both, pop(f.aiv_mode1_clock[1][id]));
      for (int s = 0; s < 2; ++s) {
        ++f.to_aiv[s][id];
        f.to_aiv_clock[s][id].push_back(both);
      }
    }
  }
  l.cv.notify_all();
}

inline void CrossCoreWait(uint16_t id) {
  CallScope scope("CrossCoreWaitFlag");
  RequireMix("CrossCoreWaitFlag");
  CheckFlagId(id);
  BlockContext& c = Ctx();
  Launch& l = *c.launch;
  std::unique_lock<std::mutex> lock(l.mutex);
  GroupFlags& f = l.groups[c.group];
  int64_t& counter = c.core == CoreKind::Aic ? f.to_aic[id] : f.to_aiv[c.sub_block][id];
  std::vector<VectorClock>& tokens = c.core == CoreKind::Aic ? f.to_aic_clock[id] : f.to_aiv_clock[c.sub_block][id];
  const std::function<bool()> ready = [&] { return counter > 0; };
  BlockOn(lock, ready, "CrossCoreWaitFlag(" + std::to_string(id) + ")");
  --counter;
  JoinClock(c.clock, tokens.front());
  tokens.erase(tokens.begin());
}

}  // namespace sim

// In CANN these read the core type the binary section runs on; usage: `if ASCEND_IS_AIC { ... }`.
#define ASCEND_IS_AIC (sim::IsAic())
#define ASCEND_IS_AIV (!sim::IsAic())

namespace AscendC {

template <uint8_t modeId, pipe_t pipe>
void CrossCoreSetFlag(uint16_t flagId) {
  sim::CrossCoreSet(modeId, flagId);
}

inline void CrossCoreWaitFlag(uint16_t flagId) { sim::CrossCoreWait(flagId); }

inline uint8_t GetSubBlockIdx() { return static_cast<uint8_t>(sim::Ctx().sub_block); }
// AIV cores per AIC in this launch: 2 on the AIV side of a MIX 1:2 launch, else 1.
inline int64_t GetTaskRation() { return sim::IsMix() && !sim::IsAic() ? 2 : 1; }

}  // namespace AscendC
