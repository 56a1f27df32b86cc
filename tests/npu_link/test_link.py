"""NPU link check, without hardware: the adapter built against torch_npu 2.13.0's real
headers loads next to libtorch_npu.so with every symbol it needs resolved by torch and
torch_npu (stub CANN libraries stand in only for what libtorch_npu.so itself imports),
registers a PrivateUse1 kernel for each op the yaml declares for this torch_npu, reports
a missing aclnn op as a Python error, finds our custom op package through
ASCEND_CUSTOM_OPP_PATH (a stub libcust_opapi.so here), refuses shapes CANN's built-ins
cannot take with messages naming the argument, and declares the schemas torch_npu
registers for the same ops. This proves compiling and linking, not numerics on hardware
(tests/test_npu.py). The compile-time check of the aclnn calls is test_prototypes.py.
"""

from __future__ import annotations

import importlib.metadata
import os
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

# The exported torch_npu API the adapter is written against (aclnn_call.h: the steps of
# EXEC_NPU_CMD_EXT; npu_tensors.cpp: formats; CANN's error text).
TORCH_NPU_API = {
    "GetOpApiFuncAddr(char const*)",
    "ConvertType(at::Tensor const&)",
    "InitExecCommonCtx()",
    "ReleaseExecCommonCtx()",
    "UnInitExecCommonCtx()",
    "GetAclStream()",
    "GetWorkSpaceAddr(unsigned long)",
    "InitExecSubTheadCtx(void*)",
    "ExecuteApiFunc(void const*, void*, void*, unsigned long, aclOpExecutor*)",
    "c10_npu::GetDeterministicLevel()",
    "at_npu::native::ApplyDeterministicLevel(long, bool, bool)",
    "c10_npu::c10_npu_get_error_message()",
    "at_npu::native::get_npu_format(at::Tensor const&)",
    "at_npu::native::npu_format_cast(at::Tensor const&, long)",
}
RUN_ACL_CALL = "RunAclCall("


def npu_ops() -> list[dict]:
    version = gen_registration.parse_version(importlib.metadata.version("torch-npu"))
    return gen_registration.npu_ops(gen_registration.load_ops()[1], version)


def test_yaml_declares_ops_for_the_installed_torch_npu():
    assert {op["func"].split("(")[0] for op in npu_ops()} == {
        "fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward",
        "fused_linear_online_max_sum", "fused_cross_entropy_loss_with_max_sum"}


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
    assert any(name.startswith(RUN_ACL_CALL) for name in from_torch_npu)
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
    assert len(theirs_names) == 4
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
        name = ours.name.split("::")[1]
        our_writes = [a.name for a in ours.arguments if a.alias_info and a.alias_info.is_write]
        their_writes = [a.name for a in theirs.arguments if a.alias_info and a.alias_info.is_write]
        our_returns = [str(r.type) for r in ours.returns]
        their_returns = [str(r.type) for r in theirs.returns]
        if name == "fused_cross_entropy_loss_with_max_sum":
            # torch_npu's label_smoothing is `float?`; ours a plain float (only 0.0 runs).
            differs = [(a, b) for a, b in zip(signature(ours), signature(theirs)) if a != b]
            assert differs == [(("label_smoothing", "float", 0.0, True),
                                ("label_smoothing", "Optional[float]", 0.0, True))], differs
            assert len(signature(ours)) == len(signature(theirs))
            assert our_returns == their_returns == ["Tensor", "Tensor"]
            continue
        # Keyword-only arguments are our CPU kernel's tuning knobs (the yaml says so);
        # the NPU kernel accepts and ignores them. Everything before them must match.
        ours_shared = [arg for arg in signature(ours) if not arg[3]]
        assert ours_shared == signature(theirs), f"{qualified}: {text}"
        our_tuning = [arg[0] for arg in signature(ours) if arg[3]]
        assert our_tuning == (["scratch_bytes"] if name == "fused_linear_cross_entropy_loss_grad" else [])
        if name == "fused_linear_cross_entropy_loss_grad":
            # The NPU kernel may use softmax as scratch: we declare the write, torch_npu does not.
            assert (our_writes, their_writes) == (["softmax"], [])
            assert our_returns == their_returns == ["Tensor", "Tensor"]
        elif name == "fused_linear_online_max_sum":
            assert our_writes == their_writes == []
            assert our_returns == their_returns == ["Tensor"] * 6
        else:
            # aten returns undefined tensors for outputs not asked for; we return None.
            assert our_writes == their_writes == []
            assert (our_returns, their_returns) == (["Optional[Tensor]"] * 4, ["Tensor"] * 4)


