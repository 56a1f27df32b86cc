"""Sample inputs and SPEC §4 tolerances, shared by the tests and the parity table.

One generator feeds every check: `flce_cases()` / `bn_cases()` list named cases, and
`flce_inputs(case)` / `bn_inputs(case)` build their tensors deterministically.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass, field

import torch

from .masks import pack_target_mask
from .reference import batch_norm_reduce_backward as _bn_reference
from .reference import fused_cross_entropy_loss_with_max_sum as _loss_reference
from .reference import fused_linear_cross_entropy_loss_grad as _flce_reference
from .reference import fused_linear_online_max_sum as _online_reference

__all__ = [
    "FlceCase", "BnCase", "flce_cases", "bn_cases", "flce_inputs", "bn_inputs",
    "Comparison", "compare", "tolerance", "norm_tolerance", "assert_half_grad_close", "flce_oracle", "bn_oracle",
    "OnlineCase", "online_cases", "online_inputs", "online_oracle", "online_naive",
    "LossCase", "loss_cases", "loss_inputs", "loss_oracle", "loss_naive",
]

MEMORY_SAVING = "memory-saving"
HIGH_PERFORMANCE = "high-performance"


@dataclass(frozen=True)
class FlceCase:
    bt: int
    h: int
    v: int
    dtype: torch.dtype = torch.bfloat16
    mode: str = MEMORY_SAVING
    mask: str = "packed"  # or "bool"
    target_dtype: torch.dtype = torch.int64
    masked_fraction: float = 0.3
    seed: int = 0

    @property
    def name(self) -> str:
        dt = str(self.dtype).removeprefix("torch.")
        return f"bt{self.bt}-h{self.h}-v{self.v}-{dt}-{self.mode}-{self.mask}"


@dataclass(frozen=True)
class BnCase:
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    mean_dtype: torch.dtype = torch.float32
    mean_offset: float = 0.0  # shifts input and mean together: |mean| >> std when large
    channels_last: bool = False
    seed: int = 0

    @property
    def name(self) -> str:
        dt = str(self.dtype).removeprefix("torch.")
        shift = f"-mean{self.mean_offset:g}" if self.mean_offset else ""
        return f"{'x'.join(map(str, self.shape))}-{dt}{shift}"


def flce_cases(dtypes=(torch.float16, torch.bfloat16)) -> list[FlceCase]:
    """Odd sizes, both modes, both mask encodings, both target dtypes, and empties."""
    cases = []
    for dtype in dtypes:
        for mode in (MEMORY_SAVING, HIGH_PERFORMANCE):
            cases += [
                FlceCase(37, 65, 203, dtype, mode, "packed", torch.int64),
                FlceCase(64, 128, 256, dtype, mode, "bool", torch.int32, seed=1),
                FlceCase(13, 1, 129, dtype, mode, "packed", torch.int32, seed=2),  # H = 1
                FlceCase(9, 33, 7, dtype, mode, "bool", torch.int64, masked_fraction=1.0),
                FlceCase(0, 16, 40, dtype, mode, "packed", torch.int64),  # BT = 0
            ]
    return cases


def bn_cases(dtypes=(torch.float32, torch.float16, torch.bfloat16)) -> list[BnCase]:
    cases = []
    for dtype in dtypes:
        cases += [
            BnCase((4, 3, 5, 7), dtype, dtype),
            BnCase((3, 17, 33), dtype, torch.float32, seed=1),
            BnCase((65, 5), dtype, dtype, seed=2),
            BnCase((2, 3, 2, 3, 2, 3, 2, 2), dtype, dtype, seed=3),  # 8 dims
            BnCase((4, 6, 9, 9), dtype, torch.float32, mean_offset=1000.0, seed=4),
            BnCase((0, 4, 3), dtype, dtype),  # N = 0
            BnCase((2, 4, 0, 3), dtype, dtype),  # a spatial dim of 0
        ]
    return cases


@dataclass(frozen=True)
class OnlineCase:
    """fused_linear_online_max_sum on a shard [vocab_start, vocab_start + v) of a vocabulary
    of `vocab` ids (targets drawn from all of it, so some rows are masked)."""

    bt: int
    h: int
    v: int
    dtype: torch.dtype = torch.bfloat16
    return_logits: bool = False
    target_dtype: torch.dtype = torch.int64
    vocab_start: int = 0
    vocab: int | None = None  # default: 3 shards' worth
    seed: int = 0

    @property
    def name(self) -> str:
        dt = str(self.dtype).removeprefix("torch.")
        logits = "-logits" if self.return_logits else ""
        return f"bt{self.bt}-h{self.h}-v{self.v}-start{self.vocab_start}-{dt}{logits}"


@dataclass(frozen=True)
class LossCase:
    """fused_cross_entropy_loss_with_max_sum; `logits_dtype` None: no softmax asked for."""

    bt: int
    v: int
    logits_dtype: torch.dtype | None = torch.float32
    seed: int = 0

    @property
    def name(self) -> str:
        dt = "none" if self.logits_dtype is None else str(self.logits_dtype).removeprefix("torch.")
        return f"bt{self.bt}-v{self.v}-logits-{dt}"


def online_cases(dtypes=(torch.float16, torch.bfloat16)) -> list[OnlineCase]:
    """Odd sizes, both target dtypes, a shard in the middle, H = 1, V = 1, BT = 0."""
    cases = []
    for dtype in dtypes:
        for logits in (False, True):
            cases += [
                OnlineCase(37, 65, 203, dtype, logits, torch.int64, vocab_start=203),
                OnlineCase(64, 128, 256, dtype, logits, torch.int32, vocab_start=0, seed=1),
                OnlineCase(13, 1, 129, dtype, logits, torch.int32, vocab_start=258, seed=2),
                OnlineCase(9, 33, 1, dtype, logits, torch.int64, vocab_start=1, vocab=3, seed=3),
                OnlineCase(0, 16, 40, dtype, logits, torch.int64),
            ]
    return cases


def loss_cases(dtypes=(torch.float32, torch.float16, torch.bfloat16)) -> list[LossCase]:
    cases = []
    for dtype in dtypes:
        cases += [LossCase(37, 203, dtype), LossCase(64, 7, dtype, seed=1),
                  LossCase(0, 11, dtype)]
    return cases + [LossCase(29, 50, None, seed=2)]


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def flce_inputs(case: FlceCase) -> dict[str, torch.Tensor | float | None]:
    """Keyword arguments of fused_linear_cross_entropy_loss_grad for `case`.

    logits_max and sum_exp_logits are global statistics: the local ones combined with a
    random contribution of the other shards, so P sums to less than 1 over this shard.
    """
    gen = _generator(case.seed)
    bt, h, v = case.bt, case.h, case.v
    input = (torch.randn(bt, h, generator=gen) / math.sqrt(h)).to(case.dtype)
    weight = (torch.randn(v, h, generator=gen) * 2.0).to(case.dtype)
    masked = torch.rand(bt, generator=gen) < case.masked_fraction
    masked_target = torch.randint(0, max(v, 1), (bt,), generator=gen)
    masked_target[masked] = 0
    masked_target = masked_target.to(case.target_dtype)
    grad = torch.rand(bt, generator=gen) + 0.5

    logits = input.double() @ weight.double().T
    local_max = logits.amax(dim=1) if v else torch.zeros(bt, dtype=torch.float64)
    other_max = local_max + torch.randn(bt, generator=gen, dtype=torch.float64)
    global_max = torch.maximum(local_max, other_max)
    sum_exp = torch.exp(logits - global_max[:, None]).sum(dim=1)
    sum_exp = sum_exp + torch.rand(bt, generator=gen, dtype=torch.float64) * v * 0.5
    logits_max, sum_exp_logits = global_max.float(), sum_exp.float()

    softmax = None
    if case.mode == HIGH_PERFORMANCE:
        softmax = (torch.exp(logits - global_max[:, None]) / sum_exp[:, None]).float()
        logits_max = sum_exp_logits = None
    target_mask = pack_target_mask(masked) if case.mask == "packed" else masked
    return dict(grad=grad, input=input, weight=weight, target_mask=target_mask,
                masked_target=masked_target, label_smoothing=0.0, logits_max=logits_max,
                sum_exp_logits=sum_exp_logits, softmax=softmax)


def bn_inputs(case: BnCase) -> dict[str, torch.Tensor | bool | None]:
    """Positional-order keyword arguments of batch_norm_reduce_backward, all flags on."""
    gen = _generator(case.seed)
    c = case.shape[1]
    input = torch.randn(case.shape, generator=gen, dtype=torch.float64) + case.mean_offset
    grad_out = torch.randn(case.shape, generator=gen, dtype=torch.float64)
    dims = [d for d in range(len(case.shape)) if d != 1]
    if input.numel():
        mean = input.mean(dims)
        invstd = (input.var(dims, unbiased=False) + 1e-5).rsqrt()
    else:
        mean, invstd = torch.zeros(c, dtype=torch.float64), torch.ones(c, dtype=torch.float64)
    input, grad_out = input.to(case.dtype), grad_out.to(case.dtype)
    if case.channels_last and input.dim() == 4:
        input = input.contiguous(memory_format=torch.channels_last)
        grad_out = grad_out.contiguous(memory_format=torch.channels_last)
    return dict(grad_out=grad_out, input=input, mean=mean.to(case.mean_dtype),
                invstd=invstd.to(case.mean_dtype), weight=torch.rand(c, generator=gen),
                input_g=True, weight_g=True, bias_g=True)


def online_inputs(case: OnlineCase) -> dict:
    """Arguments of fused_linear_online_max_sum for `case`."""
    gen = _generator(case.seed)
    vocab = case.vocab if case.vocab is not None else 3 * case.v
    input = (torch.randn(case.bt, case.h, generator=gen) / math.sqrt(max(case.h, 1)) * 4).to(case.dtype)
    weight = torch.randn(case.v, case.h, generator=gen).to(case.dtype)
    target = torch.randint(0, vocab, (case.bt,), generator=gen).to(case.target_dtype)
    return dict(input=input, weight=weight, target=target, vocab_start_index=case.vocab_start,
                vocab_end_index=case.vocab_start + case.v, return_logits=case.return_logits)


def online_oracle(inputs: dict) -> tuple[torch.Tensor, ...]:
    return _online_reference(**inputs, compute_dtype=torch.float64)


# torch on an aarch64 CPU without BF16 instructions (a Kunpeng 920; qemu's Neoverse N1 in CI)
# hands a bfloat16 matmul to oneDNN, which refuses it, and computes it with its BLAS GEMM after
# a UserWarning carrying a C++ backtrace (ATen/native/LinearAlgebra.cpp, torch 2.13). That GEMM
# is what plain torch computes there, so the naive baseline below is right either way; the
# warning only buried `python -m ascend_ops`'s report on an Atlas host.
_TORCH_MATMUL_FALLBACK = "mkldnn_matmul failed, switching to BLAS gemm"


@contextlib.contextmanager
def _without_torch_matmul_fallback_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_TORCH_MATMUL_FALLBACK, category=UserWarning)
        yield


def online_naive(inputs: dict) -> tuple[torch.Tensor, ...]:
    with _without_torch_matmul_fallback_warning():
        return _online_reference(**inputs, compute_dtype=inputs["input"].dtype)


def loss_inputs(case: LossCase) -> dict:
    """Global statistics consistent with some logits (S >= 1, P <= 0) and those logits."""
    gen = _generator(case.seed)
    logits = torch.randn(case.bt, case.v, generator=gen, dtype=torch.float64) * 3
    global_max = logits.amax(dim=1) if case.v else torch.zeros(case.bt, dtype=torch.float64)
    # Other shards hold the max of some rows and add to every sum.
    global_max = global_max + torch.rand(case.bt, generator=gen, dtype=torch.float64)
    sum_exp = torch.exp(logits - global_max[:, None]).sum(dim=1) + torch.rand(
        case.bt, generator=gen, dtype=torch.float64) * case.v
    predicted = logits[:, 0] - global_max if case.v else torch.zeros(case.bt, dtype=torch.float64)
    vocab_parallel_logits = None if case.logits_dtype is None else logits.to(case.logits_dtype)
    return dict(logits_max=global_max.float(), sum_exp_logits=sum_exp.float(),
                predicted_logits=predicted.float(), label_smoothing=0.0,
                vocab_parallel_logits=vocab_parallel_logits)


def loss_oracle(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    return _loss_reference(**inputs, compute_dtype=torch.float64)


def loss_naive(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    return _loss_reference(**inputs)


def flce_oracle(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 reference of SPEC §1's math (outputs in float64, unrounded)."""
    return _flce_reference(**inputs, compute_dtype=torch.float64)


