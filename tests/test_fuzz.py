"""A property-based fuzz of the public entry points (SPEC §6), seeded and bounded.

Hypothesis draws each case as a hostile caller would: every dtype in every argument, 0 / 1 /
odd sizes, views cut from NaN-poisoned buffers (offset, transposed, expanded), NaN and Inf
values, out-of-range targets and shards, None and wrong kinds, every GEMM engine, 1 and 2
threads. tests/fuzz_worker.py runs the cases in a child process and judges each one: either
a TypeError / ValueError with every argument's storage unchanged, or the reference's
result. A crash of the child (a signal: heap corruption, a segfault) or a hang fails the test.

Derandomized (the same cases on every run of one install: Hypothesis also draws numbers
from the literals of modules outside site-packages, so ascend_ops imported from a build
directory, as scripts/sanitize_kernel_tests.sh does, draws some other cases) and bounded: ASCEND_OPS_FUZZ_EXAMPLES cases per
test (default 600: 4,800 cases over 8 tests, 67 s measured on this 2-core machine while
other builds ran); raise it for a long run.
"""

from __future__ import annotations

import json
import os
import pathlib
import select
import signal
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ascend_ops.sim import simulator as _sim

EXAMPLES = int(os.environ.get("ASCEND_OPS_FUZZ_EXAMPLES", "600"))
CASE_TIMEOUT_S = 60.0  # a hang is a failure too
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck), print_blob=False)
SIM = [] if _sim.load_error is not None else ["sim"]


class Worker:
    """tests/fuzz_worker.py in a child process, restarted after it dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.recent: list[dict] = []

    def _start(self) -> None:
        self.stderr.seek(0)
        self.stderr.truncate()
        self.recent = []
        self.proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).with_name("fuzz_worker.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, bufsize=1, env=os.environ.copy())

    def run(self, case: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.recent = (self.recent + [case])[-3:]
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], CASE_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if not ready:
            self.proc.kill()
        code = self.proc.wait()
        self.stderr.seek(0)
        tail = self.stderr.read()[-1500:]
        how = (f"hung past {CASE_TIMEOUT_S:.0f} s" if not ready else
               f"died with {signal.Signals(-code).name}" if code < 0 else f"exited with {code}")
        return {"ok": False, "kind": "crash", "why": f"the child process {how} (a crash); its last cases, the latest "
                                    f"last: {json.dumps(self.recent)}; its stderr: {tail}"}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


class ChildCrashed(AssertionError):
    """The child process died (a signal) or hung."""


class PartialWrite(AssertionError):
    """An argument's storage changed although the call raised."""


class UndocumentedError(AssertionError):
    """Bad input raised something other than TypeError / ValueError."""


class ReferenceMismatch(AssertionError):
    """A call that returned disagrees with the reference (or the reference refused it)."""


def check(worker: Worker, case: dict) -> None:
    """One case; each kind of failure is its own exception raised from its own line, so
    that Hypothesis reports every kind it found, not only the first one."""
    verdict = worker.run(case)
    if verdict["ok"]:
        event(verdict["outcome"])  # --hypothesis-show-statistics: how many were refused, computed
        return
    message = f"{verdict['why']}\ncase: {json.dumps(case)}"
    kind = verdict.get("kind")
    if kind == "crash":
        raise ChildCrashed(message)
    if kind == "partial_write":
        raise PartialWrite(message)
    if kind == "undocumented_error":
        raise UndocumentedError(message)
    if kind in ("mismatch", "accepted_bad"):
        raise ReferenceMismatch(message)
    raise AssertionError(message)  # the harness itself


# ---- strategies ---------------------------------------------------------------------------
# Each case has at most one bad argument (about half have none, so they reach the
# computation and are compared with the reference); `Bad` picks which.

