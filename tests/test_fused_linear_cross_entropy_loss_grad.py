"""fused_linear_cross_entropy_loss_grad: values of every implementation against the oracle."""

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.testing import FlceCase

import peak_memory
from conftest import assert_matches, clone_inputs

IMPLS = ["cpu", "reference", "sim"]
CASES = testing.flce_cases()


def check_case(case, impl):
    inputs = testing.flce_inputs(case)
    input_grad, weight_grad = ascend_ops.fused_linear_cross_entropy_loss_grad(
        **clone_inputs(inputs), impl=impl)
    assert input_grad.dtype == weight_grad.dtype == case.dtype
    assert input_grad.shape == (case.bt, case.h) and weight_grad.shape == (case.v, case.h)
    assert_matches((input_grad, weight_grad), testing.flce_oracle(inputs),
                   testing.flce_naive(inputs), case.name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cpu_matches_float64_reference(case, gemm_engine):
    check_case(case, "cpu")


MIXED_CASES = [c for c in CASES if c.dtype == torch.bfloat16][:6]


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_cpu_on_two_engines_matches_reference(mode, gemm_engine_pair):
    # One engine for the fp32-out products (logits, the input-gradient accumulator), another
    # for the rounded ones (weight_grad per chunk, or both over the softmax on onednn): each
    # pair's buffers and padding rules must agree. Many chunks, and the default budget.
    case = FlceCase(203, 45, 1000, torch.bfloat16, mode, masked_fraction=0.4, seed=5)
    inputs = testing.flce_inputs(case)
    oracle, naive = testing.flce_oracle(inputs), testing.flce_naive(inputs)
    for budget in (200 << 10, None):
        ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**clone_inputs(inputs),
                                                               scratch_bytes=budget)
        assert_matches(ours, oracle, naive, f"{gemm_engine_pair} budget {budget}")
    for small in MIXED_CASES:
        check_case(small, "cpu")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reference_matches_float64_reference(case):
    check_case(case, "reference")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_sim_matches_float64_reference(case):
    check_case(case, "sim")  # the Ascend C kernel on the CPU simulator


@pytest.mark.parametrize("impl", IMPLS)
def test_empty_batch_gives_zero_weight_grad(impl):
    inputs = testing.flce_inputs(FlceCase(0, 5, 11))
    input_grad, weight_grad = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl=impl)
    assert input_grad.shape == (0, 5)
    assert torch.equal(weight_grad, torch.zeros(11, 5, dtype=torch.bfloat16))


@pytest.mark.parametrize("impl", IMPLS)
def test_all_rows_masked_leaves_only_the_softmax_term(impl):
    # With every target elsewhere, G = P * grad: no -1 anywhere.
    case = FlceCase(16, 8, 24, masked_fraction=1.0)
    inputs = testing.flce_inputs(case)
    inputs["masked_target"] = torch.full((16,), 10_000)  # ignored on masked rows
    ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl=impl)
    inputs["masked_target"] = torch.zeros(16, dtype=torch.int64)
    assert_matches(ours, testing.flce_oracle(inputs))


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_both_mask_encodings_agree(mode):
    inputs = testing.flce_inputs(FlceCase(21, 9, 30, mode=mode, mask="bool"))
    packed = dict(inputs, target_mask=ascend_ops.pack_target_mask(inputs["target_mask"]))
    a = ascend_ops.fused_linear_cross_entropy_loss_grad(**clone_inputs(inputs))
    b = ascend_ops.fused_linear_cross_entropy_loss_grad(**clone_inputs(packed))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_packed_mask_may_be_longer_than_needed():
    inputs = testing.flce_inputs(FlceCase(13, 4, 20))
    longer = dict(inputs, target_mask=torch.cat([inputs["target_mask"], torch.zeros(3, dtype=torch.uint8)]))
    a = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)
    b = ascend_ops.fused_linear_cross_entropy_loss_grad(**longer)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_many_chunks_match_reference(mode, dtype, gemm_engine):
    # A 200 KiB budget cuts this call into many chunks (vocabulary chunks on the onednn and
    # avx512bf16 engines, row chunks on portable), so the GEMM that spans chunks accumulates
    # across them; 3 MiB cuts it into a few. (High-performance mode on onednn needs no
    # scratch: G goes over the softmax, whatever the budget.)
    case = FlceCase(203, 45, 1000, dtype, mode, masked_fraction=0.4, seed=3)
    inputs = testing.flce_inputs(case)
    oracle, naive = testing.flce_oracle(inputs), testing.flce_naive(inputs)
    for budget in (200 << 10, 3 << 20):
        ours = ascend_ops.fused_linear_cross_entropy_loss_grad(**clone_inputs(inputs),
                                                               scratch_bytes=budget)
        assert_matches(ours, oracle, naive, f"budget {budget}")


