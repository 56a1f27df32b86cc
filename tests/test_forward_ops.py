"""The forward companions (SPEC §3): values of every implementation against the float64
oracle, the reference against plain torch, chunking, determinism, bad input, torch.library."""

import pytest
import torch
import torch.nn.functional as F

import ascend_ops
from ascend_ops import testing
from ascend_ops.testing import LossCase, OnlineCase

import peak_memory
from conftest import assert_matches, call_on_fake_tensors

IMPLS = ["cpu", "reference"]


@pytest.mark.parametrize("case", testing.online_cases(), ids=lambda c: c.name)
def test_cpu_online_max_sum_matches_float64_reference(case, gemm_engine):
    check_online_case(case, "cpu")


@pytest.mark.parametrize("case", testing.online_cases(), ids=lambda c: c.name)
def test_reference_online_max_sum_matches_float64_reference(case):
    check_online_case(case, "reference")


def check_online_case(case, impl):
    inputs = testing.online_inputs(case)
    ours = ascend_ops.fused_linear_online_max_sum(**inputs, impl=impl)
    logits_max, sum_exp, predicted, target_mask, masked_target, logits = ours
    assert logits_max.dtype == sum_exp.dtype == predicted.dtype == torch.float32
    assert target_mask.dtype == torch.uint8 and target_mask.shape == ((case.bt + 7) // 8,)
    assert masked_target.dtype == case.target_dtype
    expected_logits_shape = (case.bt, case.v) if case.return_logits else (0,)
    assert logits.dtype == case.dtype and logits.shape == expected_logits_shape
    oracle = testing.online_oracle(inputs)
    if not case.return_logits:
        ours, oracle = ours[:5], oracle[:5]
    assert_matches(ours, oracle, testing.online_naive(inputs), case.name)


def test_target_mask_bits_are_lsb_first_with_padding_set():
    # 11 rows; rows 0, 3 and 9 hold their target in this shard [10, 20).
    target = torch.tensor([10, 0, 25, 19, 5, 20, 9, 30, 40, 15, 1])
    input, weight = torch.randn(11, 4).bfloat16(), torch.randn(10, 4).bfloat16()
    for impl in IMPLS:
        out = ascend_ops.fused_linear_online_max_sum(input, weight, target, 10, 20, impl=impl)
        # byte 0: rows 0..7 masked = 0,1,1,0,1,1,1,1 -> 0b11110110; byte 1: rows 8..10 = 1,0,1
        # + padding 1s (the shard does not own id 0; test_cann_golden.py covers one that does)
        assert out[3].tolist() == [0b11110110, 0b11111101]
        assert out[4].tolist() == [0, 0, 0, 9, 0, 0, 0, 0, 0, 5, 0]
        masked = ascend_ops.unpack_target_mask(out[3], 11)
        assert torch.equal(out[2][masked], torch.zeros(int(masked.sum())))


@pytest.mark.parametrize("shards", [1, 3])
def test_reference_statistics_give_cross_entropy(shards):
    # Local statistics of each shard, combined as SPEC §3 says, give F.cross_entropy.
    gen = torch.Generator().manual_seed(shards)
    bt, h, v = 19, 11, 23
    x = torch.randn(bt, h, generator=gen, dtype=torch.float64)
    w = torch.randn(shards * v, h, generator=gen, dtype=torch.float64)
    target = torch.randint(0, shards * v, (bt,), generator=gen)
    stats = [ascend_ops.reference.fused_linear_online_max_sum(
        x, w[r * v:(r + 1) * v], target, r * v, (r + 1) * v, compute_dtype=torch.float64)
        for r in range(shards)]
    m = torch.stack([s[0] for s in stats])
    global_max = m.amax(0)
    sum_exp = sum(s[1] * torch.exp(s[0] - global_max) for s in stats)
    predicted = sum(s[2] + (s[0] - global_max) * ~ascend_ops.unpack_target_mask(s[3], bt) for s in stats)
    loss, softmax = ascend_ops.reference.fused_cross_entropy_loss_with_max_sum(
        global_max, sum_exp, predicted, vocab_parallel_logits=x @ w.T, compute_dtype=torch.float64)
    torch.testing.assert_close(loss, F.cross_entropy(x @ w.T, target, reduction="none"))
    torch.testing.assert_close(softmax, torch.softmax(x @ w.T, dim=1))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", testing.loss_cases(), ids=lambda c: c.name)
def test_loss_matches_float64_reference(impl, case):
    inputs = testing.loss_inputs(case)
    loss, softmax = ascend_ops.fused_cross_entropy_loss_with_max_sum(**inputs, impl=impl)
    assert loss.dtype == softmax.dtype == torch.float32
    assert softmax.shape == ((0,) if case.logits_dtype is None else (case.bt, case.v))
    assert_matches((loss, softmax), testing.loss_oracle(inputs), testing.loss_naive(inputs), case.name)


def test_many_row_chunks_and_vocabulary_blocks(gemm_engine):
    # H = 64: a widened weight block is 16 MiB / 256 B = 65536 ids, so V = 140000 takes three
    # blocks, and a row chunk is 32 MiB / ((64 + 65536) * 4 B) = 127 rows, so 200 rows take
    # two chunks: the online rescaling across blocks and the chunk seams are exercised, with
    # 1.8 G multiply-adds (was 10 at (1000, 512, 20000): 250 s in CI's emulated aarch64 run).
    case = OnlineCase(200, 64, 140_000, torch.bfloat16, vocab_start=140_000, seed=4)
    inputs = testing.online_inputs(case)
    ours = ascend_ops.fused_linear_online_max_sum(**inputs, impl="cpu")
    assert_matches(ours[:5], testing.online_oracle(inputs)[:5], what=case.name)


@pytest.mark.parametrize("return_logits", [False, True])
def test_deterministic_across_runs_and_thread_counts(return_logits, threads, gemm_engine):
    # Every engine: bitwise the same at a given thread count; the own GEMM (and the
    # portable loops around any engine) also across thread counts.
    inputs = testing.online_inputs(OnlineCase(300, 64, 1000, return_logits=return_logits, seed=7))
    loss_inputs = testing.loss_inputs(LossCase(300, 1000, torch.bfloat16, seed=7))
    results = {1: [], 2: []}
    for n in (1, 2, 1, 2):
        torch.set_num_threads(n)
        results[n].append(ascend_ops.fused_linear_online_max_sum(**inputs, impl="cpu")
                          + ascend_ops.fused_cross_entropy_loss_with_max_sum(**loss_inputs, impl="cpu"))
    pairs = [(results[1][0], results[1][1]), (results[2][0], results[2][1])]
    if gemm_engine in ("amx", "avx512bf16", "avx2"):
        pairs.append((results[1][0], results[2][0]))
    for a, b in pairs:
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_an_empty_shard_loses_every_max():
    out = ascend_ops.fused_linear_online_max_sum(torch.randn(5, 3).half(), torch.randn(0, 3).half(),
                                                 torch.arange(5), 4, 4)
    assert torch.equal(out[0], torch.full((5,), -torch.inf)) and torch.equal(out[1], torch.zeros(5))
    assert torch.equal(out[2], torch.zeros(5)) and out[3].tolist() == [0xFF]


def online_base():
    return testing.online_inputs(OnlineCase(10, 8, 16, vocab_start=16))


# (id, changed arguments, error type, argument the message must name)
ONLINE_BAD = [
    ("input-float32", dict(input=torch.randn(10, 8)), TypeError, "input"),
    ("input-1d", dict(input=torch.randn(10).bfloat16()), ValueError, "input"),
    ("weight-dtype", dict(weight=torch.randn(16, 8).half()), TypeError, "weight"),
    ("weight-hidden", dict(weight=torch.randn(16, 9).bfloat16()), ValueError, "weight"),
    ("target-dtype", dict(target=torch.zeros(10)), TypeError, "target"),
    ("target-length", dict(target=torch.zeros(11, dtype=torch.int64)), ValueError, "target"),
    ("target-2d", dict(target=torch.zeros(10, 1, dtype=torch.int64)), ValueError, "target"),
    ("start-negative", dict(vocab_start_index=-1), ValueError, "vocab_start_index"),
    ("end-before-start", dict(vocab_end_index=15), ValueError, "vocab_end_index"),
    ("end-past-shard", dict(vocab_end_index=33), ValueError, "vocab_end_index"),
    ("device", dict(target=torch.zeros(10, dtype=torch.int64, device="meta")), ValueError, "target"),
]

LOSS_BAD = [
    ("max-dtype", dict(logits_max=torch.zeros(6).double()), TypeError, "logits_max"),
    ("max-2d", dict(logits_max=torch.zeros(6, 1)), ValueError, "logits_max"),
    ("sum-length", dict(sum_exp_logits=torch.ones(5)), ValueError, "sum_exp_logits"),
    ("predicted-dtype", dict(predicted_logits=torch.zeros(6).half()), TypeError, "predicted_logits"),
    ("label-smoothing", dict(label_smoothing=0.1), ValueError, "label_smoothing"),
    ("input-given", dict(input=torch.zeros(6, 2)), ValueError, "input"),
    ("weight-given", dict(weight=torch.zeros(3, 2)), ValueError, "weight"),
    ("logits-dtype", dict(vocab_parallel_logits=torch.zeros(6, 3, dtype=torch.int32)), TypeError,
     "vocab_parallel_logits"),
    ("logits-rows", dict(vocab_parallel_logits=torch.zeros(5, 3)), ValueError, "vocab_parallel_logits"),
    ("logits-1d", dict(vocab_parallel_logits=torch.zeros(6)), ValueError, "vocab_parallel_logits"),
]


def loss_base():
    return testing.loss_inputs(LossCase(6, 3))


def check_message(error, op, arg):
    message = str(error.value)
    assert message.startswith(op) and f"'{arg}'" in message and "got" in message, message


@pytest.mark.parametrize("impl", [*IMPLS, "fake"])
@pytest.mark.parametrize("rule", ONLINE_BAD, ids=lambda r: r[0])
def test_online_bad_input(impl, rule):
    name, change, error_type, arg = rule
    inputs = dict(online_base(), **change)
    with pytest.raises(error_type) as error:
        if impl == "fake":
            call_on_fake_tensors(torch.ops.ascend_ops.fused_linear_online_max_sum, inputs)
        else:
            ascend_ops.fused_linear_online_max_sum(**inputs, impl=impl)
    check_message(error, "fused_linear_online_max_sum", arg)


@pytest.mark.parametrize("impl", [*IMPLS, "fake"])
@pytest.mark.parametrize("rule", LOSS_BAD, ids=lambda r: r[0])
def test_loss_bad_input(impl, rule):
    name, change, error_type, arg = rule
    inputs = dict(loss_base(), **change)
    with pytest.raises(error_type) as error:
        if impl == "fake":
            call_on_fake_tensors(torch.ops.ascend_ops.fused_cross_entropy_loss_with_max_sum, inputs)
        else:
            ascend_ops.fused_cross_entropy_loss_with_max_sum(**inputs, impl=impl)
    check_message(error, "fused_cross_entropy_loss_with_max_sum", arg)


@pytest.mark.parametrize("case", [OnlineCase(19, 12, 40, torch.bfloat16, vocab_start=40),
                                  OnlineCase(8, 5, 33, torch.float16, True, torch.int32)],
                         ids=lambda c: c.name)
def test_opcheck_online(case):
    torch.library.opcheck(torch.ops.ascend_ops.fused_linear_online_max_sum.default, (),
                          testing.online_inputs(case))


@pytest.mark.parametrize("case", [LossCase(9, 13), LossCase(7, 5, None)], ids=lambda c: c.name)
def test_opcheck_loss(case):
    inputs = testing.loss_inputs(case)
    args = (inputs.pop("logits_max"), inputs.pop("sum_exp_logits"), inputs.pop("predicted_logits"))
    torch.library.opcheck(torch.ops.ascend_ops.fused_cross_entropy_loss_with_max_sum.default, args,
                          inputs)


def test_compile_fullgraph_forward_with_dynamic_shapes():
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, dynamic=True)
    def losses(input, weight, target):
        m, s, p, mask, masked_target, logits = ascend_ops.fused_linear_online_max_sum(
            input, weight, target, 0, weight.shape[0], True)
        loss, softmax = ascend_ops.fused_cross_entropy_loss_with_max_sum(
            m, s, p, vocab_parallel_logits=logits)
        return loss * 2, softmax, mask

    for bt in (12, 21):
        inputs = testing.online_inputs(OnlineCase(bt, 8, 30, return_logits=True, vocab_start=0))
        m, s, p, mask, _, logits = ascend_ops.fused_linear_online_max_sum(**inputs)
        loss, softmax = ascend_ops.fused_cross_entropy_loss_with_max_sum(
            m, s, p, vocab_parallel_logits=logits)
        compiled = losses(inputs["input"], inputs["weight"], inputs["target"])
        assert torch.equal(compiled[0], loss * 2) and torch.equal(compiled[1], softmax)
        assert torch.equal(compiled[2], mask)


