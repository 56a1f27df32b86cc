// The kernel's workspace: CANN hands every kernel one GM buffer whose first part is the
// system workspace (used by libraries such as Matmul, sized by the host with
// GetLibApiWorkSpaceSize) and whose rest is the user workspace. The simulator registers
// the system part as its own region: kernel code touching it is an error (the library
// would overwrite it), so kernels must reach their part through GetUserWorkspace.
#pragma once

#include <string>

#include "sim_runtime.h"
#include "sim_tensor.h"

namespace sim {
// RESERVED_WORKSPACE of asc-devkit (impl/basic_api/utils/kernel_utils_constants.h) for
// __NPU_ARCH__ 2201 (A2/A3): the system part GetUserWorkspace skips on the device, the
// same 16 MiB the host's GetLibApiWorkSpaceSize() reports for these chips.
constexpr uint64_t kReservedWorkspace = 16ull << 20;
}  // namespace sim

namespace AscendC {

// Where the user workspace starts, as on the device (asc-devkit
// dav_c220/kernel_operator_common_impl.h:55-67): GetUserWorkspace ignores its argument and
// returns the launch's workspace (the KFC workspace address the framework sets) plus
// RESERVED_WORKSPACE. A kernel is right on the device only if the host reserved exactly
// that much system workspace in front of the user part; CANN's CPU-debug build returns the
// argument instead, so a kernel passing anything but its workspace argument would behave
// differently there. Both are errors here.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) {
  sim::CallScope scope("GetUserWorkspace");
  const sim::GmRegion* sys = nullptr;
  for (const sim::GmRegion& r : sim::Ctx().launch->regions)
    if (r.role == sim::GmRole::SystemWorkspace) sys = &r;
  if (sys == nullptr)
    sim::Fail("the launch has no system workspace, but on the device GetUserWorkspace returns the workspace + "
              "RESERVED_WORKSPACE (16 MiB) whatever the host sized: reserve GetLibApiWorkSpaceSize() bytes in "
              "front of the user part");
  if (workspace != sys->begin)
    sim::Fail("the argument is not the launch's workspace: the device ignores it (and returns the launch's "
              "workspace + 16 MiB), CANN's CPU-debug build returns it as is; pass the kernel's workspace argument");
  if (sys->bytes != sim::kReservedWorkspace)
    sim::Fail("the host reserved " + std::to_string(sys->bytes) + " bytes of system workspace in front of the user "
              "part, but on the device GetUserWorkspace returns the workspace + RESERVED_WORKSPACE = " +
              std::to_string(sim::kReservedWorkspace) + " bytes (dav_c220 kernel_operator_common_impl.h): the "
              "user part would start elsewhere");
  return workspace + sim::kReservedWorkspace;
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