# The aten ops nn.SyncBatchNorm calls (python/ascend_ops/training/nn/sync_batch_norm.py), which
# torch_npu implements for NPU tensors; docs/npu.md lists them.
SYNC_BATCH_NORM_ATEN_OPS = ("batch_norm_stats", "batch_norm_gather_stats_with_counts",
                            "batch_norm_elemt", "batch_norm_backward_reduce",
                            "batch_norm_backward_elemt")


def test_torch_npu_registers_the_aten_ops_sync_batch_norm_uses(probe):
    result = probe(f"for name in {SYNC_BATCH_NORM_ATEN_OPS!r}:\n"
                   "    result[name] = torch._C._dispatch_has_kernel_for_dispatch_key(\n"
                   "        'aten::' + name, 'PrivateUse1')\n")
    assert result == {name: True for name in SYNC_BATCH_NORM_ATEN_OPS}


def test_target_check_mode_follows_what_torch_npu_registers(probe):
    code = ("import ascend_ops._npu as npu\n"
            "result['assert_async'] = torch._C._dispatch_has_kernel_for_dispatch_key(\n"
            "    'aten::_assert_async.msg', 'PrivateUse1')\n"
            "result['mode'] = npu.target_check_mode()\n")
    result = probe(code)
    # torch_npu 2.13.0 has no PrivateUse1 _assert_async: no device-side check, and no host
    # copy either unless the debug switch asks for one.
    assert result["mode"] == ("device" if result["assert_async"] else "off")
    assert probe(code, env={"ASCEND_OPS_NPU_CHECK_TARGETS": "1"})["mode"] == "host"


def test_builtin_limits_are_refused_naming_the_argument(probe):
    """The adapter refuses what builtin_limits.cpp derives from CANN's tiling, at the
    boundary: the limit passes, one past it is refused naming the argument, the limit and
    memory-saving mode (the same numbers ascend_ops._C reports without torch_npu)."""
    from ascend_ops.npu.limits import builtin_limits

    limits = builtin_limits()
    v, bt = limits["flce_grad_high_perf_max_vocab"], limits["flce_grad_high_perf_max_rows"]
    calls = {
        "h": "npu.check_builtin_flce_grad_limits(16, 65536, 1024, False)",
        "v_small": "npu.check_builtin_flce_grad_limits(16, 64, 127, True)",
        "v_large": f"npu.check_builtin_flce_grad_limits(16, 64, {v + 1}, True)",
        "v_large_memory_saving": "npu.check_builtin_flce_grad_limits(16, 64, 76032, False)",
        "bt_large": f"npu.check_builtin_flce_grad_limits({bt + 1}, 64, 128, True)",
        "v_edges": "npu.check_builtin_flce_grad_limits(16, 65535, 128, True); "
                   f"npu.check_builtin_flce_grad_limits({bt}, 64, {v}, True)",
        "forward_h": "npu.check_builtin_online_max_sum_limits(65535, 1024)",
        "forward_ok": "npu.check_builtin_online_max_sum_limits(65534, 1)",
    }
    code = "import ascend_ops._npu as npu\n"
    for key, call in calls.items():
        code += (f"try:\n    {call}\n    result[{key!r}] = None\n"
                 f"except NotImplementedError as e:\n    result[{key!r}] = str(e)\n")
    code += "result['status'] = [npu.describe_status(s) for s in (161002, 361001, 561103)]\n"
    code += "result['limits'] = npu.cann_builtin_limits()\n"
    result = probe(code)
    assert result["limits"] == limits  # one source, the same in both extensions
    assert "needs H = input.size(1) <= 65535, got 65536" in result["h"]
    assert f"needs 128 <= V = weight.size(0) <= {v}" in result["v_small"] and "got 127" in result["v_small"]
    assert f"got {v + 1}" in result["v_large"] and "impl='npu_custom'" in result["v_large"]
    assert "memory-saving mode (softmax=None" in result["v_large"]
    assert f"needs BT = input.size(0) <= {bt}, got {bt + 1}" in result["bt_large"]
    assert result["v_large_memory_saving"] is None  # memory-saving mode has no V limit
    assert result["v_edges"] is None
    assert "needs H = input.size(1) <= 65534, got 65535" in result["forward_h"]
    assert result["forward_ok"] is None
    invalid, platform, inner = result["status"]
    assert invalid.startswith("161002 (ACLNN_ERR_PARAM_INVALID")
    assert "A2/A3" not in platform and "does not run on this NPU" in platform
    assert inner.startswith("561103 (ACLNN_ERR_INNER") and "tiling" in inner


