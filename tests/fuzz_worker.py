"""The child process of tests/test_fuzz.py: builds each fuzz case's arguments from its
JSON description, calls the entry point and checks the contract (SPEC §6):

- it raises TypeError or ValueError, and every argument's storage is byte for byte what
  it was (nothing written, not even half an output), or
- it returns what the reference returns on the same arguments (NaN where it has NaN).

One JSON case per stdin line, one JSON verdict per stdout line. Running in its own process,
a crash (a signal, heap corruption) or a hang ends this process, which the parent sees.
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback

import torch
import torch.nn.functional as F

import ascend_ops
from ascend_ops import reference

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "f64": torch.float64, "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8,
          "bool": torch.bool, "i16": torch.int16, "c64": torch.complex64}
DOCUMENTED_ERRORS = (TypeError, ValueError)


class Maker:
    """Builds tensors as a hostile caller would: views cut from NaN-poisoned buffers."""

    def __init__(self, seed: int):
        self.g = torch.Generator().manual_seed(seed)

    def values(self, shape, dtype, spec):
        """`spec`: (scale, special) with special "none", "nan", "inf"."""
        scale, special = spec
        x = torch.randn(shape, generator=self.g, dtype=torch.float64) * scale
        if special != "none" and x.numel():
            where = torch.rand(shape, generator=self.g) < 0.1
            x[where] = math.nan if special == "nan" else math.inf
        return self.cast(x, dtype)

    def cast(self, x, dtype):
        if dtype.is_floating_point or dtype.is_complex:
            return x.to(dtype)
        if dtype == torch.bool:
            return x > 0
        return x.nan_to_num(0.0, 0.0, 0.0).round().to(dtype)

    def view(self, t: torch.Tensor, kind: str) -> torch.Tensor:
        """`t`'s values in a tensor of layout `kind`, cut from a poisoned buffer."""
        if kind == "contiguous" or t.dim() == 0:
            return t
        if kind == "offset":  # inside a larger buffer, past a poisoned head and row padding
            rows = t.shape[0]
            inner = t[0].numel() if rows else 0
            ld = inner + 3
            buffer = self._poisoned(5 + rows * ld + 7, t.dtype)
            out = buffer[5:5 + max(rows * ld, 0)].view(rows, ld)[:, :inner].view(t.shape) \
                if rows and inner else t.clone()
            out.copy_(t)
            return out
        if kind == "transposed" and t.dim() >= 2:  # same values, other strides
            return t.transpose(0, 1).contiguous().transpose(0, 1)
        if kind == "expanded" and t.numel():  # stride 0 in dim 0: every row the same buffer
            return t[:1].expand(t.shape)
        return t

    def _poisoned(self, n, dtype):
        if dtype.is_floating_point:
            return torch.full((n,), math.nan, dtype=dtype)
        return torch.full((n,), 7, dtype=dtype) if dtype != torch.bool else torch.ones(n, dtype=torch.bool)


def _storage_snapshot(args) -> list:
    """Every tensor argument's whole storage, as bytes (views share theirs with their base)."""
    out = []
    for value in args:
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            out.append(bytes(torch.empty(0, dtype=torch.uint8).set_(storage).clone().numpy()
                             if storage.nbytes() else b""))
    return out


def _clone(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _tolerance(dtype):
    return {torch.float16: (2e-2, 1e-2), torch.bfloat16: (6e-2, 3e-2)}.get(dtype, (2e-4, 2e-4))


def _like(want, got):
    """The float64 `want` in `got`'s dtypes (for the ops compared by value only)."""
    if isinstance(want, (tuple, list)):
        return type(want)(_like(w, g) for w, g in zip(want, got)) if isinstance(got, (tuple, list)) else want
    if isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor) and got.is_floating_point():
        return want.to(got.dtype)
    return want


