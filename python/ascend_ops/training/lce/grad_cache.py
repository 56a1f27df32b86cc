"""linear_cross_entropy's logits-gradient cache (CPU, bfloat16).

Memory-saving mode recomputes the logits in the backward: four [BT, H] x [H, V] GEMMs per
step where eager PyTorch runs three. When the whole bf16 logits gradient G of this shard
fits in a fixed budget (ASCEND_OPS_LCE_GRAD_CACHE_MIB, default 128 MiB), the forward forms
G row chunk by row chunk while the chunk's fp32 logits are at hand (their row statistics
made global first), keeps G instead of the logits, and the backward runs the two gradient
GEMMs on it: three GEMMs, and memory bounded by the budget whatever BT and V are. Where G
does not fit, or off CPU, or for float16, memory-saving mode recomputes as before
(docs/training.md). High-performance mode, which holds [BT, V] anyway,
keeps G whatever its size (a third of its bf16 logits and fp32 softmax).

G is formed with the upstream gradient taken as 1 (the 1 / count of "mean" included), as
SPEC §1 forms it: when the backward's upstream gradient is 1 for every row, G, and so both
gradients, have §1's numerics exactly (only the order of fp32 sums differs from the
recomputing path); otherwise the backward uses bf16(G * grad), one rounding more than §1.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from ... import _extension

GRAD_CACHE_ENV = "ASCEND_OPS_LCE_GRAD_CACHE_MIB"
DEFAULT_GRAD_CACHE_MIB = 128
# fp32 logits of one row chunk of the forward, at most: 786 rows at V = 16000. Each chunk
# repacks the whole weight for the GEMM (~8 ms at V x H = 16000 x 4096 here), so fewer,
# larger chunks are faster; BT is split evenly (4096 rows: 6 chunks of 683).
CHUNK_LOGITS_BYTES = 48 << 20


def grad_cache_budget() -> int:
    """The cache budget in bytes: ASCEND_OPS_LCE_GRAD_CACHE_MIB (MiB, 0 turns the cache
    off), else 128 MiB."""
    value = os.environ.get(GRAD_CACHE_ENV)
    if value is None:
        return DEFAULT_GRAD_CACHE_MIB << 20
    try:
        mib = int(value)
    except ValueError:
        mib = -1
    if mib < 0:
        raise ValueError(f"{GRAD_CACHE_ENV} must be a non-negative integer (MiB), got {value!r}")
    return mib << 20


def chunk_rows(bt: int, vocab: int) -> int:
    """Rows per forward chunk: BT split evenly into the fewest chunks of at most
    CHUNK_LOGITS_BYTES of fp32 logits each (1 for no rows)."""
    most = max(1, min(bt, CHUNK_LOGITS_BYTES // max(1, vocab * 4)))
    return -(-bt // -(-bt // most)) if bt else 1  # ceil(bt / number of chunks)


def plan_chunk_rows(input: torch.Tensor, weight: torch.Tensor, needs_grad: bool,
                    group: dist.ProcessGroup | None, bounded: bool = True) -> int:
    """Rows per forward chunk of the cached path, or 0 where the backward recomputes (or,
    in high-performance mode, `bounded=False`, uses the softmax). Memory-saving mode caches
    only within the budget; high-performance mode, which holds [BT, V] anyway, always.

    With a process group every rank takes the same decision and the same chunks (each
    chunk makes its row statistics global with collectives): one all-reduce of the plan,
    on CPU tensors only. Off CPU there is no cache, so nothing is exchanged: the ranks
    of a group hold their tensors on one kind of device, and an hccl group would refuse
    a CPU tensor anyway.
    """
    # Under torch.compile the recomputing path's custom ops (with fake kernels) are traced;
    # the cache's native calls are not ops a graph can hold.
    if input.device.type != "cpu" or torch.compiler.is_compiling():
        return 0
    native = _extension._native
    bt, h = input.shape
    vocab = weight.size(0)
    fits = bool(
        needs_grad and native is not None and bt > 0 and h > 0 and vocab > 0
        and native.lce_cache_engine(input.dtype)
        and (not bounded or bt * native.cpu_scratch_ld(vocab) * input.element_size()
             <= grad_cache_budget()))
    chunk = chunk_rows(bt, vocab)
    if group is None:
        return chunk if fits else 0
    plan = torch.tensor([int(fits), chunk], dtype=torch.int64, device=input.device)
    dist.all_reduce(plan, op=dist.ReduceOp.MIN, group=group)
    return int(plan[1]) if int(plan[0]) else 0


# The forward's two large buffers are scratch (NaN-filled under ASCEND_OPS_CPU_POISON_SCRATCH=1,
# as the tests run) in blocks kept from one step to the next, so that a step does not fault
# in ~100 MiB of fresh pages (op_plugin/csrc/cpu/gemm/operands/kept_scratch.h; the backward puts the
# weight gradient in the chunk's block). G is kept within the budget, the chunk within
# CHUNK_LOGITS_BYTES; a larger one (high-performance mode's G, a single row wider than that)
# is the step's own.
def kept_grad_cache(native, bt: int, vocab: int, dtype: torch.dtype) -> torch.Tensor:
    """G's storage: [BT, cpu_scratch_ld(V)] of `dtype`."""
    return native.cpu_kept_scratch_empty(
        "lce_grad_cache", [bt, native.cpu_scratch_ld(vocab)], dtype, grad_cache_budget())