def test_memory_saving_forward_never_holds_bt_by_v(gemm_engine):
    # [BT, V] float32 logits would be 4096 * 32000 * 4 B = 500 MiB; the kernel's row chunks
    # of 32 MiB / ((64 + 32000) * 4 B) = 261 rows keep it near 33 MiB (+ the widened block).
    peak_extra_mib = peak_memory.peak_extra_mib(
        "bt, h, v = 4096, 64, 32000\n"
        "x, w = torch.randn(bt, h).bfloat16(), torch.randn(v, h).bfloat16()\n"
        "t = torch.randint(0, v, (bt,))",
        "ascend_ops.fused_linear_online_max_sum(x, w, t, 0, v)")
    assert peak_extra_mib < 120, f"peak extra memory {peak_extra_mib:.0f} MiB"  # measured: ~40


@pytest.mark.parametrize("rule", ONLINE_BAD, ids=lambda r: r[0])
def test_online_python_checks_match_the_native_ones(rule):
    from test_validation import checks_agree

    name, change, error_type, arg = rule
    inputs = dict(online_base(), **change)
    inputs.pop("return_logits")
    checks_agree("check_fused_linear_online_max_sum", *inputs.values())


@pytest.mark.parametrize("rule", LOSS_BAD, ids=lambda r: r[0])
def test_loss_python_checks_match_the_native_ones(rule):
    from test_validation import checks_agree

    name, change, error_type, arg = rule
    inputs = dict(loss_base(), **change)
    checks_agree("check_fused_cross_entropy_loss_with_max_sum", inputs["logits_max"],
                 inputs["sum_exp_logits"], inputs["predicted_logits"], inputs["label_smoothing"],
                 inputs.get("input"), inputs.get("weight"), inputs.get("vocab_parallel_logits"))