SIZES = st.sampled_from([0, 1, 2, 3, 5, 7, 16, 17, 33])
SMALL = st.sampled_from([1, 2, 3, 5, 8, 13])
VIEWS = st.sampled_from(["contiguous", "offset", "transposed", "expanded"])
SPECIAL = st.sampled_from(["none", "none", "none", "nan", "inf"])
HALF = ["f16", "bf16"]
FLOATS = ["f32", "f16", "bf16"]
WRONG = ["f64", "i32", "i64", "bool", "u8", "c64"]
ENGINES = st.sampled_from([None, "onednn", "mkl", "amx", "avx512bf16", "avx2", "portable"])
THREADS = st.sampled_from([1, 2])
SEED = st.integers(0, 2**31 - 1)
NOT_BOOL = ["0", 1, None]


class Bad:
    """Which argument of a case is bad, if any, and the draws that follow from it."""

    def __init__(self, draw, names: list[str]):
        self.draw = draw
        self.name = draw(st.sampled_from(["-"] * len(names) + names))

    def value(self, name: str, good: list, bad: list):
        return self.draw(st.sampled_from(bad if name == self.name else good))

    def tensor(self, name: str, shape: list, dtypes: list, *, bad_shapes=(), bad_dtypes=WRONG,
               view=VIEWS, special=SPECIAL, scale=st.just(1.0), optional=False):
        """A tensor description; the bad one is None, or of a bad dtype or shape."""
        dtype = self.draw(st.sampled_from(dtypes))
        if name == self.name:
            how = self.draw(st.sampled_from(["dtype", "shape", "none"] if bad_shapes else ["dtype", "none"]))
            if how == "none" and not optional:
                return None
            if how == "dtype":
                dtype = self.draw(st.sampled_from(bad_dtypes))
            elif how == "shape":
                shape = self.draw(st.sampled_from(list(bad_shapes)))
        return {"shape": shape, "dtype": dtype, "view": self.draw(view), "special": self.draw(special),
                "scale": self.draw(scale)}


def case(op, impls, args):
    return st.fixed_dictionaries({"op": st.just(op), "impl": st.sampled_from(impls), "engine": ENGINES,
                                  "threads": THREADS, "seed": SEED, "args": args})


@st.composite
def bn_reduce_args(draw):
    bad = Bad(draw, ["input", "grad_out", "mean", "invstd", "weight", "input_g", "weight_g", "bias_g"])
    n, c = draw(SIZES), draw(st.sampled_from([1, 2, 3, 5, 16, 17]))
    shape = [n, c, *draw(st.sampled_from([[], [1], [3], [2, 5], [1, 1, 7]]))]
    dtype = draw(st.sampled_from(FLOATS))
    x = bad.tensor("input", shape, [dtype], bad_shapes=[[n], [n, 0], [1] * 9])
    dtype = x["dtype"] if x else dtype
    return {"input": x,
            "grad_out": bad.tensor("grad_out", shape, [dtype], bad_shapes=[[*shape[:-1], shape[-1] + 1]],
                                   bad_dtypes=[f for f in FLOATS if f != dtype] + WRONG),
            "mean": bad.tensor("mean", [c], FLOATS, bad_shapes=[[c + 1], [1, c]]),
            "invstd": bad.tensor("invstd", [c], FLOATS, bad_shapes=[[c + 1]]),
            "weight": bad.tensor("weight", [c], FLOATS, bad_shapes=[[c + 1]], optional=True)
            if draw(st.booleans()) or bad.name == "weight" else None,
            **{flag: bad.value(flag, [True, False], NOT_BOOL) for flag in ("input_g", "weight_g", "bias_g")}}