def stub_custom_package(root: pathlib.Path, symbols: list[str]) -> pathlib.Path:
    """<root>/vendors/ascend_ops with a stub op_api/lib/libcust_opapi.so defining `symbols`."""
    vendor = root / "vendors" / "ascend_ops"
    lib = vendor / "op_api" / "lib"
    lib.mkdir(parents=True)
    source = root / "cust.c"
    source.write_text("".join(f"int {name}(void) {{ return 0; }}\n" for name in symbols) or "int unused;\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib / "libcust_opapi.so"), str(source)],
                   check=True)
    return vendor


CUSTOM_OPS = {op["func"].split("(")[0]: op["aclnn_custom"]
              for op in gen_registration.load_ops()[1] if "aclnn_custom" in op}


def custom_probe_code(ops: dict) -> str:
    return ("import os, ascend_ops._npu as npu\n"
            "from ascend_ops.npu import adapter as a\n"
            "path = os.environ.get('ASCEND_CUSTOM_OPP_PATH')\n"
            f"for op, entry in {ops!r}.items():\n"
            "    result[op] = [npu.aclnn_available(entry), a.custom_unavailable_reason(op, npu, path),\n"
            "                  a.builtin_unavailable_reason(op, npu)]\n"
            "try:\n"
            f"    npu.require_aclnn({next(iter(ops.values()))!r}, '', True)\n"
            "except NotImplementedError as e:\n"
            "    result['missing'] = str(e)\n")


def test_custom_package_is_found_through_ascend_custom_opp_path(probe, tmp_path):
    symbols = [f"{entry}{suffix}" for entry in CUSTOM_OPS.values()
               for suffix in ("GetWorkspaceSize", "")]
    vendor = stub_custom_package(tmp_path, symbols)
    code = custom_probe_code(CUSTOM_OPS) + \
        f"result['kernels'] = [callable(getattr(npu, op + '_custom', None)) for op in {list(CUSTOM_OPS)!r}]\n"
    result = probe(code, env={"ASCEND_CUSTOM_OPP_PATH": str(vendor)})
    assert result.pop("kernels") == [True] * len(CUSTOM_OPS)  # impl="npu_custom" calls these
    for op in CUSTOM_OPS:
        available, custom_reason, builtin_reason = result[op]
        assert available and custom_reason is None, result[op]
        # The built-in names are not in our package: no CANN here, so they stay missing.
        assert builtin_reason.startswith("CANN lacks aclnn") and "(needs CANN >= " in builtin_reason
    assert "missing" not in result


def test_custom_package_reasons(probe, tmp_path):
    # Installed but without the FLCE entry point; then not installed at all.
    flce, bn = CUSTOM_OPS["fused_linear_cross_entropy_loss_grad"], CUSTOM_OPS["batch_norm_reduce_backward"]
    vendor = stub_custom_package(tmp_path, [f"{bn}GetWorkspaceSize", bn])
    result = probe(custom_probe_code(CUSTOM_OPS), env={"ASCEND_CUSTOM_OPP_PATH": str(vendor)})
    assert result["batch_norm_reduce_backward"][:2] == [True, None]
    assert result["fused_linear_cross_entropy_loss_grad"][0] is False
    assert f"the ascend_ops op package at {vendor} lacks {flce}" in \
        result["fused_linear_cross_entropy_loss_grad"][1]
    assert result["missing"].startswith(f"{flce} not found: install the ascend_ops custom op package")
    result = probe(custom_probe_code(CUSTOM_OPS), env={"ASCEND_CUSTOM_OPP_PATH": str(tmp_path / "none")})
    for op in CUSTOM_OPS:
        assert result[op][0] is False
        assert result[op][1].startswith("the ascend_ops op package is not installed: build it "
                                        "with ascendc_kernels/build.sh, see docs/npu.md")