def test_scratch_budget_from_the_environment(monkeypatch):
    inputs = testing.flce_inputs(FlceCase(64, 16, 3000, seed=4))
    by_keyword = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, scratch_bytes=1 << 20)
    monkeypatch.setenv("ASCEND_OPS_FLCE_SCRATCH_MIB", "1")
    by_env = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)
    assert all(torch.equal(a, b) for a, b in zip(by_keyword, by_env))
    monkeypatch.setenv("ASCEND_OPS_FLCE_SCRATCH_MIB", "lots")
    with pytest.raises(ValueError, match="ASCEND_OPS_FLCE_SCRATCH_MIB must be a positive integer"):
        ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)


@pytest.mark.parametrize("bad", [0, -5])
def test_scratch_bytes_must_be_positive(bad):
    inputs = testing.flce_inputs(FlceCase(4, 4, 8))
    for impl in ("cpu", "reference", "sim"):
        with pytest.raises(ValueError, match="'scratch_bytes' must be a positive"):
            ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, scratch_bytes=bad, impl=impl)


def test_non_contiguous_inputs():
    inputs = testing.flce_inputs(FlceCase(12, 10, 40, dtype=torch.float16))
    strided = dict(inputs)
    strided["input"] = inputs["input"].T.contiguous().T  # same values, column-major
    strided["weight"] = inputs["weight"].T.contiguous().T
    assert not strided["input"].is_contiguous()
    a = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs)
    b = ascend_ops.fused_linear_cross_entropy_loss_grad(**strided)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("mode", [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE])
def test_deterministic_across_runs_and_thread_counts(mode, threads, gemm_engine):
    # Every engine: bitwise the same at a given thread count; the own GEMMs (avx512bf16,
    # avx2) sum each element in an order fixed by the shape, so also across thread counts.
    inputs = testing.flce_inputs(FlceCase(300, 64, 1000, mode=mode, seed=7))
    results = {1: [], 2: []}
    for n in (1, 2, 1, 2):
        torch.set_num_threads(n)
        results[n].append(ascend_ops.fused_linear_cross_entropy_loss_grad(**clone_inputs(inputs), impl="cpu"))
    pairs = [(results[1][0], results[1][1]), (results[2][0], results[2][1])]
    if gemm_engine in ("amx", "avx512bf16", "avx2"):
        pairs.append((results[1][0], results[2][0]))
    for a, b in pairs:
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def flce_peak_extra_mib(bt, h, v, scratch_bytes=0) -> float:
    """One memory-saving call's peak resident memory above its inputs (peak_memory), with
    `scratch_bytes` as its budget, or the default where 0."""
    budget = f", scratch_bytes={scratch_bytes}" if scratch_bytes else ""
    return peak_memory.peak_extra_mib(
        f"inputs = testing.flce_inputs(testing.FlceCase({bt}, {h}, {v}, torch.bfloat16, testing.MEMORY_SAVING))",
        f"ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs{budget})",
        drop_env=("ASCEND_OPS_FLCE_SCRATCH_MIB",))