@st.composite
def online_args(draw):
    bad = Bad(draw, ["input", "weight", "target", "start", "end", "return_logits"])
    bt, h, v = draw(SIZES), draw(SMALL), draw(SIZES)
    dtype = draw(st.sampled_from(HALF))
    start = bad.value("start", [0, 0, v, 7, 2**31 + 1, 2**32 + 1, 2**40], [-1, 1.5])
    width = bad.value("end", [v, max(v - 1, 0), 0], [v + 1])
    return {"input": bad.tensor("input", [bt, h], [dtype], bad_shapes=[[bt, h, 1], [h]],
                                bad_dtypes=["f32", "f64", "i32"]),
            "weight": bad.tensor("weight", [v, h], [dtype], bad_shapes=[[v, h + 1], [v], [2, v, h]],
                                 bad_dtypes=[f for f in HALF if f != dtype] + ["f32", "c64"]),
            "target": bad.tensor("target", [bt], ["i32", "i64"], bad_shapes=[[bt + 1], [bt, 1]],
                                 bad_dtypes=["f32", "bool", "u8", "i16"], special=st.just("none")),
            "target_range": [-2, int(start) + v + 3], "start": start,
            "end": int(start) + width if isinstance(start, int) else 3,
            "return_logits": bad.value("return_logits", [True, False], NOT_BOOL)}


@st.composite
def loss_args(draw):
    bad = Bad(draw, ["logits_max", "sum_exp_logits", "predicted_logits", "vocab_parallel_logits"])
    bt, v = draw(SIZES), draw(SIZES)

    def stat(name):
        return bad.tensor(name, [bt], ["f32"], bad_shapes=[[bt + 1], [bt, 1]], bad_dtypes=["f16", "f64", "i32"])
    return {"logits_max": stat("logits_max"), "sum_exp_logits": stat("sum_exp_logits"),
            "predicted_logits": stat("predicted_logits"),
            "vocab_parallel_logits": bad.tensor("vocab_parallel_logits", [bt, v], FLOATS,
                                                bad_shapes=[[bt + 1, v], [bt]], bad_dtypes=["f64", "i32"],
                                                optional=True) if draw(st.booleans()) else None}


@st.composite
def flce_args(draw):
    bad = Bad(draw, ["input", "weight", "masked_target", "grad", "stat", "label_smoothing", "target_value"])
    dtype = bad.value("input", HALF, ["f32"])
    return {"bt": draw(SIZES), "h": draw(SMALL), "v": draw(SIZES), "dtype": dtype,
            "weight_dtype": bad.value("weight", [dtype], [f for f in HALF if f != dtype] + ["f32"]),
            "view": draw(VIEWS), "weight_view": draw(VIEWS), "special": draw(SPECIAL),
            "target_dtype": bad.value("masked_target", ["i32", "i64"], ["f32", "u8"]),
            "mask": draw(st.sampled_from(["bool", "packed"])),
            "grad_dtype": bad.value("grad", ["f32"], ["f16", "f64"]),
            "mode": draw(st.sampled_from(["memory-saving", "high-performance"])),
            "drop_stat": bad.value("stat", [False], [True]),
            "label_smoothing": bad.value("label_smoothing", [0.0], [0.1]),
            "bad_target": bad.value("target_value", [0], [1, 1000])}


@st.composite
def bn_stats_args(draw):
    bad = Bad(draw, ["input", "eps"])
    shape = [draw(SIZES), draw(st.sampled_from([1, 2, 3, 17])), *draw(st.sampled_from([[], [4], [2, 3]]))]
    return {"input": bad.tensor("input", shape, FLOATS + ["f64"], bad_shapes=[[3], [3, 0]],
                                bad_dtypes=["i32", "bool"], scale=st.sampled_from([1.0, 1e3])),
            "eps": bad.value("eps", [1e-5, 0.0, 1e-3], [-1.0])}


