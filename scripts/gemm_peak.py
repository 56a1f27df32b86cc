"""The training step's three GEMMs as the CPU kernels run them, and the register-only peak
of the instruction each engine multiplies with, measured in alternation (shared by
scripts/benchmark_gemm_peak.py and scripts/benchmark_linear_cross_entropy.py).

The products, at (BT, H, V), bfloat16, as linear_cross_entropy's logits-gradient cache
runs them (python/ascend_ops/training/lce/grad_cache.py, lce_grad_cache.cpp):

    logits       x_c @ W.T into fp32, row chunk by row chunk, with each row's maximum and
                 sum of exp (the forward's epilogue)           lce_chunk_statistics
    grad_input   bf16(G @ W), K = V                             lce_cached_backward
    grad_weight  bf16(G.T @ x), K = BT                          lce_cached_backward

each 2 * BT * H * V flops. The engine is forced for both kinds of product
(ASCEND_OPS_CPU_GEMM_FP32_OUT / _ROUNDED) while a product runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import time

import torch

from ascend_ops import _C
from ascend_ops.cpu_info import cpu_info
from ascend_ops.training.lce import grad_cache

PRODUCTS = ("logits", "grad_input", "grad_weight")
KIND_VARIABLES = ("ASCEND_OPS_CPU_GEMM_FP32_OUT", "ASCEND_OPS_CPU_GEMM_ROUNDED")


def peak_instruction(engine: str) -> str:
    """The instruction `engine`'s products run on this CPU: TDPBF16PS for the own amx kernel and
    where oneDNN or MKL have AMX, VDPBF16PS where the CPU has AVX512-BF16 (the own avx512bf16 kernel; oneDNN and
    MKL), VFMADD231PS zmm / ymm for fp32 GEMMs (avx2 engine: ymm; portable: ATen's fp32 GEMM)."""
    loops = dict(_C.cpu_peak_loops())
    if engine == "avx2":
        return "vfmadd231ps_ymm"
    if engine in ("amx", "onednn", "mkl") and "tdpbf16ps" in loops:
        return "tdpbf16ps"
    if engine != "portable" and "vdpbf16ps_zmm" in loops:
        return "vdpbf16ps_zmm"
    return "vfmadd231ps_zmm" if "vfmadd231ps_zmm" in loops else "vfmadd231ps_ymm"


def peak_tflops(instruction: str, seconds: float = 0.25) -> float:
    """TFLOP/s of `instruction`'s register-only loop on the kernels' threads, run for about
    `seconds` (the iteration count from a short calibration run)."""
    flops = dict(_C.cpu_peak_loops())[instruction]
    threads = torch.get_num_threads()
    probe = 200_000
    elapsed = _C.cpu_peak_loop_seconds(instruction, probe)
    iterations = max(probe, int(probe * seconds / max(elapsed, 1e-6)))
    return flops * iterations * threads / _C.cpu_peak_loop_seconds(instruction, iterations) / 1e12


@contextlib.contextmanager
def engine_forced(engine: str):
    saved = {v: os.environ.get(v) for v in KIND_VARIABLES}
    for v in KIND_VARIABLES:
        os.environ[v] = engine
    try:
        yield
    finally:
        for v, value in saved.items():
            if value is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = value


@dataclasses.dataclass
class StepOperands:
    x: torch.Tensor            # [BT, H] bf16
    w: torch.Tensor            # [V, H] bf16
    columns: torch.Tensor      # [BT] int64 target column, -1 on ignored rows
    cache: torch.Tensor        # [BT, >= V] bf16, the logits gradient G (padded rows)
    logits: torch.Tensor       # [chunk, V] fp32, the forward's chunk buffer
    chunk_rows: int


def step_operands(bt: int, h: int, v: int, seed: int = 0) -> StepOperands:
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(bt, h, generator=gen) / h**0.5).bfloat16()
    w = (torch.randn(v, h, generator=gen) * 0.02).bfloat16()
    columns = torch.randint(0, v, (bt,), generator=gen)
    columns[::7] = -1  # one in 7 targets ignored, as the benchmarks' step
    cache = torch.zeros(bt, _C.cpu_scratch_ld(v), dtype=torch.bfloat16)
    cache[:, :v] = (torch.randn(bt, v, generator=gen) * 1e-3).bfloat16()
    most = max(1, min(bt, grad_cache.CHUNK_LOGITS_BYTES // (v * 4)))
    chunk = -(-bt // -(-bt // most))
    logits = torch.empty(chunk, v)
    return StepOperands(x, w, columns, cache, logits, chunk)


def run_product(product: str, ops: StepOperands) -> None:
    """One product of the step on the engines in force."""
    if product == "logits":
        for r0 in range(0, ops.x.size(0), ops.chunk_rows):
            rows = slice(r0, r0 + ops.chunk_rows)
            # the exps left in the chunk, as the step on one shard leaves them (grad_cache.py)
            _C.lce_chunk_statistics(ops.x[rows], ops.w, ops.columns[rows], ops.logits,
                                    keep_exps=True)
    elif product == "grad_input":
        _C.lce_cached_backward(ops.cache, None, ops.x, ops.w, True, False)
    else:  # its output in the block the step keeps for it, as the step runs it
        _C.lce_cached_backward(ops.cache, None, ops.x, ops.w, False, True,
                               grad_cache.grad_cache_budget())


@dataclasses.dataclass
class ProductRow:
    product: str
    size: str
    engine: str
    instruction: str
    tflops: float        # median over rounds
    peak_tflops: float   # median of the peak loop runs beside it
    fraction: float      # median over rounds of tflops / (the peak measured just before and after)
    rounds: int


def measure_products(ops: StepOperands, engines: list[str], rounds: int,
                     products=PRODUCTS) -> list[ProductRow]:
    """Each product on each engine, in rounds that alternate them (one warm-up call each),
    every timing between two runs of its instruction's register-only loop, each about as
    long as the product's warm-up took (so that on a busy machine the loop and the product
    share the cores over windows of one length); a round's fraction is the product's
    TFLOP/s over the mean of those two."""
    bt, h = ops.x.shape
    v = ops.w.size(0)
    flops = 2.0 * bt * h * v
    instructions = {e: peak_instruction(e) for e in engines}
    window = {}
    for engine in engines:
        with engine_forced(engine):
            for product in products:
                start = time.perf_counter()
                run_product(product, ops)
                window[(product, engine)] = min(5.0, max(0.1, time.perf_counter() - start))
    samples = {(p, e): ([], [], []) for p in products for e in engines}
    for r in range(rounds):
        order = [(p, e) for p in products for e in engines]
        order = order[r % len(order):] + order[:r % len(order)]
        for product, engine in order:
            ins = instructions[engine]
            before = peak_tflops(ins, window[(product, engine)])
            with engine_forced(engine):
                start = time.perf_counter()
                run_product(product, ops)
                seconds = time.perf_counter() - start
            after = peak_tflops(ins, window[(product, engine)])
            tflops = flops / seconds / 1e12
            rates, peaks, fractions = samples[(product, engine)]
            rates.append(tflops)
            peaks.extend((before, after))
            fractions.append(tflops / ((before + after) / 2))
    size = f"{bt}x{h}x{v}"
    return [ProductRow(p, size, e, instructions[e], statistics.median(samples[(p, e)][0]),
                       statistics.median(samples[(p, e)][1]), statistics.median(samples[(p, e)][2]),
                       rounds) for p in products for e in engines]


def machine_description() -> str:
    info = cpu_info()
    return (f"{info.describe()}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}, "
            f"caches {_C.cpu_caches()}")
