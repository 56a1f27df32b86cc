"""The NPU adapter's registration, generated from the op yaml (runs without torch_npu):
which ops a torch_npu version gets, and the C++ signatures their schemas imply."""

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "op_plugin"))
import gen_registration  # noqa: E402

OPS = gen_registration.load_ops()[1]


def test_versions_parse_as_torch_npu_spells_them():
    assert gen_registration.parse_version("v2.13") == (2, 13)
    assert gen_registration.parse_version("2.13.0.post1") == (2, 13)
    assert gen_registration.version_macro((2, 13)) == "V2R13"  # op_plugin/utils/Version.h


def test_every_npu_op_names_its_aclnn_op_and_cann_release():
    npu = [op for op in OPS if "op_api" in op]
    assert {op["func"].split("(")[0] for op in npu} == {
        "fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward",
        "fused_linear_online_max_sum", "fused_cross_entropy_loss_with_max_sum"}
    for op in npu:
        assert op["aclnn"].startswith("aclnn") and op["cann"]


def test_custom_package_names_are_the_agreed_ones():
    # The contract with the Ascend C op package (ascendc_kernels/): vendor "ascend_ops",
    # op types prefixed AscendOps, never CANN's built-in names.
    custom = {op["func"].split("(")[0]: op["aclnn_custom"] for op in OPS if "aclnn_custom" in op}
    assert custom == {
        "fused_linear_cross_entropy_loss_grad": "aclnnAscendOpsFusedLinearCrossEntropyLossGrad",
        "batch_norm_reduce_backward": "aclnnAscendOpsBatchNormReduceBackward"}


@pytest.mark.parametrize("version, count", [((2, 12), 0), ((2, 13), 4), ((2, 15), 4)])
def test_ops_are_chosen_by_their_op_api_range(version, count):
    assert len(gen_registration.npu_ops(OPS, version)) == count


def test_a_closed_range_excludes_later_versions():
    op = {"func": "f(Tensor x) -> Tensor", "op_api": ["v2.1", "v2.5"]}
    assert gen_registration.npu_ops([op], (2, 5)) == [op]
    assert gen_registration.npu_ops([op], (2, 6)) == []


def test_kernel_signatures_follow_the_schemas():
    by_name = {op["func"].split("(")[0]: op for op in OPS}
    name, ret, params = gen_registration.cpp_signature(by_name["fused_linear_cross_entropy_loss_grad"])
    assert ret == "std::tuple<at::Tensor, at::Tensor>"
    assert "double label_smoothing" in params
    assert params.endswith("const std::optional<at::Tensor>& softmax, std::optional<int64_t> scratch_bytes")
    name, ret, params = gen_registration.cpp_signature(by_name["batch_norm_reduce_backward"])
    assert ret == "std::tuple<" + ", ".join(["std::optional<at::Tensor>"] * 4) + ">"
    assert params.endswith("bool input_g, bool weight_g, bool bias_g")


def test_a_schema_type_without_a_mapping_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"f: no C\+\+ type for argument sizes: List\[int\]"):
        gen_registration.cpp_signature({"func": "f(int[] sizes) -> Tensor"})


def test_generated_files(tmp_path):
    source, names = gen_registration.generate_npu(tmp_path, (2, 13))
    header = (tmp_path / "npu_ops.h").read_text()
    assert names == ["fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward",
                     "fused_linear_online_max_sum", "fused_cross_entropy_loss_with_max_sum"]
    assert ('k_fused_linear_cross_entropy_loss_grad{"aclnnFusedLinearCrossEntropyLossGrad", '
            '"9.0.0", false}') in header
    # The custom package's kernel: same signature, its own entry point, custom = true.
    assert ('k_fused_linear_cross_entropy_loss_grad_custom{'
            '"aclnnAscendOpsFusedLinearCrossEntropyLossGrad", "", true}') in header
    assert "std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad_custom(" in header
    assert '{"fused_linear_online_max_sum", &k_fused_linear_online_max_sum, nullptr},' in header
    assert '{"batch_norm_reduce_backward", &k_batch_norm_reduce_backward, ' \
        '&k_batch_norm_reduce_backward_custom},' in header
    assert "fused_linear_online_max_sum_custom" not in header
    registration = source.read_text()
    assert "TORCH_LIBRARY_IMPL(ascend_ops, PrivateUse1, m)" in registration
    for name in names:
        assert f'm.impl("{name}", TORCH_FN(ascend_ops::npu::{name}));' in registration


@pytest.mark.parametrize("mode, installed, plan, says", [
    ("auto", None, "skip", ""),
    ("auto", "2.13.0", "build", ""),
    ("auto", "2.13.0.post2", "build", ""),
    # torch_npu 2.12 (paired with CANN 8.5): the default install goes on without the adapter.
    ("auto", "2.12.0", "skip", "building without the NPU adapter: torch_npu 2.12.0 is installed"),
    ("1", "2.12.0", "fail", "ASCEND_OPS_NPU=1: torch_npu 2.12.0 is installed"),
    ("1", None, "fail", "ASCEND_OPS_NPU=1 but torch_npu is not installed"),
    ("0", "2.13.0", "skip", ""),
    ("yes", "2.13.0", "fail", "ASCEND_OPS_NPU must be auto, 0 or 1, got 'yes'"),
])
def test_npu_adapter_plan(mode, installed, plan, says):
    got, why = gen_registration.npu_adapter_plan(mode, installed)
    assert got == plan and why.startswith(says), (got, why)
    if plan == "skip" and installed == "2.12.0":
        assert "pip install torch-npu==2.13.0" in why