@st.composite
def gather_args(draw):
    bad = Bad(draw, ["dtype", "counts", "running_mean", "running_var", "shared", "eps"])
    c = draw(st.sampled_from([1, 2, 3, 17]))
    dtype = bad.value("dtype", ["f32", "f64"], ["f16", "i32"])

    def running(name):  # written in place: the bad one has a wrong length, a wrong dtype or is expanded
        if bad.name != name and draw(st.booleans()):
            return None
        facet = draw(st.sampled_from(["length", "dtype", "view"])) if bad.name == name else None
        return {"length": c + 1 if facet == "length" else c,
                "dtype": draw(st.sampled_from(["i32", "bool"] if facet == "dtype" else [dtype, "f32", "f16"])),
                "view": "expanded" if facet == "view" else draw(st.sampled_from(["contiguous", "offset"]))}
    return {"c": c, "world": draw(st.sampled_from([1, 2, 3])), "dtype": dtype,
            "special": draw(SPECIAL), "counts_dtype": bad.value("counts", ["i64", "f32", "f64"], ["bool"]),
            "running_mean": running("running_mean"), "running_var": running("running_var"),
            "shared": bad.value("shared", [False], [True]), "momentum": draw(st.sampled_from([0.1, 1.0, 0.0])),
            "eps": bad.value("eps", [1e-5], [-1.0])}


@st.composite
def aten_elementwise_args(draw):
    which = draw(st.sampled_from(["batch_norm_elemt", "batch_norm_backward_reduce", "batch_norm_backward_elemt"]))
    bad = Bad(draw, ["input", "grad_out", "mean", "invstd", "weight", "bias", "sum_dy", "sum_dy_xmu", "count", "count_dtype"])
    n, c = draw(st.sampled_from([1, 2, 3, 5, 16])), draw(st.sampled_from([1, 2, 3, 17]))
    shape = [n, c, *draw(st.sampled_from([[], [3], [2, 5]]))]
    dtype = draw(st.sampled_from(FLOATS + ["f64"]))
    stat = draw(st.sampled_from(["f32", "f64"]))

    def per_channel(name, optional=False):
        return bad.tensor(name, [c], [stat], bad_shapes=[[c + 1], [1, c]], bad_dtypes=["i32", "bool"],
                          special=st.just("none"), optional=optional)
    x = bad.tensor("input", shape, [dtype], bad_shapes=[[n], [n, 0]], bad_dtypes=["i32", "bool"])
    return {"which": which, "input": x,
            "grad_out": bad.tensor("grad_out", shape, [x["dtype"] if x else dtype],
                                   bad_shapes=[[*shape[:-1], shape[-1] + 1]], bad_dtypes=["i32"]),
            "mean": per_channel("mean"), "invstd": per_channel("invstd"),
            "weight": per_channel("weight", True) if draw(st.booleans()) or bad.name == "weight" else None,
            "bias": per_channel("bias", True) if draw(st.booleans()) or bad.name == "bias" else None,
            "sum_dy": per_channel("sum_dy"), "sum_dy_xmu": per_channel("sum_dy_xmu"),
            "count": bad.value("count", [[n], [n, 3], [1, 0, 2]], [[0], [-5], []]),
            "count_dtype": bad.value("count_dtype", ["i32", "i64", "f32"], ["bool"])}


@st.composite
def lce_args(draw):
    bad = Bad(draw, ["input", "weight", "target", "reduction", "mode", "start", "target_value",
                     "label_smoothing", "softcap"])
    lead, h, v = draw(st.sampled_from([[1], [3], [7], [2, 5], [0]])), draw(SMALL), draw(st.sampled_from([1, 3, 17, 40]))
    dtype = draw(st.sampled_from(FLOATS))  # float32 on CPU runs on the options' kernels (SPEC §7)
    return {"bt": lead, "h": h, "v": v,
            "input": bad.tensor("input", [*lead, h], [dtype], bad_shapes=[[]], bad_dtypes=["f64", "i32"],
                                special=st.just("none")),
            "weight": bad.tensor("weight", [v, h], [dtype], bad_shapes=[[v], [2, v, h], [v, h + 1]],
                                 bad_dtypes=["c64"] + [f for f in FLOATS if f != dtype], special=st.just("none")),
            "target": bad.tensor("target", lead, ["i64", "i32"], bad_shapes=[[*lead, 1]],
                                 bad_dtypes=["f32", "bool", "u8", "i16"], special=st.just("none")),
            "requires_grad": draw(st.booleans()),
            "reduction": bad.value("reduction", ["mean", "sum", "none"], ["avg"]),
            "mode": bad.value("mode", ["memory-saving", "high-performance"], ["fast"]),
            "start": bad.value("start", [None, 0], [-1, 2**40]),
            "bad_target": bad.value("target_value", [False], [True]),
            # two of the loss options (SPEC §7); the others' refusals: tests/test_lce_options.py
            "label_smoothing": bad.value("label_smoothing", [0.0, 0.2], [-0.1, 1.5, "0.1"]),
            "softcap": bad.value("softcap", [None, 3.0], [0.0, -2.0, float("inf")])}


