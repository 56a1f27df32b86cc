"""The Ascend C op package, checked statically (no CANN here): one msopgen project
(ascendc_kernels/ascend_ops.json) holding both ops under our own op types, the OpDefs
(op_host/*_def.cpp) declaring exactly what the json declares, build.sh's vendor name and
compute units, the kernel entry points, and the aclnn prototypes CANN would generate
compared with the built-in ops' prototypes the adapter calls."""

import itertools
import json
import os
import pathlib
import re
import subprocess

import pytest

KERNELS = pathlib.Path(__file__).resolve().parents[1] / "ascendc_kernels"
PACKAGE = json.loads((KERNELS / "ascend_ops.json").read_text())

# Op type -> source directory, and CANN's built-in op the type must never reuse.
OPS = {"AscendOpsFusedLinearCrossEntropyLossGrad": "fused_linear_cross_entropy_loss_grad",
       "AscendOpsBatchNormReduceBackward": "batch_norm_reduce_backward"}
CANN_BUILTIN_TYPES = {"FusedLinearCrossEntropyLossGrad", "BatchNormReduceBackward", "SyncBatchNormBackwardReduce",
                      "BatchNormGradReduce"}

# The built-in aclnn prototypes (parameters before workspaceSize, executor), the contract
# the adapter calls either package through.
BUILTIN_PROTOTYPES = {
    "AscendOpsFusedLinearCrossEntropyLossGrad": [
        "grad", "input", "weight", "targetMask", "maskedTarget", "labelSmoothing", "logitsMaxOptional",
        "sumExpLogitsOptional", "softmaxOptional", "inputGradOut", "weightGradOut"],
    "AscendOpsBatchNormReduceBackward": [
        "gradOut", "input", "mean", "invstd", "weightOptional", "inputG", "weightG", "biasG", "sumDyOut",
        "sumDyXmuOut", "gradWeightOut", "gradBiasOut"],
}

GE_TYPES = {"DT_FLOAT": "float", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16", "DT_UINT8": "uint8",
            "DT_INT32": "int32", "DT_INT64": "int64"}


def op_json(op_type):
    return next(op for op in PACKAGE if op["op"] == op_type)


def snake(op_type):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", op_type).lower()


def camel(name):
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def parse_opdef(op_type):
    """Inputs/outputs (name, REQUIRED|OPTIONAL, dtype list or None), attrs and compute
    units as the OpDef's C++ declares them."""
    source = (KERNELS / OPS[op_type] / "op_host" / f"{OPS[op_type]}_def.cpp").read_text()
    vectors = {}
    for name, body in re.findall(r"std::vector<ge::DataType> (\w+) = \{([^}]*)\};", source):
        vectors[name] = [GE_TYPES[t] for t in re.findall(r"ge::(DT_\w+)", body)]
    for name, count, dtype in re.findall(r"std::vector<ge::DataType> (\w+)\((\d+), ge::(DT_\w+)\);", source):
        vectors[name] = [GE_TYPES[dtype]] * int(count)

    def params(kind):
        found = re.findall(kind + r'\("(\w+)"\)\.ParamType\((REQUIRED|OPTIONAL)\)\.DataType\((\w+)\)', source)
        return [(name, ptype.lower(), vectors.get(var)) for name, ptype, var in found]

    return dict(source=source, inputs=params("Input"), outputs=params("Output"),
                attrs=re.findall(r'this->Attr\("(\w+)"\)', source),
                units=re.findall(r'AddConfig\("(\w+)"\)', source),
                op_add=re.findall(r"OP_ADD\((\w+)\);", source),
                classes=re.findall(r"class (\w+) : public OpDef", source))


def test_one_project_holds_both_ops_under_our_own_types():
    assert sorted(op["op"] for op in PACKAGE) == sorted(OPS)
    for op_type in OPS:
        assert op_type.startswith("AscendOps") and op_type not in CANN_BUILTIN_TYPES
        assert op_type.removeprefix("AscendOps") in CANN_BUILTIN_TYPES  # ours, named after the built-in
    assert sorted(KERNELS.glob("**/*.json")) == [KERNELS / "ascend_ops.json"]  # no second project


