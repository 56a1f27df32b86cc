"""An emulated Atlas A2 NPU for running the NPU branches of ascend_ops on CPU tensors.

`site/` holds a stand-in `torch_npu` package (with its dist-info, version 2.13.0): put it on
PYTHONPATH and a process imports it as it would torch_npu, so ascend_ops' own code decides
"NPU" exactly as on hardware (npu/adapter.py finds torch_npu, loads `ascend_ops._npu`, asks
for the device count; `_impls` and `SyncBatchNorm` see tensors on device "npu"). Importing
it installs:

- device.py: the "npu" device (torch's Python PrivateUse1 backend), tensors held in host
  memory, mixed-device operators refused, fresh memory poisoned, host syncs counted;
- torch_npu_kernels.py: torch_npu 2.13's kernels of aten's sync-BN operators;
- hccl.py: the "hccl" backend, a stand-in of torch_npu's ProcessGroupHCCL applying its
  rules for an Atlas A2 to every collective on NPU tensors, computing with gloo;
- adapter.py: our adapter's kernels and module surface (`ascend_ops._npu`);
- cann.py: the CANN aclnn ops all of these call, each enforcing its v9.0.0 phase-1 rules
  (ported line by line) and computing with the reference.

tests/test_npu_emulation.py runs the user-facing entry points this way; docs/npu.md ("What
is verified where") says what that proves and what it cannot.
"""

import pathlib

SITE = pathlib.Path(__file__).resolve().parent / "site"
TESTS = pathlib.Path(__file__).resolve().parents[1]