def test_memory_saving_stays_within_budget(gemm_engine):
    # (BT, H, V) = (1024, 256, 32000): [BT, V] fp32 logits alone would be 125 MiB. Allowed:
    # the 8 MiB budget (the fp32 widenings of a chunk included), the outputs (16 MiB), the
    # fp32 input_grad accumulator and the fp32 copy of x (1 MiB each), and on portable the
    # fp32 copy of the weight and the fp32 weight_grad accumulator (31 MiB each); 8 MiB slack.
    bt, h, v = 1024, 256, 32000
    mib = 1 << 20
    allowed = 8 + (bt * h + v * h) * 2 / mib + 2 * bt * h * 4 / mib + 8
    if gemm_engine == "portable":
        allowed += 2 * v * h * 4 / mib
    peak = flce_peak_extra_mib(bt, h, v, 8 << 20)
    assert peak < allowed, f"{gemm_engine}: peak extra {peak:.0f} MiB > {allowed:.0f}"


def test_memory_saving_default_stays_within_half_the_logits(gemm_engine):
    # With no budget given, the whole call stays within its outputs plus half of the fp32
    # [BT, V] logits it never holds (BT * V * 2 bytes): 10 + 32 MiB here. The 64 MiB chunks
    # of the fixed default took ~78 MiB at this shape.
    bt, h, v = 2048, 512, 8192
    mib = 1 << 20
    allowed = (bt * h + v * h) * 2 / mib + bt * v * 2 / mib
    peak = flce_peak_extra_mib(bt, h, v)
    assert peak <= allowed, f"{gemm_engine}: peak extra {peak:.0f} MiB > {allowed:.0f}"


def logits_grad_as_spec(inputs, softmax):
    """SPEC §1's G from `softmax`: (P - onehot) * grad in fp32, rounded once to bf16."""
    masked = inputs["target_mask"]
    if masked.dtype == torch.uint8:
        bits = (masked[:, None] >> torch.arange(8, dtype=torch.uint8)) & 1
        masked = bits.flatten()[:softmax.size(0)].bool()
    p = softmax.clone()
    rows = torch.nonzero(~masked).flatten()
    p[rows, inputs["masked_target"][rows].long()] -= 1.0
    return (p * inputs["grad"][:, None]).bfloat16()


# High-performance shapes for the onednn engine, which writes G over the softmax in waves of
# rows: one row, one column, odd V (a word then holds the end of one G row and the start of
# the next), BT no power of two (a short last wave), and V wide enough that a wave's rows
# are shared among threads.
G_OVER_SOFTMAX_SHAPES = [(1, 5, 3), (6, 3, 1), (37, 19, 203), (100, 8, 4099)]


@pytest.mark.parametrize("shape", G_OVER_SOFTMAX_SHAPES, ids=str)
def test_high_performance_gradients_are_g_products_rounded_once(shape, gemm_engine, threads):
    """input_grad = bf16(G @ W) and weight_grad = bf16(G.T @ x), each within one bf16
    rounding of its float64 product plus fp32 accumulation error (a K split into bf16
    partial sums, or G read from overwritten softmax rows, is far outside); and the caller's
    softmax afterwards: G, dense, in its first BT·V·2 bytes on onednn, unchanged elsewhere."""
    bt, h, v = shape
    torch.set_num_threads(4)  # several threads per wave, on any machine
    inputs = testing.flce_inputs(FlceCase(bt, h, v, mode=testing.HIGH_PERFORMANCE, seed=bt + v))
    softmax = inputs["softmax"].clone()
    input_grad, weight_grad = ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl="cpu")
    g = logits_grad_as_spec(inputs, softmax)
    products = ((input_grad, g, inputs["weight"]), (weight_grad, g.T, inputs["input"]))
    for ours, a, b in products:
        exact = a.double() @ b.double()
        k = a.size(1)
        bound = exact.abs() * 2.0**-8 + (a.double().abs() @ b.double().abs()) * (k + 2) * 2.0**-24
        error = (ours.double() - exact).abs()
        assert bool((error <= bound + 1e-30).all()), f"worst error {float(error.max()):.3g}"
    if gemm_engine == "onednn":
        written = inputs["softmax"].view(torch.bfloat16).flatten()[:bt * v].view(bt, v)
        assert torch.equal(written, g)
    else:
        assert torch.equal(inputs["softmax"], softmax)