def kept_logits_chunk(native, rows: int, vocab: int) -> torch.Tensor:
    """One row chunk of fp32 logits: [rows, V]."""
    return native.cpu_kept_scratch_empty("lce_logits", [rows, vocab], torch.float32,
                                         CHUNK_LOGITS_BYTES)


def forward(x, weight, columns, owned, row_scale, chunk_rows, combine=None):
    """The cached forward. `columns` [BT] int64: each row's target column in this shard or
    -1; `owned` [BT] float: 1 where this shard holds the target; `row_scale` [BT] float32:
    the upstream gradient G is formed for (0 on ignored rows); `combine(m, s, p, owned)`
    makes a chunk's row statistics global, None where they are already (one shard: then
    the statistics pass writes each row's G from the exps it has just summed, the same
    bits with no second exp and no second pass over the chunk). Returns G [BT, >= V] and
    the global (logits_max, sum_exp_logits, predicted_logits, owners)."""
    native = _extension.native()
    bt, vocab = x.size(0), weight.size(0)
    grad_cache = kept_grad_cache(native, bt, vocab, x.dtype)
    logits = kept_logits_chunk(native, min(chunk_rows, bt), vocab)
    one_shard = combine is None
    row_scale = row_scale.contiguous()
    statistics = []
    for r0 in range(0, bt, chunk_rows):
        rows = slice(r0, min(bt, r0 + chunk_rows))
        if one_shard:
            # the statistics are global already: each row's G is written from its exps as
            # soon as they are summed, while they are in cache
            local = native.lce_chunk_statistics(x[rows], weight, columns[rows], logits,
                                                keep_exps=True, row_scale=row_scale[rows],
                                                grad_rows=grad_cache[rows])
            statistics.append((*local, owned[rows]))
        else:
            local = native.lce_chunk_statistics(x[rows], weight, columns[rows], logits)
            global_max, global_sum, global_predicted, owners = combine(*local, owned[rows])
            native.lce_write_grad_rows(logits, global_max, global_sum, columns[rows],
                                       row_scale[rows], grad_cache[rows])
            statistics.append((global_max, global_sum, global_predicted, owners))
    return (grad_cache, *(torch.cat(parts) for parts in zip(*statistics)))


def backward(grad_cache, row_scale, x, weight, want_input_grad=True, want_weight_grad=True):
    """(input_grad, weight_grad) from the cached G, each row scaled by `row_scale`; None for
    a gradient not wanted (a frozen head costs one GEMM less). weight_grad lies in a block
    kept for the next step once the caller drops it, within the budget (kept_scratch.h)."""
    return _extension.native().lce_cached_backward(grad_cache, row_scale.contiguous(), x, weight,
                                                   want_input_grad, want_weight_grad,
                                                   grad_cache_budget())
