import pytest
import torch

from ascend_ops import testing


def clone_inputs(inputs: dict) -> dict:
    """A copy of the tensors of a sample, so a run that may write one leaves the sample intact."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def assert_matches(ours, oracle, naive=None, what=""):
    """Every output within SPEC §4 of the float64 oracle (and no worse than naive torch)."""
    for i, (o, r) in enumerate(zip(ours, oracle)):
        if r is None:
            assert o is None, f"{what} output {i}: expected None, got a tensor"
            continue
        low = None if naive is None else naive[i]
        result = testing.compare(o, r, low)
        assert result.passed, f"{what} output {i}: {result.message}"


@pytest.fixture
def threads():
    """Restores the thread count a test changes."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