def _compare(ours, want, what="") -> str | None:
    if isinstance(want, (tuple, list)):
        if not isinstance(ours, (tuple, list)) or len(ours) != len(want):
            return f"{what}: got {type(ours).__name__}, the reference {type(want).__name__}"
        for i, (o, w) in enumerate(zip(ours, want)):
            why = _compare(o, w, f"{what}[{i}]")
            if why:
                return why
        return None
    if want is None or ours is None:
        return None if ours is None and want is None else f"{what}: {ours!r} vs reference {want!r}"
    if ours.dtype != want.dtype or ours.shape != want.shape:
        return f"{what}: {ours.dtype} {list(ours.shape)} vs reference {want.dtype} {list(want.shape)}"
    if not ours.is_floating_point():
        return None if torch.equal(ours, want) else f"{what}: {ours.tolist()} vs reference {want.tolist()}"
    o, w = ours.double(), want.double()
    if not torch.equal(o.isnan(), w.isnan()):
        return f"{what}: NaN at {o.isnan().nonzero().tolist()[:4]}, the reference at {w.isnan().nonzero().tolist()[:4]}"
    finite = w.isfinite()
    if not torch.equal(o[~finite & ~w.isnan()], w[~finite & ~w.isnan()]):
        return f"{what}: infinities differ from the reference"
    if not o[finite].isfinite().all():
        return f"{what}: non-finite where the reference is finite"
    atol, rtol = _tolerance(ours.dtype)
    scale = w[finite].abs().max().item() if finite.any() else 0.0
    err = (o[finite] - w[finite]).abs()
    bound = atol * max(scale, 1.0) + rtol * w[finite].abs()
    if (err > bound).any():
        i = int((err - bound).argmax())
        return f"{what}: {o[finite][i].item()} vs reference {w[finite][i].item()} (bound {bound[i].item():.3g})"
    return None


# ---- the entry points: (call ours, call the reference) on a list of arguments ----------

def _mk_tensor(m: Maker, d: dict):
    """A tensor from its description: None, a shape, a dtype, values and a layout."""
    if d is None:
        return None
    t = m.values(d["shape"], DTYPES[d["dtype"]], (d.get("scale", 1.0), d.get("special", "none")))
    return m.view(t, d.get("view", "contiguous"))


def _bn_reduce(case, m):
    a = case["args"]
    tensors = [_mk_tensor(m, a[k]) for k in ("grad_out", "input", "mean", "invstd", "weight")]
    if tensors[3] is not None and tensors[3].is_floating_point():
        tensors[3] = tensors[3].abs()
    args = tensors + [a["input_g"], a["weight_g"], a["bias_g"]]
    impl = case["impl"]
    return args, (lambda *x: ascend_ops.batch_norm_reduce_backward(*x, impl=impl),
                  lambda *x: ascend_ops.batch_norm_reduce_backward(*x, impl="reference"))


def _online(case, m):
    a = case["args"]
    inp, w = _mk_tensor(m, a["input"]), _mk_tensor(m, a["weight"])
    target = _mk_tensor(m, a["target"])
    if isinstance(target, torch.Tensor) and not target.is_floating_point() and target.numel():
        lo, hi = a["target_range"]
        target = (torch.randint(lo, hi, target.shape, generator=m.g).to(target.dtype))
    args = [inp, w, target, a["start"], a["end"], a["return_logits"]]
    impl = case["impl"]
    return args, (lambda *x: ascend_ops.fused_linear_online_max_sum(*x, impl=impl),
                  lambda *x: ascend_ops.fused_linear_online_max_sum(*x, impl="reference"))


def _loss(case, m):
    a = case["args"]
    tensors = [_mk_tensor(m, a[k]) for k in ("logits_max", "sum_exp_logits", "predicted_logits",
                                               "vocab_parallel_logits")]
    if isinstance(tensors[1], torch.Tensor) and tensors[1].is_floating_point():
        tensors[1] = tensors[1].abs() + 1
    impl = case["impl"]

    def ours(lm, s, p, logits):
        return ascend_ops.fused_cross_entropy_loss_with_max_sum(lm, s, p, vocab_parallel_logits=logits,
                                                                impl=impl)

    def ref(lm, s, p, logits):
        return ascend_ops.fused_cross_entropy_loss_with_max_sum(lm, s, p, vocab_parallel_logits=logits,
                                                                impl="reference")
    return tensors, (ours, ref)