@pytest.mark.parametrize("op_type", OPS)
def test_the_opdef_declares_what_the_json_declares(op_type):
    spec, opdef = op_json(op_type), parse_opdef(op_type)
    assert opdef["classes"] == [op_type] and opdef["op_add"] == [op_type]
    assert sorted(opdef["units"]) == ["ascend910_93", "ascend910b"]
    for kind, key in (("inputs", "input_desc"), ("outputs", "output_desc")):
        declared = [(d["name"], d["param_type"]) for d in spec[key]]
        assert [(name, ptype) for name, ptype, _ in opdef[kind]] == declared, kind
        for (name, _, dtypes), d in zip(opdef[kind], spec[key]):
            if dtypes is not None:  # literal vectors (FLCE); BN's are built by a loop, checked below
                assert dtypes == d["type"], name
            assert len(d["format"]) == len(d["type"]) == len(spec[key][0]["type"])
    assert opdef["attrs"] == [a["name"] for a in spec["attr"]]


def test_flce_signature_and_dtypes_are_cann_s():
    spec = op_json("AscendOpsFusedLinearCrossEntropyLossGrad")
    types = {d["name"]: d["type"] for d in spec["input_desc"] + spec["output_desc"]}
    combos = set(zip(types["input"], types["masked_target"]))
    assert combos == set(itertools.product(["float16", "bfloat16"], ["int32", "int64"]))
    assert types["weight"] == types["input"] == types["input_grad"] == types["weight_grad"]
    assert set(types["grad"] + types["logits_max"] + types["sum_exp_logits"] + types["softmax"]) == {"float"}
    assert set(types["target_mask"]) == {"uint8"}  # bit-packed
    optional = [d["name"] for d in spec["input_desc"] if d["param_type"] == "optional"]
    # CANN's three, then the loss options' (SPEC §7), all fp32.
    assert optional == ["logits_max", "sum_exp_logits", "softmax"] + list(OPTION_INPUTS)
    assert all(set(types[name]) == {"float"} for name in OPTION_INPUTS)
    assert spec["attr"] == [{"name": "label_smoothing", "param_type": "optional", "type": "float",
                             "default_value": "0.0"},
                            {"name": "logit_scale", "param_type": "optional", "type": "float",
                             "default_value": "1.0"},
                            {"name": "softcap", "param_type": "optional", "type": "float",
                             "default_value": "0.0"}]


#: The loss options' optional inputs and attributes (SPEC §7), beyond CANN's op; the names
#: npu/options_support.py looks for in an installed package (routes.CUSTOM_OP_NEEDS).
OPTION_INPUTS = ("bias", "class_weight", "alpha", "beta", "gamma")
OPTION_ATTRS = ("logit_scale", "softcap")


def test_the_package_declares_every_name_the_options_route_needs():
    from ascend_ops.training.lce.route_npu_custom import CUSTOM_OP_NEEDS

    spec = op_json("AscendOpsFusedLinearCrossEntropyLossGrad")
    declared = {d["name"] for d in spec["input_desc"]} | {a["name"] for a in spec["attr"]}
    assert {n for names in CUSTOM_OP_NEEDS.values() for n in names} <= declared
    assert set(OPTION_INPUTS + OPTION_ATTRS) <= declared


