import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ascend_ops import testing


def clone_inputs(inputs: dict) -> dict:
    """A copy of the tensors of a sample, so a run that may write one leaves the sample intact."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def call_on_fake_tensors(op, inputs):
    """Run `op` as torch.compile traces it: on fake tensors (meta ones stay as they are)."""
    with FakeTensorMode(allow_non_fake_inputs=True) as fake_mode:
        fake = {k: fake_mode.from_tensor(v) if isinstance(v, torch.Tensor) and v.device.type != "meta"
                else v for k, v in inputs.items()}
        return op(**fake)


def assert_matches(ours, oracle, naive=None, what=""):
    """Every output within SPEC §4 of the float64 oracle (and no worse than naive torch)."""
    for i, (o, r) in enumerate(zip(ours, oracle)):
        if r is None:
            assert o is None, f"{what} output {i}: expected None, got a tensor"
            continue
        low = None if naive is None else naive[i]
        result = testing.compare(o, r, low)
        assert result.passed, f"{what} output {i}: {result.message}"


@pytest.fixture(params=["avx512", "portable"])
def cpu_path(request, monkeypatch):
    """Runs a test on each CPU kernel path: the AVX512 fast path (where the CPU has
    AVX512-BF16) and the portable path, forced with ASCEND_OPS_CPU_PORTABLE=1."""
    from ascend_ops import _C

    if request.param == "avx512":
        if not _C.cpu_avx512_kernels_supported():
            pytest.skip("this CPU lacks AVX512-BF16: only the portable path runs here")
        monkeypatch.delenv("ASCEND_OPS_CPU_PORTABLE", raising=False)
    else:
        monkeypatch.setenv("ASCEND_OPS_CPU_PORTABLE", "1")
    return request.param


@pytest.fixture
def threads():
    """Restores the thread count a test changes."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
