"""NPU link check, without hardware: the adapter built against torch_npu 2.13.0's real
headers loads next to libtorch_npu.so with every symbol it needs resolved by torch and
torch_npu (stub CANN libraries stand in only for what libtorch_npu.so itself imports),
registers a PrivateUse1 kernel for each op the yaml declares for this torch_npu, reports
a missing aclnn op as a Python error, and declares the schemas torch_npu registers for
the same ops. This proves compiling and linking, not numerics on hardware (tests/test_npu.py).
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import subprocess
import sys

import pytest
import torch

from npu_link.npu_link_support import SKIP_REASON, TORCH_NPU_INSTALLED, dynamic_symbols

pytestmark = [pytest.mark.npu_link, pytest.mark.skipif(not TORCH_NPU_INSTALLED, reason=SKIP_REASON)]

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "op_plugin"))
import gen_registration  # noqa: E402

# The exported torch_npu API the adapter is written against (aclnn_call.h).
TORCH_NPU_API = {
    "GetOpApiFuncAddr(char const*)",
    "ConvertType(at::Tensor const&)",
    "c10_npu::getCurrentNPUStream(signed char)",
    "c10_npu::NPUStream::stream(bool) const",
}
RUN_OP_API_V2 = "at_npu::native::OpCommand::RunOpApiV2("


def npu_ops() -> list[dict]:
    version = gen_registration.parse_version(importlib.metadata.version("torch-npu"))
    return gen_registration.npu_ops(gen_registration.load_ops()[1], version)


def test_yaml_declares_ops_for_the_installed_torch_npu():
    assert {op["func"].split("(")[0] for op in npu_ops()} == {
        "fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward"}


def test_adapter_loads_with_every_symbol_bound(probe, adapter_path):
    # LD_BIND_NOW and RTLD_NOW: an unresolved symbol anywhere fails the import.
    result = probe("import ascend_ops._npu as npu\n"
                   "result['file'] = npu.__file__\n"
                   "result['version'] = npu.torch_npu_version\n")
    assert pathlib.Path(result["file"]) == adapter_path
    installed = ".".join(importlib.metadata.version("torch-npu").split(".")[:2])
    assert result["version"] == installed


def test_adapter_needs_nothing_from_the_stubs(stub_cann, adapter_path, torch_npu_dir):
    needed = dynamic_symbols(adapter_path, defined=False)
    stubbed = set().union(*(dynamic_symbols(lib, defined=True) for lib in stub_cann.glob("*.so")))
    assert not needed & stubbed, f"the adapter imports CANN symbols directly: {needed & stubbed}"
    from_torch_npu = needed & dynamic_symbols(torch_npu_dir / "lib" / "libtorch_npu.so", True)
    assert TORCH_NPU_API <= from_torch_npu, TORCH_NPU_API - from_torch_npu
    assert any(name.startswith(RUN_OP_API_V2) for name in from_torch_npu)
    print(f"{len(needed)} symbols needed, {len(from_torch_npu)} from libtorch_npu.so:",
          *sorted(from_torch_npu), sep="\n  ")


def test_an_unexported_torch_npu_symbol_would_fail_to_load(probe, tmp_path, torch_npu_dir):
    # The control for the test above: torch_npu's headers declare
    # OpPreparation::unsafe_empty_workspace (EXEC_NPU_CMD calls it), libtorch_npu.so does
    # not export it, and a library that needs it does not load.
    header = torch_npu_dir / "include/torch_npu/csrc/framework/utils/OpPreparation.h"
    assert "unsafe_empty_workspace(uint64_t workspace_size)" in header.read_text()
    mangled = "_ZN6at_npu6native13OpPreparation22unsafe_empty_workspaceEm"
    source = tmp_path / "uses_unexported.c"
    source.write_text(f"void {mangled}(void);\nvoid use(void) {{ {mangled}(); }}\n")
    library = tmp_path / "libuses_unexported.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    result = probe(f"try:\n    ctypes.CDLL({str(library)!r}, mode=os.RTLD_NOW)\n"
                   "    result['error'] = None\n"
                   "except OSError as e:\n    result['error'] = str(e)\n")
    assert result["error"] is not None and "undefined symbol" in result["error"]
    assert mangled in result["error"]


def test_npu_kernels_are_registered_for_privateuse1(probe):
    names = [op["func"].split("(")[0] for op in npu_ops()]
    result = probe("import ascend_ops, ascend_ops._npu\n"
                   f"for name in {names!r}:\n"
                   "    result[name] = torch._C._dispatch_has_kernel_for_dispatch_key(\n"
                   "        'ascend_ops::' + name, 'PrivateUse1')\n")
    assert result == {name: True for name in names}


def test_missing_aclnn_op_is_a_python_error_naming_what_to_install(probe):
    ops = [(op["aclnn"], op["cann"]) for op in npu_ops()]
    result = probe("import ascend_ops._npu as npu\n"
                   f"for name, cann in {ops!r}:\n"
                   "    try:\n"
                   "        npu.require_aclnn(name, cann)\n"
                   "        result[name] = None\n"
                   "    except NotImplementedError as e:\n"
                   "        result[name] = [npu.aclnn_available(name), str(e)]\n")
    for name, cann in ops:
        available, message = result[name]  # no CANN here: nothing resolves
        assert available is False
        assert message.startswith(f"{name} not found: install CANN >= {cann}"), message
        assert "ascend_ops custom op package" in message and "ASCEND_CUSTOM_OPP_PATH" in message


def test_available_impls_says_torch_npu_cannot_import_without_cann(probe):
    result = probe("import ascend_ops\n"
                   "result['npu'] = ascend_ops.available_impls()['npu'].reason\n",
                   with_stubs=False)
    assert result["npu"].startswith("torch_npu not importable: "), result["npu"]


def signature(schema) -> list[tuple]:
    return [(a.name, str(a.type), a.default_value, a.kwarg_only) for a in schema.arguments]


def test_schemas_match_torch_npus_registered_ones(probe):
    """Each op's arguments are those torch_npu registers for it (read from the loaded
    library); the differences are deliberate and asserted so that a change shows."""
    theirs_names = {}
    for op in npu_ops():
        if "torch_npu" in op:
            theirs_names[op["func"]] = f"npu::{op['torch_npu']}"
        elif "aten" in op:
            theirs_names[op["func"]] = f"aten::{op['aten']}"
    assert len(theirs_names) == 2
    result = probe(f"for func, qualified in {list(theirs_names.items())!r}:\n"
                   "    ns, name = qualified.split('::')\n"
                   "    packet = getattr(getattr(torch.ops, ns), name)\n"
                   "    result[func] = [str(packet.default._schema),\n"
                   "        torch._C._dispatch_has_kernel_for_dispatch_key(qualified, 'PrivateUse1')]\n")
    for func, qualified in theirs_names.items():
        text, has_npu_kernel = result[func]
        assert has_npu_kernel, f"torch_npu registers no NPU kernel for {qualified}"
        ours = torch._C.parse_schema(f"ascend_ops::{func}")
        theirs = torch._C.parse_schema(text)
        # Keyword-only arguments are our CPU kernel's tuning knobs (the yaml says so);
        # the NPU kernel accepts and ignores them. Everything before them must match.
        ours_shared = [arg for arg in signature(ours) if not arg[3]]
        assert ours_shared == signature(theirs), f"{qualified}: {text}"
        our_tuning = [arg[0] for arg in signature(ours) if arg[3]]
        assert our_tuning == (["scratch_bytes"] if qualified.startswith("npu::") else [])
        our_writes = [a.name for a in ours.arguments if a.alias_info and a.alias_info.is_write]
        their_writes = [a.name for a in theirs.arguments if a.alias_info and a.alias_info.is_write]
        our_returns = [str(r.type) for r in ours.returns]
        their_returns = [str(r.type) for r in theirs.returns]
        if qualified.startswith("npu::"):
            # The NPU kernel may use softmax as scratch: we declare the write, torch_npu does not.
            assert (our_writes, their_writes) == (["softmax"], [])
            assert our_returns == their_returns == ["Tensor", "Tensor"]
        else:
            # aten returns undefined tensors for outputs not asked for; we return None.
            assert our_writes == their_writes == []
            assert (our_returns, their_returns) == (["Optional[Tensor]"] * 4, ["Tensor"] * 4)