def test_bn_outputs_are_optional_and_every_dtype_combination_is_declared():
    spec = op_json("AscendOpsBatchNormReduceBackward")
    types = {d["name"]: d["type"] for d in spec["input_desc"] + spec["output_desc"]}
    assert all(d["param_type"] == "optional" for d in spec["output_desc"])  # null when not asked for
    assert [d["param_type"] for d in spec["input_desc"]] == ["required"] * 4 + ["optional"]
    floats = ["float", "float16", "bfloat16"]
    rows = list(zip(types["input"], types["mean"], types["weight"]))
    assert sorted(rows) == sorted(itertools.product(floats, repeat=3))  # f16 statistics included
    assert rows == list(itertools.product(floats, repeat=3))  # the order the OpDef's loop builds
    for i, (x, mean, _) in enumerate(rows):
        assert types["grad_out"][i] == x and types["invstd"][i] == mean
        expected = "float16" if (x, mean) == ("float16", "float16") else "float"
        assert {types[o][i] for o in ("sum_dy", "sum_dy_xmu", "grad_weight", "grad_bias")} == {expected}
    source = parse_opdef("AscendOpsBatchNormReduceBackward")["source"]
    assert "for (ge::DataType in : kinds)\n      for (ge::DataType st : kinds)\n        for (ge::DataType w : kinds)" \
        in source


def generated_prototype(op_type):
    """CANN's generated aclnn parameter list: inputs (optional ones suffixed Optional),
    then attributes, then outputs (suffixed Out)."""
    spec = op_json(op_type)
    inputs = [camel(d["name"]) + ("Optional" if d["param_type"] == "optional" else "") for d in spec["input_desc"]]
    return inputs + [camel(a["name"]) for a in spec["attr"]] + [camel(d["name"]) + "Out" for d in spec["output_desc"]]


def test_bn_generated_aclnn_prototype_is_the_builtin_one():
    assert generated_prototype("AscendOpsBatchNormReduceBackward") == BUILTIN_PROTOTYPES[
        "AscendOpsBatchNormReduceBackward"]


def test_flce_generated_aclnn_prototype_differs_only_in_where_label_smoothing_sits():
    # CANN generates attributes between inputs and outputs, so labelSmoothing comes after
    # softmaxOptional instead of after maskedTarget: the one difference the adapter must
    # bridge (ascendc_kernels/README.md, "One package").
    # The loss options' inputs and attributes (SPEC §7) are ours alone: after CANN's
    # inputs and after labelSmoothing respectively, null / 1.0 / 0.0 for SPEC §1's op.
    generated = generated_prototype("AscendOpsFusedLinearCrossEntropyLossGrad")
    builtin = BUILTIN_PROTOTYPES["AscendOpsFusedLinearCrossEntropyLossGrad"]
    ours = [camel(n) + "Optional" for n in OPTION_INPUTS] + [camel(n) for n in OPTION_ATTRS]
    assert generated != builtin
    cann_part = [p for p in generated if p not in ours]
    assert [p for p in cann_part if p != "labelSmoothing"] == [p for p in builtin if p != "labelSmoothing"]
    assert cann_part.index("labelSmoothing") == cann_part.index("softmaxOptional") + 1
    assert generated[generated.index("softmaxOptional") + 1:generated.index("inputGradOut")] == \
        ours[:5] + ["labelSmoothing"] + ours[5:]


def kernel_entry(op_type):
    source = (KERNELS / OPS[op_type] / "op_kernel" / f"{OPS[op_type]}.cpp").read_text()
    match = re.search(r'extern "C" __global__ __aicore__ void ' + snake(op_type) + r"\(([^)]*)\)", source)
    return None if match is None else re.findall(r"GM_ADDR (\w+)", match.group(1))


@pytest.mark.parametrize("op_type", OPS)
def test_the_kernel_entry_is_named_after_the_op_type_and_takes_its_arguments(op_type):
    # msopgen compiles op_kernel/<snake type>.cpp and calls the kernel of that name with
    # the inputs and outputs in the OpDef's order, then workspace and tiling.
    spec = op_json(op_type)
    params = kernel_entry(op_type)
    assert params is not None, f"no kernel {snake(op_type)} in op_kernel/"
    expected = [camel(d["name"]) for d in spec["input_desc"] + spec["output_desc"]] + ["workspace", "tiling"]
    assert [p.lower() for p in params] == [p.lower() for p in expected]