def flce_naive(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC §1's formula run in plain torch at the input dtype (SPEC §4's 'torch_naive')."""
    with _without_torch_matmul_fallback_warning():
        return _flce_reference(**inputs, compute_dtype=inputs["input"].dtype)


def bn_oracle(inputs: dict) -> tuple[torch.Tensor | None, ...]:
    return _bn_reference(**inputs, compute_dtype=torch.float64)


def bn_naive(inputs: dict) -> tuple[torch.Tensor | None, ...]:
    return _bn_reference(**inputs, compute_dtype=inputs["input"].dtype)


def tolerance(dtype: torch.dtype, reference: torch.Tensor) -> tuple[float, float]:
    """(atol, rtol) of SPEC §4's element-wise bound for outputs of `dtype` compared with
    `reference`."""
    if dtype == torch.float16:
        return 1e-3, 2.0**-7
    if dtype == torch.bfloat16:
        return 8e-3, 2.0**-6
    if dtype == torch.float32:
        scale = reference.abs().max().item() if reference.numel() else 0.0
        return 1e-5 * scale, 1e-5
    raise ValueError(f"tolerance: no SPEC tolerance for outputs of {dtype}")


def norm_tolerance(dtype: torch.dtype) -> float:
    """SPEC §4's bound on ‖ours − reference‖₂ / ‖reference‖₂, per output.

    The element-wise bound alone lets small outputs pass whatever they hold: bfloat16
    weight_grad values of ~8e-4 sit far inside its atol of 8e-3. Rounding an exact result
    to the output dtype moves each element by at most half an ulp (2**-9 of it in
    bfloat16, 2**-11 in float16), so the norm-relative error of a correct result stays below
    that; the bound adds 40 % (bfloat16: 2**-8.5 = 2.8e-3) or 100 % (float16: 2**-10) for
    one-ulp flips of the rounded logits gradient. A 5 % error in an output, or a
    weight_grad whose softmax term is off by 10 %, is 3.4e-3 or more on every sample case.
    """
    if dtype == torch.float16:
        return 2.0**-10
    if dtype == torch.bfloat16:
        return 2.0**-8.5
    if dtype == torch.float32:
        return 1e-5
    raise ValueError(f"norm_tolerance: no SPEC tolerance for outputs of {dtype}")


@dataclass
class Comparison:
    """One output compared with the float64 reference."""

    max_abs_error: float
    max_rel_error: float
    passed: bool
    message: str = field(default="")
    norm_rel_error: float = 0.0  # ‖ours − reference‖₂ / ‖reference‖₂


def compare(ours: torch.Tensor, oracle: torch.Tensor, naive: torch.Tensor | None = None,
            dtype: torch.dtype | None = None) -> Comparison:
    """SPEC §4, two bounds that must both hold:

    - element-wise, |ours − oracle| ≤ atol + rtol·|oracle| everywhere, and no worse than
      `naive` (plain torch at the input dtype) by more than atol;
    - for the output as a whole, ‖ours − oracle‖₂ ≤ norm_tolerance(dtype)·‖oracle‖₂, which
      catches an error of a few percent in outputs whose elements are all below atol.

    The message names the worst element, its index and both values, and the norm error.
    """
    dtype = dtype or ours.dtype
    if ours.shape != oracle.shape:
        return Comparison(math.inf, math.inf, False, f"shape {tuple(ours.shape)} != {tuple(oracle.shape)}")
    if not ours.dtype.is_floating_point:  # masks and indices: exact
        same = ours.dtype == oracle.dtype and torch.equal(ours, oracle)
        return Comparison(0.0 if same else math.inf, 0.0 if same else math.inf, same,
                          "" if same else f"{ours.dtype} values differ from the reference's {oracle.dtype}")
    if ours.numel() == 0:
        return Comparison(0.0, 0.0, True)
    atol, rtol = tolerance(dtype, oracle)
    ours64, oracle64 = ours.double(), oracle.double()
    error = (ours64 - oracle64).abs()
    excess = error - (atol + rtol * oracle64.abs())
    if naive is not None:
        excess = torch.maximum(excess, error - (naive.double() - oracle64).abs() - atol)
    excess = torch.nan_to_num(excess, nan=math.inf)
    worst = int(excess.argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), ours.shape))
    max_abs = float(error.max())
    max_rel = float((error / oracle64.abs().clamp_min(atol or 1e-30)).max())
    norm_rel = _norm_rel_error(error, oracle64)
    norm_passed = norm_rel <= norm_tolerance(dtype)
    passed = bool(excess.max() <= 0) and norm_passed
    message = (f"worst element {index}: ours {ours64.flatten()[worst].item():.6g}, "
               f"reference {oracle64.flatten()[worst].item():.6g} "
               f"(atol {atol:.3g}, rtol {rtol:.3g}); "
               f"norm error {norm_rel:.3g} of ‖reference‖ (bound {norm_tolerance(dtype):.3g})")
    return Comparison(max_abs, max_rel, passed, message, norm_rel)


#: The norm bound of `assert_half_grad_close`: gradients of a whole bfloat16/float16 LM
#: head against float64 autograd of plain torch. The largest error measured on the test
#: problems (tests/test_linear_cross_entropy.py, tests/test_distributed.py) is 7.1e-3 of
#: the norm (bfloat16, input grad summed over 3 ranks); 2**-6 = 1.6e-2 leaves 2.2x above
#: it and sits 3x below a 5 % error in the output.
HALF_GRAD_NORM_TOLERANCE = 2.0**-6


def assert_half_grad_close(ours: torch.Tensor, truth: torch.Tensor, what: str) -> None:
    """Half-precision gradients against float64 autograd of plain torch.

    SPEC §1 rounds the logits gradient to the half dtype before the GEMMs, so an element's
    error scales with the largest gradient, not with the element: within 2**-5 of
    max|truth| (a wrong rescaling across ranks is off by O(1)). That bound alone lets a
    small output pass whatever it holds, so the error relative to the output's own norm
    must also stay below HALF_GRAD_NORM_TOLERANCE.
    """
    ours, truth = ours.double(), truth.double()
    atol = 2**-5 * max(truth.abs().max().item(), 1e-3)
    error = (ours - truth).abs()
    worst = int(error.argmax()) if error.numel() else 0
    assert bool((error <= atol + 2**-6 * truth.abs()).all()), (
        f"{what}: worst element {worst}: ours {ours.flatten()[worst].item():.6g}, "
        f"truth {truth.flatten()[worst].item():.6g}, atol {atol:.3g}")
    norm_error = _norm_rel_error(error, truth)
    assert norm_error <= HALF_GRAD_NORM_TOLERANCE, (
        f"{what}: ‖ours − truth‖ is {norm_error:.3g} of ‖truth‖, above "
        f"{HALF_GRAD_NORM_TOLERANCE:.3g}")


def _norm_rel_error(error: torch.Tensor, oracle: torch.Tensor) -> float:
    """‖error‖₂ / ‖oracle‖₂; an all-zero oracle needs an all-zero error (0 or inf)."""
    error_norm = float(torch.linalg.vector_norm(torch.nan_to_num(error, nan=math.inf)))
    oracle_norm = float(torch.linalg.vector_norm(oracle))
    if oracle_norm == 0.0:
        return 0.0 if error_norm == 0.0 else math.inf
    return error_norm / oracle_norm