def default_install(root: pathlib.Path, priority: str) -> pathlib.Path:
    """$ASCEND_OPP_PATH as a default install of our package leaves it: the package under
    vendors/ascend_ops, named on vendors/config.ini's load_priority line."""
    symbols = [f"{entry}{suffix}" for entry in CUSTOM_OPS.values()
               for suffix in ("GetWorkspaceSize", "")]
    stub_custom_package(root, symbols)
    (root / "vendors" / "config.ini").write_text(f"load_priority={priority}\n")
    return root


def test_custom_package_is_found_where_torch_npu_finds_a_default_install(probe, tmp_path):
    """No ASCEND_CUSTOM_OPP_PATH, the package named in $ASCEND_OPP_PATH/vendors/config.ini:
    torch_npu's own lookup finds its ops, and so must our availability check."""
    opp = default_install(tmp_path, "customize,ascend_ops")
    code = ("import ascend_ops._npu as npu\n"
            "from ascend_ops.npu import adapter as a\n"
            f"for op, entry in {CUSTOM_OPS!r}.items():\n"
            "    result[op] = [npu.aclnn_available(entry),\n"
            "                  a.custom_unavailable_reason(op, npu, *a.package_search_environment())]\n")
    env = {"ASCEND_OPP_PATH": str(opp)}
    result = probe(code, env=env)
    for op in CUSTOM_OPS:
        assert result[op] == [True, None], result[op]
    # Not on the priority list: torch_npu does not load it, and we do not claim it.
    (opp / "vendors" / "config.ini").write_text("load_priority=customize\n")
    result = probe(code, env=env)
    for op in CUSTOM_OPS:
        assert result[op][0] is False and "not installed" in result[op][1], result[op]


def test_a_package_path_set_after_loading_is_ignored_as_torch_npu_ignores_it(probe, tmp_path):
    """torch_npu reads ASCEND_CUSTOM_OPP_PATH when libtorch_npu.so loads; set later it
    changes nothing there, so it must not make npu_custom look available here."""
    symbols = [f"{entry}{suffix}" for entry in CUSTOM_OPS.values()
               for suffix in ("GetWorkspaceSize", "")]
    vendor = stub_custom_package(tmp_path, symbols)
    code = ("import ascend_ops._npu as npu\n"
            "from ascend_ops.npu import adapter as a\n"
            "a.package_search_environment()  # as when ascend_ops loads torch_npu\n"
            f"os.environ['ASCEND_CUSTOM_OPP_PATH'] = {str(vendor)!r}\n"
            f"for op, entry in {CUSTOM_OPS!r}.items():\n"
            "    result[op] = [npu.aclnn_available(entry),\n"
            "                  a.custom_unavailable_reason(op, npu, *a.package_search_environment())]\n")
    result = probe(code)
    for op in CUSTOM_OPS:
        available, reason = result[op]
        assert available is False, "torch_npu now reads the variable late: revisit"
        assert reason is not None and reason.startswith("the ascend_ops op package is not installed")


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0,
                    reason="needs root to give the stub package to another user")
def test_a_package_owned_by_another_user_is_not_claimed(probe, tmp_path):
    """torch_npu's GetOpApiFuncAddr skips a libcust_opapi.so whose owner fails its
    checkOwner (op_api_common.cpp:36-54): root loads only root's files. Our availability
    check mirrors it and says why, instead of "found" (and then "rebuild it")."""
    symbols = [f"{entry}{suffix}" for entry in CUSTOM_OPS.values()
               for suffix in ("GetWorkspaceSize", "")]
    vendor = stub_custom_package(tmp_path, symbols)
    os.chown(vendor / "op_api" / "lib" / "libcust_opapi.so", 12345, 12345)
    result = probe(custom_probe_code(CUSTOM_OPS), env={"ASCEND_CUSTOM_OPP_PATH": str(vendor)})
    for op in CUSTOM_OPS:
        available, reason, _ = result[op]
        assert available is False, "torch_npu loaded a package of another user: revisit"
        assert reason.startswith("the ascend_ops op package is installed but torch_npu will not load it")
        assert "belongs to uid 12345 and this process runs as uid 0" in reason