def test_build_sh_makes_one_package_for_a2_and_a3_named_ascend_ops():
    script = (KERNELS / "build.sh").read_text()
    assert re.search(r"^vendor=ascend_ops$", script, re.M)
    assert re.search(r'^compute_units="ascend910b;ascend910_93"$', script, re.M)
    assert script.count("msopgen\" gen") == 1 and '-i "$here/ascend_ops.json"' in script
    ops = re.search(r"^ops=\((.*)\)$", script, re.M).group(1).split()
    assert sorted(ops) == sorted(OPS.values())
    assert 'generated="ascend_ops_$op"' in script  # msopgen's names for the op type AscendOps<Op>
    for op_type, directory in OPS.items():
        assert snake(op_type) == f"ascend_ops_{directory}"


@pytest.mark.parametrize("source", sorted(KERNELS.glob("*/op_kernel/*.cpp")), ids=lambda p: p.name)
def test_kernels_take_event_ids_from_the_pipe_and_declare_a_mix_type_for_syncall(source):
    # The simulator rejects both at run time on the paths the tests execute; this covers
    # every path of the source.
    text = source.read_text()
    literal = re.findall(r"(?:Set|Wait)Flag<HardEvent::\w+>\(\s*\d+\s*\)", text)
    assert not literal, f"hard-coded event IDs: {literal}"
    if re.search(r"\bSyncAll\s*(<[^>]*>)?\s*\(", text):
        assert re.search(r"KERNEL_TASK_TYPE_DEFAULT\(KERNEL_TYPE_MIX_\w+\)", text)


@pytest.mark.parametrize("op", sorted(OPS.values()))
def test_tiling_funcs_ask_for_batch_mode(op):
    # The kernels synchronise across cores (SyncAll, cross-core flags): without batch mode a
    # launch may start on some of its cores while another stream's kernel holds the rest.
    source = (KERNELS / op / "op_host" / f"{op}_def.cpp").read_text()
    assert re.search(r"context->SetBlockDim\([^;]*\);\s*(//[^\n]*\n\s*)*context->SetScheduleMode\(1\);", source)


def test_flce_tiling_func_takes_its_matmul_tilings_from_cann_s_library():
    source = (KERNELS / OPS["AscendOpsFusedLinearCrossEntropyLossGrad"] / "op_host"
              / "fused_linear_cross_entropy_loss_grad_def.cpp").read_text()
    assert "matmul_tiling::MultiCoreMatmulTiling mm(ascendc);" in source
    for call in ("SetDim(1)", "SetFixSplit(r.baseM, r.baseN, r.baseK)", "SetTraverse(matmul_tiling::MatrixTraverse::FIRSTM)",
                 "SetBufferSpace(", "GetTiling(out) != -1"):
        assert call in source, call
    # One request of FlceMatmulRequests per Matmul, into the tiling data the kernel hands to
    # MatmulImpl::Init (tests/test_cann_tiling.py runs this TilingFunc against the library).
    assert "FlceMatmulRequests(" in source
    assert re.findall(r"CannCubeTiling\(ascendc, l1, requests\[(\d)\], (\w+), (\w+), dtype, d\.(\w+)\)", source) == [
        ("0", "false", "true", "logitsMm"), ("1", "false", "false", "inputGradMm"),
        ("2", "true", "false", "weightGradMm")]


@pytest.mark.parametrize("source", sorted(KERNELS.glob("*/op_kernel/*.cpp")), ids=lambda p: p.name)
def test_kernels_drive_the_cube_from_the_aic_and_use_current_api_names(source):
    text = source.read_text()
    if "lib/matmul_intf.h" in text:
        # Without ASCENDC_CUBE_ONLY, REGIST_MATMUL_OBJ in a MIX kernel makes the AIC a KFC
        # server: cube code on the AIC after it never runs.
        assert text.index("#define ASCENDC_CUBE_ONLY") < text.index('#include "lib/matmul_intf.h"')
        assert not re.search(r"^\s*REGIST_MATMUL_OBJ\(", text, re.M) and re.search(r"\.Init\(&", text)
    assert "SetSysWorkspace" not in text  # deprecated: the framework sets the system workspace
    assert "GetTaskRation" not in text  # GetTaskRatio is the documented name
    assert not re.search(r"(?<![:\w])TCubeTiling\b", text)  # AscendC::tiling::TCubeTiling
    if "std::is_same" in text:
        assert "#include <type_traits>" in text


