// CrossCoreSetFlag / CrossCoreWaitFlag: the per-core flag counters, the three A2/A3 modes,
// the counter cap and the pipe a set is issued on (see sim_cross_core.h).
#include "sim_cross_core.h"

#include <algorithm>

namespace sim {
namespace {

VectorClock PopFront(std::vector<VectorClock>& q) {
  VectorClock front = q.front();
  q.erase(q.begin());
  return front;
}

const char* PipeArgName(int pipe) {
  switch (pipe) {
    case PIPE_S: return "PIPE_S";
    case PIPE_V: return "PIPE_V";
    case PIPE_M: return "PIPE_M";
    case PIPE_MTE1: return "PIPE_MTE1";
    case PIPE_MTE2: return "PIPE_MTE2";
    case PIPE_MTE3: return "PIPE_MTE3";
    case PIPE_ALL: return "PIPE_ALL";
    case PIPE_FIX: return "PIPE_FIX";
    default: return "an unknown pipe";
  }
}

// The counter of core `core` (index within its kind) that mode 0 raises.
void Mode0Raise(Launch& l, bool aic, uint32_t core, const VectorClock& token, uint16_t id) {
  GroupFlags& f = l.groups[aic ? core : core / 2];
  const std::string whose = aic ? "AIC " + std::to_string(core) : "AIV " + std::to_string(core);
  if (aic)
    RaiseCounter(f.to_aic[id], f.to_aic_clock[id], token, whose, id);
  else
    RaiseCounter(f.to_aiv[core % 2][id], f.to_aiv_clock[core % 2][id], token, whose, id);
}

// Mode 0: every core of the setter's kind must set before any of their counters rises,
// so all of them must be resident at once (like SyncAll).
void Mode0Set(BlockContext& c, uint16_t id, const VectorClock& token) {
  Launch& l = *c.launch;
  const bool aic = c.core == CoreKind::Aic;
  const uint32_t cores = aic ? l.block_dim : l.aiv_cores;
  const uint32_t resident = aic ? l.soc->aiCores : l.soc->vectorCores;
  if (cores > resident)
    Fail("mode 0 synchronises all " + std::to_string(cores) + (aic ? " AIC" : " AIV") + " cores of the launch, " +
         "more than the chip's " + std::to_string(resident) + ": the later ones would never start while the first wait");
  Mode0Flag& m = l.mode0[aic][id];
  if (m.pending.empty()) m.pending.resize(cores);
  std::vector<VectorClock>& mine = m.pending[c.block_idx];
  if (static_cast<int64_t>(mine.size()) >= kCrossCoreFlagMax)
    Fail("mode-0 CrossCoreSetFlag(" + std::to_string(id) + "): this core has " + std::to_string(mine.size()) +
         " sets the other cores have not matched; the counter holds at most " + std::to_string(kCrossCoreFlagMax));
  mine.push_back(token);
  while (std::all_of(m.pending.begin(), m.pending.end(), [](const std::vector<VectorClock>& q) { return !q.empty(); })) {
    VectorClock all = PopFront(m.pending[0]);
    for (uint32_t k = 1; k < cores; ++k) JoinClock(all, PopFront(m.pending[k]));
    for (uint32_t k = 0; k < cores; ++k) Mode0Raise(l, aic, k, all, id);
  }
}

}  // namespace

Pipe CrossCoreSetPipe(int pipe) {
  const bool aic = IsAic();
  if (pipe == PIPE_S)
    Fail("CrossCoreSetFlag on PIPE_S: only Atlas 350 accepts it; on A2/A3 name the pipe whose work the flag "
         "publishes (AIV: PIPE_MTE3 after a copy out, PIPE_V, PIPE_MTE2; AIC: PIPE_FIX after a Matmul's C, PIPE_MTE2)");
  switch (pipe) {
    case PIPE_V: if (!aic) return kPipeV; break;
    case PIPE_MTE3: if (!aic) return kPipeMte3; break;
    case PIPE_MTE2: return kPipeMte2;
    case PIPE_MTE1: if (aic) return kPipeMte1; break;
    case PIPE_M: if (aic) return kPipeM; break;
    case PIPE_FIX: if (aic) return kPipeFix; break;
    default: break;
  }
  Fail(std::string("CrossCoreSetFlag on ") + PipeArgName(pipe) + ": not a pipe of " +
       (aic ? "the cube core (MTE1, MTE2, M, FIX)" : "a vector core (V, MTE2, MTE3)"));
}

void RaiseCounter(int64_t& counter, std::vector<VectorClock>& clocks, const VectorClock& token, const std::string& whose,
                  uint16_t id) {
  if (counter >= kCrossCoreFlagMax)
    Fail("cross-core flag " + std::to_string(id) + ": " + whose + "'s counter already holds " +
         std::to_string(counter) + " sets not waited for; the hardware counts at most " +
         std::to_string(kCrossCoreFlagMax) + " (wait before setting again)");
  ++counter;
  clocks.push_back(token);
}

void CrossCoreSet(uint8_t mode, int pipe_arg, uint16_t id) {
  CallScope scope("CrossCoreSetFlag");
  BlockContext& c = Ctx();
  if (mode != 0 && mode != 1 && mode != 2)
    Fail("mode " + std::to_string(mode) + " does not exist on A2/A3 (modes 0, 1 and 2; mode 4 is Atlas 350 only)");
  if (mode == 0) {
    if (c.kernel_type != KERNEL_TYPE_MIX_AIV_1_0 && c.kernel_type != KERNEL_TYPE_MIX_AIC_1_2)
      Fail("CrossCoreSetFlag needs a MIX kernel type (KERNEL_TYPE_MIX_AIV_1_0 for vector cores only, "
           "KERNEL_TYPE_MIX_AIC_1_2), the kernel declares " + std::string(KernelTypeName(c.kernel_type)));
  } else {
    RequireMix("CrossCoreSetFlag");
  }
  CheckFlagId(id);
  if (mode == 1 && c.core == CoreKind::Aic) Fail("mode 1 synchronises the two AIVs of an AI core; called on the AIC");
  const Pipe pipe = CrossCoreSetPipe(pipe_arg);
  Launch& l = *c.launch;
  std::lock_guard<std::mutex> lock(l.mutex);
  // The flag carries what the setting pipe is ordered after (happens-before for the race
  // check): this core's accesses by other pipes not yet ordered before it are not published.
  VectorClock token = c.clock;
  token[c.thread] = c.pipes.seen[pipe];
  if (mode == 0) {
    Mode0Set(c, id, token);
    l.cv.notify_all();
    return;
  }
  GroupFlags& f = l.groups[c.group];
  const std::string aiv0 = "AIV " + std::to_string(2 * c.group), aiv1 = "AIV " + std::to_string(2 * c.group + 1);
  if (c.core == CoreKind::Aic) {
    RaiseCounter(f.to_aiv[0][id], f.to_aiv_clock[0][id], token, aiv0, id);
    RaiseCounter(f.to_aiv[1][id], f.to_aiv_clock[1][id], token, aiv1, id);
  } else {
    int64_t (&unpaired)[2][kCrossCoreFlags] = mode == 2 ? f.aiv_mode2 : f.aiv_mode1;
    std::vector<VectorClock>(&clocks)[2][kCrossCoreFlags] = mode == 2 ? f.aiv_mode2_clock : f.aiv_mode1_clock;
    RaiseCounter(unpaired[c.sub_block][id], clocks[c.sub_block][id], token,
                 "this AIV's unmatched mode-" + std::to_string(mode), id);
    while (unpaired[0][id] > 0 && unpaired[1][id] > 0) {
      --unpaired[0][id];
      --unpaired[1][id];
      VectorClock both = PopFront(clocks[0][id]);
      JoinClock(both, PopFront(clocks[1][id]));
      if (mode == 2) {
        RaiseCounter(f.to_aic[id], f.to_aic_clock[id], both, "AIC " + std::to_string(c.group), id);
      } else {
        RaiseCounter(f.to_aiv[0][id], f.to_aiv_clock[0][id], both, aiv0, id);
        RaiseCounter(f.to_aiv[1][id], f.to_aiv_clock[1][id], both, aiv1, id);
      }
    }
  }
  l.cv.notify_all();
}

void CrossCoreWait(uint16_t id) {
  CallScope scope("CrossCoreWaitFlag");
  BlockContext& c = Ctx();
  if (c.kernel_type != KERNEL_TYPE_MIX_AIV_1_0 && c.kernel_type != KERNEL_TYPE_MIX_AIC_1_2)
    Fail("CrossCoreWaitFlag needs a MIX kernel type (KERNEL_TYPE_MIX_AIV_1_0 or KERNEL_TYPE_MIX_AIC_1_2)");
  CheckFlagId(id);
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