# ---- the properties, one per entry point ------------------------------------------------------

@FUZZ
@given(case("batch_norm_reduce_backward", ["cpu", "reference", *SIM], bn_reduce_args()))
def test_fuzz_batch_norm_reduce_backward(worker, c):
    check(worker, c)


@FUZZ
@given(case("fused_linear_online_max_sum", ["cpu", "reference"], online_args()))
def test_fuzz_fused_linear_online_max_sum(worker, c):
    check(worker, c)


@FUZZ
@given(case("fused_cross_entropy_loss_with_max_sum", ["cpu", "reference"], loss_args()))
def test_fuzz_fused_cross_entropy_loss_with_max_sum(worker, c):
    check(worker, c)


@FUZZ
@given(case("fused_linear_cross_entropy_loss_grad", ["cpu", "reference", *SIM], flce_args()))
def test_fuzz_fused_linear_cross_entropy_loss_grad(worker, c):
    check(worker, c)


@FUZZ
@given(case("batch_norm_stats", ["cpu"], bn_stats_args()))
def test_fuzz_aten_batch_norm_stats(worker, c):
    check(worker, c)


@FUZZ
@given(case("batch_norm_gather_stats_with_counts", ["cpu"], gather_args()))
def test_fuzz_aten_batch_norm_gather_stats_with_counts(worker, c):
    check(worker, c)


def _tensor(shape, dtype, special="none"):
    return {"shape": shape, "dtype": dtype, "view": "contiguous", "special": special, "scale": 1.0}


# A case the seeded draws rarely reach, kept on every run: float16 backward reduce with Infs
# in grad_out on the portable loops' float blocks, where a float-block sum alone gives NaN
# and the double sums give ±Inf. scripts/sanitize_kernel_tests.sh's run drew it: Hypothesis
# takes some numbers from the literals of modules outside site-packages, so importing
# ascend_ops from another place changes the seeded draws.
INF_ON_PORTABLE_FLOAT_BLOCKS = {
    "op": "aten_batch_norm_elementwise", "impl": "cpu", "engine": "portable", "threads": 1, "seed": 0,
    "args": {"which": "batch_norm_backward_reduce", "input": _tensor([2, 3, 2, 5], "f16"),
             "grad_out": _tensor([2, 3, 2, 5], "f16", "inf"), "mean": _tensor([3], "f32"),
             "invstd": _tensor([3], "f32"), "weight": None, "bias": None, "sum_dy": _tensor([3], "f32"),
             "sum_dy_xmu": _tensor([3], "f32"), "count": [2], "count_dtype": "i32"}}


@FUZZ
@given(case("aten_batch_norm_elementwise", ["cpu"], aten_elementwise_args()))
@example(INF_ON_PORTABLE_FLOAT_BLOCKS)
def test_fuzz_aten_batch_norm_elemt_and_backward(worker, c):
    check(worker, c)


@FUZZ
@given(case("linear_cross_entropy", ["cpu"], lce_args()))
def test_fuzz_linear_cross_entropy(worker, c):
    check(worker, c)