def _flce(case, m):
    a = case["args"]
    bt, h, v = a["bt"], a["h"], a["v"]
    dtype = DTYPES[a["dtype"]]
    x = m.view(m.values((bt, h), dtype, (1.0, a["special"])), a["view"])
    w = m.view(m.values((v, h), DTYPES[a["weight_dtype"]], (1.0, "none")), a["weight_view"])
    logits = x.double() @ w.double().T if x.is_floating_point() and w.is_floating_point() \
        and not x.is_complex() and not w.is_complex() else torch.zeros(bt, v, dtype=torch.float64)
    lmax = logits.amax(1) if v else torch.full((bt,), -math.inf, dtype=torch.float64)
    sexp = torch.exp(logits - lmax[:, None]).sum(1) if v else torch.ones(bt, dtype=torch.float64)
    masked = torch.rand(bt, generator=m.g) < 0.3
    cols = torch.randint(0, max(v, 1), (bt,), generator=m.g)
    if a["bad_target"] and bt:
        cols[0] = v + a["bad_target"]
        masked[0] = False
    masked_target = torch.where(masked, 0, cols).to(DTYPES[a["target_dtype"]])
    target_mask = masked if a["mask"] == "bool" else _pack(masked)
    grad = m.values((bt,), DTYPES[a["grad_dtype"]], (1.0, "none"))
    softmax = None
    if a["mode"] == "high-performance":
        softmax = m.view((torch.exp(logits - lmax[:, None]) / sexp[:, None]).float(), a["view"])
        lmax_arg = sexp_arg = None
    else:
        lmax_arg, sexp_arg = lmax.float(), sexp.float()
        if a["drop_stat"]:
            lmax_arg = None
    args = [grad, x, w, target_mask, masked_target, a["label_smoothing"], lmax_arg, sexp_arg, softmax]
    impl = case["impl"]
    return args, (lambda *y: ascend_ops.fused_linear_cross_entropy_loss_grad(*y, impl=impl),
                  lambda *y: ascend_ops.fused_linear_cross_entropy_loss_grad(*y, impl="reference"))


def _pack(masked: torch.Tensor) -> torch.Tensor:
    from ascend_ops.masks import pack_target_mask

    return pack_target_mask(masked, True)


def _bn_stats(case, m):
    a = case["args"]
    x = _mk_tensor(m, a["input"])

    def ref(x, eps):  # float64 plain torch: mean and 1 / sqrt(biased var + eps)
        out = torch.float64 if x.dtype == torch.float64 else torch.float32
        if x.numel() == 0:  # SPEC §2b: mean 0, invstd NaN
            return torch.zeros(x.size(1), dtype=out), torch.full((x.size(1),), math.nan, dtype=out)
        dims = [d for d in range(x.dim()) if d != 1]
        x64 = x.double()
        mean = x64.mean(dims)
        var = ((x64 - mean.view([1, -1] + [1] * (x.dim() - 2))) ** 2).mean(dims)
        return mean.to(out), (1 / torch.sqrt(var + eps)).to(out)
    return [x, a["eps"]], (lambda x, eps: torch.batch_norm_stats(x, eps), ref)


def _gather_stats(case, m):
    a = case["args"]
    c, world = a["c"], a["world"]
    dtype = DTYPES[a["dtype"]]
    x = torch.empty(4, c, 3, dtype=dtype) if dtype.is_floating_point else torch.zeros(4, c, 3, dtype=dtype)
    mean = m.values((world, c), dtype, (1.0, a["special"]))
    invstd = m.values((world, c), dtype, (1.0, "none")).abs() + 0.5 if dtype.is_floating_point else \
        m.values((world, c), dtype, (1.0, "none"))
    counts = torch.randint(1, 9, (world,), generator=m.g).to(DTYPES[a["counts_dtype"]])
    running = []
    for key in ("running_mean", "running_var"):
        d = a[key]
        if d is None:
            running.append(None)
            continue
        t = m.values([d["length"]], DTYPES[d["dtype"]], (1.0, "none"))
        running.append(m.view(t.abs() if t.is_floating_point() else t, d["view"]))
    if a["shared"] and running[0] is not None:
        running[1] = running[0]
    args = [x, mean, invstd, running[0], running[1], a["momentum"], a["eps"], counts]

    def ref(x, mean, invstd, rm, rv, momentum, eps, counts):
        n = counts.double().sum()
        w = counts.double()[:, None]
        gm = (w * mean.double()).sum(0) / n
        var_w = 1 / invstd.double() ** 2 - eps
        m2 = (w * (var_w + (mean.double() - gm) ** 2)).sum(0)
        if rm is not None:
            rm.copy_(rm.double() * (1 - momentum) + gm * momentum)
        if rv is not None:
            rv.copy_(rv.double() * (1 - momentum) + m2 / (n - 1) * momentum)
        return gm.to(mean.dtype), (1 / torch.sqrt(m2 / n + eps)).to(mean.dtype), rm, rv

    def ours(x, mean, invstd, rm, rv, momentum, eps, counts):
        out = torch.batch_norm_gather_stats_with_counts(x, mean, invstd, rm, rv, momentum, eps, counts)
        return (*out, rm, rv)  # the running statistics, written in place, are outputs too
    return args, (ours, ref)


