// The kernel's workspace: CANN hands every kernel one GM buffer whose first part is the
// system workspace (used by libraries such as Matmul, sized by the host with
// GetLibApiWorkSpaceSize) and whose rest is the user workspace. The simulator registers
// the system part as its own region: kernel code touching it is an error (the library
// would overwrite it), so kernels must reach their part through GetUserWorkspace.
#pragma once

#include "sim_runtime.h"
#include "sim_tensor.h"

namespace AscendC {

// Where the user workspace starts: past the system workspace when the launch has one.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) {
  sim::CallScope scope("GetUserWorkspace");
  for (const sim::GmRegion& r : sim::Ctx().launch->regions)
    if (r.role == sim::GmRole::SystemWorkspace && r.begin == workspace) return workspace + r.bytes;
  return workspace;
}

// The system workspace the Matmul library uses (REGIST_MATMUL_OBJ's second argument).
inline void SetSysWorkspace(GM_ADDR workspace) {
  sim::CallScope scope("SetSysWorkspace");
  for (const sim::GmRegion& r : sim::Ctx().launch->regions)
    if (r.role == sim::GmRole::SystemWorkspace && r.begin == workspace) {
      sim::Ctx().sys_workspace = workspace;
      return;
    }
  sim::Fail("the pointer is not the start of the launch's system workspace (the host sized none, or passed "
            "another buffer)");
}

inline GM_ADDR GetSysWorkSpacePtr() { return const_cast<GM_ADDR>(sim::Ctx().sys_workspace); }

}  // namespace AscendC