def test_the_simulator_tcubetiling_has_the_fields_the_kernel_checks_against_cann_s():
    # kernel_tiling.h (simulator) and the tiling data's static_asserts (compiled against the
    # real header by ascendc-check in CI) must name the same 50 fields in the same order.
    sim_header = (KERNELS / "sim" / "include" / "kernel_tiling" / "kernel_tiling.h").read_text()
    listed = re.search(r"#define ASCEND_OPS_TCUBETILING_FIELDS\(X\)(.*?)\n\n", sim_header, re.S).group(1)
    sim_fields = re.findall(r"X\((\w+)\)", listed)
    checks = (KERNELS / "fused_linear_cross_entropy_loss_grad" / "op_kernel"
              / "fused_linear_cross_entropy_loss_grad_tiling_data.h").read_text()
    pairs = re.findall(r"FLCE_CUBE_FIELD\((\w+), (\d+)\)", checks)
    assert len(sim_fields) == 50
    assert [name for name, _ in pairs] == sim_fields
    assert [int(i) for _, i in pairs] == list(range(50))


# --- the packaged tree: what build.sh copies into the msopgen project ----------------------

REPO = KERNELS.parent
SHARED_TOOLS = pathlib.Path(os.environ.get("ASCEND_OPS_SHARED_TOOLS", REPO.parent / "shared" / "tools"))
QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def build_sh_ops():
    return re.search(r"^ops=\((.*)\)$", (KERNELS / "build.sh").read_text(), re.M).group(1).split()


def lay_out(tmp_path):
    """build.sh's own layout of the project (no msopgen), as {destination: file}."""
    subprocess.run(["bash", str(KERNELS / "build.sh"), "--layout", str(tmp_path)], check=True)
    return {p.relative_to(tmp_path).as_posix(): p for p in tmp_path.rglob("*") if p.is_file()}


def test_build_sh_copies_what_the_sources_include_and_lists_no_file_by_hand(tmp_path):
    script = (KERNELS / "build.sh").read_text()
    assert 'package_sources.py" "$vendor" "${ops[@]}"' in script
    assert not re.search(r'cp "\$here/\$op/', script), "a hand-listed copy of an op's file"
    laid = lay_out(tmp_path)
    # Our files, not the stand-ins for CANN's headers (sim/include for the kernels,
    # cann_host/include for the host), which CANN provides on the device build.
    sources = {p.resolve() for p in KERNELS.rglob("*") if p.is_file()
               and p.relative_to(KERNELS).parts[0] not in ("sim", "cann_host", "build")}
    for op in build_sh_ops():
        assert f"ascend_ops/op_kernel/ascend_ops_{op}.cpp" in laid  # msopgen's names
        assert f"ascend_ops/op_host/ascend_ops_{op}.cpp" in laid
    included = set()
    for dest, path in laid.items():
        for name in QUOTED_INCLUDE.findall(path.read_text()):
            found = (path.parent / name).resolve()
            if found.is_file():
                included.add(found.relative_to(tmp_path.resolve()).as_posix())
                continue
            # Not in the project: then it must not be a file of ours either (CANN's header).
            original = [s for s in sources if s.name == pathlib.PurePosixPath(name).name and
                        s.as_posix().endswith(name.lstrip("./"))]
            assert not original, f"{dest} includes \"{name}\" ({original[0]}), which build.sh did not copy"
    roots = {d for d in laid if re.fullmatch(r"ascend_ops/op_(kernel|host)/ascend_ops_\w+\.cpp", d)}
    # Nothing copied that no one includes.
    assert set(laid) - roots == included - roots
    assert {"ascend_ops/op_kernel/fused_linear_cross_entropy_loss_grad_schedule.h",
            "ascend_ops/op_kernel/fused_linear_cross_entropy_loss_grad_g_stage.h",
            "common/platform.h"} <= set(laid)