def _lce(case, m):
    a = case["args"]
    bt, h, v = a["bt"], a["h"], a["v"]
    x = _mk_tensor(m, a["input"]) if a["input"] is not None else None
    w = _mk_tensor(m, a["weight"])
    target = _mk_tensor(m, a["target"])
    if isinstance(target, torch.Tensor) and target.dtype in (torch.int32, torch.int64) and target.numel():
        target = torch.randint(0, max(v, 1), target.shape, generator=m.g).to(target.dtype)
        target[torch.rand(target.shape, generator=m.g) < 0.2] = -100
        if a["bad_target"]:
            target.view(-1)[0] = v + 5
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        x.requires_grad_(a["requires_grad"])
    if isinstance(w, torch.Tensor) and w.is_floating_point():
        w.requires_grad_(a["requires_grad"])
    options = dict(ignore_index=-100, reduction=a["reduction"], mode=a["mode"],
                   vocab_start_index=a["start"], label_smoothing=a.get("label_smoothing", 0.0),
                   softcap=a.get("softcap"))
    del bt, h

    def ours(x, w, t):
        with torch.no_grad() if not a["requires_grad"] else _nothing():
            return ascend_ops.linear_cross_entropy(x, w, t, **options)

    def ref(x, w, t):
        start = options["vocab_start_index"] or 0
        logits = x.detach().double() @ w.detach().double().T
        if options["softcap"] is not None:
            logits = options["softcap"] * torch.tanh(logits / options["softcap"])
        local = torch.where(t == -100, -100, t.long() - start)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), local.reshape(-1), ignore_index=-100,
                               reduction=options["reduction"],
                               label_smoothing=options["label_smoothing"]).reshape(
            t.shape if options["reduction"] == "none" else ()).float()
    return [x, w, target], (ours, ref)


