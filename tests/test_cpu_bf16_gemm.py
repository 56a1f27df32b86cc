"""The fast path's own bf16 GEMM (fp32 out), alone: tails of every blocking level,
transposed operands, exact against an fp64 product of the same bf16 values."""

import pytest
import torch

from ascend_ops import _C

pytestmark = pytest.mark.skipif(not _C.cpu_avx512_kernels_supported(),
                                reason="this CPU lacks AVX512-BF16: the fast path never runs here")

# (m, n, k): single elements, odd K (a half-filled last pair), tails of the 12-row and
# 32-column micro-tiles, of the 192-row / 256-K / 4096-column blocks, and K = 0.
SHAPES = [(1, 1, 1), (13, 33, 7), (12, 32, 2), (197, 65, 513), (25, 4100, 31), (7, 9, 0)]


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_fp64_product(shape, transpose_a, transpose_b):
    m, n, k = shape
    gen = torch.Generator().manual_seed(m * 131 + n * 7 + k)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(k, n, generator=gen).bfloat16()
    a_in = a.T.contiguous().T if transpose_a else a  # same values, other strides
    b_in = b.T.contiguous().T if transpose_b else b
    ours = _C.cpu_bf16_matmul(a_in, b_in)
    exact = a.double() @ b.double()
    assert ours.dtype == torch.float32
    # fp32 accumulation of exact bf16 products: error ~ k * eps32 * sum |a||b|.
    bound = (a.double().abs() @ b.double().abs()) * (k + 1) * 2.0**-24 + 1e-30
    assert torch.all((ours.double() - exact).abs() <= bound)


def test_rejects_bad_operands():
    with pytest.raises(ValueError, match=r"expected \[m, k\] @ \[k, n\]"):
        _C.cpu_bf16_matmul(torch.ones(2, 3).bfloat16(), torch.ones(4, 2).bfloat16())
    with pytest.raises(TypeError, match="bfloat16"):
        _C.cpu_bf16_matmul(torch.ones(2, 3), torch.ones(3, 2))