def test_package_sources_derives_a_new_include_and_refuses_one_that_moves(tmp_path):
    # A header a kernel starts to include is copied with no change to build.sh; one whose
    # relative path would name another file in the project is refused by name.
    import importlib.util

    spec = importlib.util.spec_from_file_location("package_sources", KERNELS / "package_sources.py")
    package_sources = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package_sources)
    tree = tmp_path / "kernels"
    for sub in ("op_kernel", "op_host"):
        (tree / "toy" / sub).mkdir(parents=True)
    (tree / "common").mkdir()
    (tree / "common" / "facts.h").write_text("#pragma once\n")
    (tree / "toy" / "op_kernel" / "toy_extra.h").write_text('#include "kernel_operator.h"\n')
    (tree / "toy" / "op_kernel" / "toy.cpp").write_text('#include "toy_extra.h"\n#include "lib/matmul_intf.h"\n')
    (tree / "toy" / "op_host" / "toy_def.cpp").write_text('#include "../../common/facts.h"\n')
    assert package_sources.package_files("proj", ["toy"], tree) == [
        ("common/facts.h", "common/facts.h"), ("toy/op_host/toy_def.cpp", "proj/op_host/proj_toy.cpp"),
        ("toy/op_kernel/toy.cpp", "proj/op_kernel/proj_toy.cpp"),
        ("toy/op_kernel/toy_extra.h", "proj/op_kernel/toy_extra.h")]
    (tree / "toy" / "op_host" / "toy_def.cpp").write_text('#include "../../toy/op_kernel/toy_extra.h"\n')
    with pytest.raises(SystemExit, match=r"toy_def.cpp includes \"../../toy/op_kernel/toy_extra.h\""):
        package_sources.package_files("proj", ["toy"], tree)


def test_the_packaged_tree_fails_to_compile_without_one_of_its_copies(tmp_path):
    # CI compiles the whole laid-out tree (scripts/check_op_package.sh); here one kernel
    # header and one host header are removed from a layout, and exactly the files that
    # include them must fail, each with the missing name.
    tools = [SHARED_TOOLS / "ascendc-check" / "ascendc-check", SHARED_TOOLS / "cann-matmul-tiling" / "build.sh"]
    missing = [str(t) for t in tools if not t.is_file()]
    if missing:
        message = f"no {', '.join(missing)} (../shared/tools beside the clone)"
        if os.environ.get("ASCEND_OPS_REQUIRE_CANN_TILING") == "1":
            pytest.fail(f"ASCEND_OPS_REQUIRE_CANN_TILING=1 but {message}")
        pytest.skip(message)
    laid = lay_out(tmp_path)
    laid["ascend_ops/op_kernel/fused_linear_cross_entropy_loss_grad_g_stage.h"].unlink()
    laid["common/platform.h"].unlink()
    run = subprocess.run(["bash", str(REPO / "scripts" / "check_op_package.sh"), "--tree", str(tmp_path)],
                         capture_output=True, text=True, env={**os.environ, "ASCEND_OPS_SHARED_TOOLS": str(SHARED_TOOLS)})
    assert run.returncode == 1, run.stdout + run.stderr
    verdicts = {name: verdict for verdict, name in
                re.findall(r"^(OK|FAIL) +\S+/(ascend_ops/op_\w+/\w+\.cpp)$", run.stdout, re.M)}
    assert verdicts == {
        "ascend_ops/op_kernel/ascend_ops_batch_norm_reduce_backward.cpp": "OK",
        "ascend_ops/op_kernel/ascend_ops_fused_linear_cross_entropy_loss_grad.cpp": "FAIL",
        "ascend_ops/op_host/ascend_ops_batch_norm_reduce_backward.cpp": "FAIL",
        "ascend_ops/op_host/ascend_ops_fused_linear_cross_entropy_loss_grad.cpp": "FAIL"}, run.stdout
    assert "fused_linear_cross_entropy_loss_grad_g_stage.h: No such file" in run.stdout
    assert run.stdout.count("../../common/platform.h: No such file") == 2