def _aten_elementwise(case, m):
    """aten's batch_norm_elemt, batch_norm_backward_reduce and batch_norm_backward_elemt as
    SyncBatchNorm calls them (our CPU kernels serve them), against their float64 formulas."""
    a = case["args"]
    which = a["which"]
    x, dy = _mk_tensor(m, a["input"]), _mk_tensor(m, a["grad_out"])
    mean, invstd = _mk_tensor(m, a["mean"]), _mk_tensor(m, a["invstd"])
    if isinstance(invstd, torch.Tensor) and invstd.is_floating_point():
        invstd = invstd.abs() + 0.1
    weight, bias = _mk_tensor(m, a["weight"]), _mk_tensor(m, a["bias"])
    sums = [_mk_tensor(m, a[k]) for k in ("sum_dy", "sum_dy_xmu")]
    count = torch.tensor(a["count"], dtype=DTYPES[a["count_dtype"]])

    def per_channel(t, like):
        return t.double().view([1, -1] + [1] * (like.dim() - 2))

    if which == "batch_norm_elemt":
        def ours(x, weight, bias, mean, invstd, eps):
            return torch.batch_norm_elemt(x, weight, bias, mean, invstd, eps)

        def ref(x, weight, bias, mean, invstd, eps):
            y = (x.double() - per_channel(mean, x)) * per_channel(invstd, x)
            if weight is not None:
                y = y * per_channel(weight, x)
            if bias is not None:
                y = y + per_channel(bias, x)
            return y
        return [x, weight, bias, mean, invstd, 1e-5], (ours, ref)
    if which == "batch_norm_backward_reduce":
        def ours(dy, x, mean, invstd, weight):
            return torch.batch_norm_backward_reduce(dy, x, mean, invstd, weight, True, True, True)

        def ref(dy, x, mean, invstd, weight):
            dims = [d for d in range(x.dim()) if d != 1]
            sum_dy = dy.double().sum(dims)
            sum_dy_xmu = (dy.double() * (x.double() - per_channel(mean, x))).sum(dims)
            return sum_dy, sum_dy_xmu, sum_dy_xmu * invstd.double(), sum_dy
        return [dy, x, mean, invstd, weight], (ours, ref)

    def ours(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
        return torch.batch_norm_backward_elemt(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count)

    def ref(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
        n = count.double().sum()
        inv = per_channel(invstd, x)
        scale = inv * (per_channel(weight, x) if weight is not None else 1)
        xmu = x.double() - per_channel(mean, x)
        return (dy.double() - per_channel(sum_dy, x) / n - xmu * inv * inv * per_channel(sum_dy_xmu, x) / n) * scale
    return [dy, x, mean, invstd, weight, *sums, count], (ours, ref)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


BUILDERS = {"batch_norm_reduce_backward": _bn_reduce, "fused_linear_online_max_sum": _online,
            "fused_cross_entropy_loss_with_max_sum": _loss,
            "fused_linear_cross_entropy_loss_grad": _flce, "batch_norm_stats": _bn_stats,
            "batch_norm_gather_stats_with_counts": _gather_stats, "linear_cross_entropy": _lce,
            "aten_batch_norm_elementwise": _aten_elementwise}
# Ops whose outputs' dtypes are torch's rule, not SPEC's: compared by value in that dtype.
VALUE_ONLY = {"aten_batch_norm_elementwise"}


def run_case(case: dict) -> dict:
    """The verdict on one case: {"ok": True, "outcome": ...} or {"ok": False, "why": ...}."""
    if case.get("engine"):
        os.environ["ASCEND_OPS_CPU_GEMM"] = case["engine"]
    else:
        os.environ.pop("ASCEND_OPS_CPU_GEMM", None)
    torch.set_num_threads(case.get("threads", 1))
    m = Maker(case["seed"])
    args, (ours, ref) = BUILDERS[case["op"]](case, m)
    ref_args = _clone(args)
    before = _storage_snapshot(args)
    try:
        got = ours(*args)
    except Exception as error:  # noqa: BLE001 - judged below
        after = _storage_snapshot(args)
        changed = [i for i, (b, a) in enumerate(zip(before, after)) if b != a]
        if changed:
            return {"ok": False, "kind": "partial_write",
                    "why": f"raised {type(error).__name__} ({str(error)[:300]}) but wrote tensor "
                           f"argument(s) {changed}: a partial write"}
        if not isinstance(error, DOCUMENTED_ERRORS):
            return {"ok": False, "kind": "undocumented_error",
                    "why": f"raised {type(error).__name__}, not TypeError/ValueError: {str(error)[:400]}"}
        return {"ok": True, "outcome": f"refused: {type(error).__name__}"}
    try:
        want = ref(*ref_args)
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "kind": "accepted_bad",
                "why": f"accepted arguments the reference refuses ({type(error).__name__}: {str(error)[:300]})"}
    if case["op"] in VALUE_ONLY:
        want = _like(want, got)
    why = _compare(got, want, case["op"])
    return {"ok": why is None, "kind": "mismatch", "why": why, "outcome": "computed"}


def main() -> None:
    for line in sys.stdin:
        case = json.loads(line)
        try:
            verdict = run_case(case)
        except Exception:  # noqa: BLE001 - a bug of the harness, reported as such
            verdict = {"ok": False, "kind": "harness", "why": "fuzz harness error:\n" + traceback.format_exc()}
        sys.stdout.write(json.dumps(verdict) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
