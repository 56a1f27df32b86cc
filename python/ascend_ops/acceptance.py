"""The first-run acceptance check for an Atlas machine (`python -m ascend_ops` runs it when
an NPU is visible; docs/npu.md: the first command to run on hardware).

CANN's own system tests of aclnnFusedLinearCrossEntropyLossGrad run only its
high-performance mode with a bool mask, bfloat16, int32 targets and V <= 257. The paths
ascend_ops trains on by default were never run numerically on an NPU before yours:
memory-saving mode, the bit-packed uint8 mask, int64 targets, vocabulary shards in the
tens of thousands, thousands of rows. Each row here runs one of them on the NPU and
compares it with the CPU kernel (impl="cpu") on the same inputs.

A row passes when every output agrees with the CPU kernel's within twice SPEC §4's
tolerance (both sides are held to it against float64), element-wise and in norm; a
refusal row passes when the adapter refuses the shape up front with its documented
message. Each row says who it concerns: a failed row marked "don't train yet" is on a
path the training API takes by default (or that its note names), and means: report it
(with the row's message) before training on this machine.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import torch

from . import testing
from .npu import limits as npu_limits

__all__ = ["AcceptanceCase", "AcceptanceRow", "AcceptanceResult", "acceptance_cases",
           "run_acceptance", "format_acceptance", "verdict", "run", "report"]


@dataclasses.dataclass(frozen=True)
class AcceptanceCase:
    name: str
    impl: str          # "npu" or "npu_custom": the side under test
    run: Callable      # run(impl, device) -> tuple of outputs (CPU tensors or None)
    blocking: str      # who must not train yet when it fails ("" = nobody)
    expect_refusal: str = ""  # the start of the NotImplementedError expected instead


@dataclasses.dataclass
class AcceptanceRow:
    case: AcceptanceCase
    status: str        # "pass", "FAIL", "skipped"
    detail: str
    seconds: float

    @property
    def stops_training(self) -> bool:
        return self.status == "FAIL" and bool(self.case.blocking)


def _to(device, value):
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _flce(case: testing.FlceCase) -> Callable:
    def run(impl, device):
        inputs = {k: _to(device, v) for k, v in testing.flce_inputs(case).items()}
        if inputs["softmax"] is not None:
            inputs["softmax"] = inputs["softmax"].clone()  # may be used as scratch
        from . import ops

        return ops.fused_linear_cross_entropy_loss_grad(**inputs, impl=impl)
    return run


def _online(bt: int, h: int, v: int, start: int, dtype=torch.bfloat16) -> Callable:
    def run(impl, device):
        gen = torch.Generator().manual_seed(bt + v)
        input = (torch.randn(bt, h, generator=gen) / h**0.5).to(dtype)
        weight = torch.randn(v, h, generator=gen).to(dtype)
        target = torch.randint(0, 3 * v, (bt,), generator=gen)  # int64 global ids
        from . import ops

        return ops.fused_linear_online_max_sum(input.to(device), weight.to(device),
                                               target.to(device), start, start + v, impl=impl)[:5]
    return run


def _bn(case: testing.BnCase) -> Callable:
    def run(impl, device):
        inputs = {k: _to(device, v) for k, v in testing.bn_inputs(case).items()}
        from . import ops

        return ops.batch_norm_reduce_backward(**inputs, impl=impl)
    return run


def _training_step(bt: int, h: int, v: int, mode: str) -> Callable:
    """nn.LinearCrossEntropyLoss forward and backward, one process: (loss, dx, dw)."""
    def run(impl, device):
        from .training.nn import LinearCrossEntropyLoss

        gen = torch.Generator().manual_seed(v)
        x = (torch.randn(bt, h, generator=gen) / h**0.5).bfloat16().to(device).requires_grad_()
        w = torch.randn(v, h, generator=gen).bfloat16().to(device).requires_grad_()
        target = torch.randint(0, v, (bt,), generator=gen)
        target[::7] = -100
        loss = LinearCrossEntropyLoss(mode=mode)(x, w, target.to(device))
        loss.backward()
        return loss.detach().float(), x.grad, w.grad
    return run


def _sync_batch_norm(offset: float, dtype: torch.dtype = torch.float32) -> Callable:
    """nn.SyncBatchNorm forward and backward in one process, |mean| = offset, the layer and
    its input in `dtype` (as model.half() / model.bfloat16() leaves them)."""
    def run(impl, device):
        from .training.nn import SyncBatchNorm

        gen = torch.Generator().manual_seed(5)
        x = (torch.randn(16, 8, 12, 12, generator=gen) + offset).to(dtype).to(device).requires_grad_()
        g = torch.randn(x.shape, generator=gen).to(dtype).to(device)
        bn = SyncBatchNorm(8).to(device=device, dtype=dtype)
        y = bn(x)
        y.backward(g)
        return y.detach(), x.grad, bn.weight.grad, bn.bias.grad, bn.running_mean, bn.running_var
    return run


def acceptance_cases(vocab: int = 32000, rows: int = 2048, hidden: int = 256) -> list[AcceptanceCase]:
    """The rows, with V = `vocab` (a 32000-id vocabulary on one rank) and BT = `rows`."""
    limit = npu_limits.builtin_limits()["flce_grad_high_perf_max_vocab"]
    ms, hp = testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE
    default = "don't train yet"
    cases = [
        AcceptanceCase(f"FLCE grad npu memory-saving packed-uint8 int64 bf16 V={vocab} BT={rows}",
                       "npu", _flce(testing.FlceCase(rows, hidden, vocab, torch.bfloat16, ms, "packed")),
                       default),
        AcceptanceCase(f"FLCE grad npu memory-saving packed-uint8 int64 fp16 V={vocab} BT={rows}",
                       "npu", _flce(testing.FlceCase(rows, hidden, vocab, torch.float16, ms, "packed", seed=1)),
                       "don't train in float16 yet"),
        AcceptanceCase(f"FLCE grad npu memory-saving bool int32 bf16 V={vocab} BT={rows}",
                       "npu", _flce(testing.FlceCase(rows, hidden, vocab, torch.bfloat16, ms, "bool",
                                                     torch.int32, seed=2)),
                       "don't pass bool masks or int32 targets yet"),
        AcceptanceCase(f"FLCE grad npu high-performance packed-uint8 int64 bf16 V={limit} (the limit) "
                       f"BT={rows // 2}", "npu",
                       _flce(testing.FlceCase(rows // 2, hidden, limit, torch.bfloat16, hp, "packed", seed=3)),
                       "don't train with mode='high-performance' yet"),
        AcceptanceCase(f"FLCE grad npu high-performance V={limit + 1} refused up front", "npu",
                       _flce(testing.FlceCase(16, 64, limit + 1, torch.bfloat16, hp, "packed")),
                       "don't train with mode='high-performance' yet",
                       expect_refusal="fused_linear_cross_entropy_loss_grad: CANN's built-in"),
        AcceptanceCase(f"online max-sum npu int64 bf16 V={vocab} BT={rows}", "npu",
                       _online(rows, hidden, vocab, vocab), default),
        AcceptanceCase(f"training step npu memory-saving bf16 V={vocab} BT={rows}", "npu",
                       _training_step(rows, hidden, vocab, ms), default),
        AcceptanceCase("batch_norm_reduce_backward npu fp32 [32, 64, 14, 14]", "npu",
                       _bn(testing.BnCase((32, 64, 14, 14), torch.float32, torch.float32, seed=6)),
                       "don't train with SyncBatchNorm yet"),
        AcceptanceCase("SyncBatchNorm npu fp32 |mean| = 1000 (centred before CANN's reduction)",
                       "npu", _sync_batch_norm(1000.0), "don't train with SyncBatchNorm yet"),
        AcceptanceCase("SyncBatchNorm npu fp16 (the layer in float16)", "npu",
                       _sync_batch_norm(0.0, torch.float16),
                       "don't train with SyncBatchNorm in float16 yet"),
        AcceptanceCase("SyncBatchNorm npu bf16 (the layer in bfloat16)", "npu",
                       _sync_batch_norm(0.0, torch.bfloat16),
                       "don't train with SyncBatchNorm in bfloat16 yet"),
        AcceptanceCase(f"FLCE grad npu_custom memory-saving packed-uint8 int64 bf16 V={vocab} "
                       f"BT={rows}", "npu_custom",
                       _flce(testing.FlceCase(rows, hidden, vocab, torch.bfloat16, ms, "packed", seed=7)),
                       "don't train with impl='npu_custom' yet"),
        AcceptanceCase("batch_norm_reduce_backward npu_custom fp32 |mean| = 1000 [32, 64, 14, 14]",
                       "npu_custom",
                       _bn(testing.BnCase((32, 64, 14, 14), torch.float32, torch.float32, 1000.0, seed=8)),
                       "don't train with impl='npu_custom' yet"),
    ]
    return cases


def _disagreement(ours, cpu) -> str | None:
    """None when each output agrees with the CPU kernel's within twice SPEC §4's bounds."""
    for i, (o, c) in enumerate(zip(ours, cpu)):
        if o is None or c is None:
            if (o is None) != (c is None):
                return f"output {i}: {'None' if o is None else 'a tensor'} where the CPU kernel gives the other"
            continue
        o = o.detach().cpu()
        c = c.detach().cpu()
        if o.shape != c.shape or o.dtype != c.dtype:
            return f"output {i}: {o.dtype} {tuple(o.shape)}, the CPU kernel's {c.dtype} {tuple(c.shape)}"
        if not c.dtype.is_floating_point:
            if not torch.equal(o, c):
                return f"output {i}: {int((o != c).sum())} of {c.numel()} values differ"
            continue
        if c.numel() == 0:
            continue
        atol, rtol = testing.tolerance(c.dtype, c.double())
        o64, c64 = o.double(), c.double()
        error = (o64 - c64).abs()
        excess = error - 2 * (atol + rtol * c64.abs())
        norm = float(error.norm() / c64.norm().clamp_min(1e-30))
        if bool((excess > 0).any()) or norm > 2 * testing.norm_tolerance(c.dtype):
            worst = int(excess.argmax())
            return (f"output {i}: element {worst}: npu {o64.flatten()[worst].item():.6g}, "
                    f"cpu {c64.flatten()[worst].item():.6g}; norm error {norm:.3g} "
                    f"(bound {2 * testing.norm_tolerance(c.dtype):.3g})")
    return None


def run_case(case: AcceptanceCase, device: str, available: Callable[[str], str | None]) -> AcceptanceRow:
    start = time.perf_counter()
    reason = available(case.impl)
    if reason is not None:
        return AcceptanceRow(case, "skipped", f"{case.impl} unavailable: {reason}", 0.0)
    try:
        ours = case.run(case.impl, device)
    except NotImplementedError as error:
        message = str(error).splitlines()[0]
        if case.expect_refusal and message.startswith(case.expect_refusal):
            return AcceptanceRow(case, "pass", f"refused: {message[:160]}", time.perf_counter() - start)
        return AcceptanceRow(case, "FAIL", f"NotImplementedError: {message[:300]}", time.perf_counter() - start)
    except Exception as error:  # any failure is the row's result, not the check's end
        message = str(error).splitlines()[0] if str(error) else ""
        return AcceptanceRow(case, "FAIL", f"{type(error).__name__}: {message[:300]}",
                             time.perf_counter() - start)
    if case.expect_refusal:
        return AcceptanceRow(case, "FAIL", "ran although the adapter should refuse it up front "
                             "(CANN's tiling would fail or write past its UB)", time.perf_counter() - start)
    if device != "cpu":
        torch.npu.synchronize()  # a device-side failure shows here, in this row
    cpu = case.run("cpu", "cpu")
    problem = _disagreement(ours, cpu)
    seconds = time.perf_counter() - start
    if problem is not None:
        return AcceptanceRow(case, "FAIL", problem, seconds)
    return AcceptanceRow(case, "pass", "agrees with the CPU kernel", seconds)


def run_acceptance(device: str = "npu", cases: list[AcceptanceCase] | None = None,
                   available: Callable[[str], str | None] | None = None) -> list[AcceptanceRow]:
    """Every row's result; `available(impl)` gives why an implementation cannot run (None
    when it can), by default the reasons of ascend_ops.available_impls()."""
    if available is None:
        from ._impls import available_impls

        status = available_impls()
        available = lambda impl: status[impl].reason if not status[impl].available else None  # noqa: E731
    return [run_case(case, device, available) for case in (cases or acceptance_cases())]


def format_acceptance(rows: list[AcceptanceRow]) -> str:
    lines = []
    for row in rows:
        stop = f"  <- {row.case.blocking}" if row.stops_training else ""
        lines.append(f"  {row.status:<7} {row.case.name} ({row.seconds:.1f} s): {row.detail}{stop}")
    return "\n".join(lines)


def verdict(rows: list[AcceptanceRow]) -> str:
    stops = [row for row in rows if row.stops_training]
    if not stops:
        skipped = sum(row.status == "skipped" for row in rows)
        return ("acceptance: every row that ran agrees" +
                (f" ({skipped} skipped: their implementation is not installed)" if skipped else ""))
    return ("acceptance: DON'T TRAIN YET on the paths below; report these rows "
            "(docs/npu.md, first run):\n" +
            "\n".join(f"  - {row.case.blocking}: {row.case.name}: {row.detail}" for row in stops))


@dataclasses.dataclass
class AcceptanceResult:
    rows: list[AcceptanceRow]
    not_run: str | None = None  # why the check did not run (impl="npu" unavailable)

    @property
    def stops(self) -> int:
        return sum(row.stops_training for row in self.rows)


def run(on_row: Callable[[AcceptanceRow], None] | None = None) -> AcceptanceResult:
    """Every row when impl="npu" can run (each handed to `on_row` as it finishes), else why
    the check does not run."""
    from ._impls import available_impls

    npu = available_impls()["npu"]
    if not npu.available:
        return AcceptanceResult([], f"npu unavailable: {npu.reason}")
    rows = []
    for case in acceptance_cases():
        row = run_acceptance("npu", [case])[0]
        if on_row is not None:
            on_row(row)
        rows.append(row)
    return AcceptanceResult(rows)


def report() -> int:
    """`python -m ascend_ops`'s acceptance section: runs the rows when impl="npu" can run,
    prints them and the verdict; returns how many rows say "don't train yet"."""
    from ._impls import available_impls

    if available_impls()["npu"].available:
        print("\nNPU first-run acceptance (each row on the NPU against the CPU kernel, "
              "2x SPEC §4's tolerance; docs/npu.md):")
    result = run(lambda row: print(format_acceptance([row]), flush=True))
    if result.not_run is not None:
        print(f"\nNPU first-run acceptance: not run ({result.not_run})")
        return 0
    print(verdict(result.rows))
    return result.stops
