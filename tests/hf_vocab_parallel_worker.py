"""One rank of the vocab-parallel Hugging Face test (tests/test_hf_integration.py starts
two): every rank builds the same tiny Llama, keeps its own rows of lm_head.weight (uneven
shards: 129 and 128 of V = 257), patches the model with `process_group`, runs forward and
backward over gloo on 127.0.0.1 and saves its loss and gradients.

    python tests/hf_vocab_parallel_worker.py RANK WORLD PORT OUT_DIR
"""

from __future__ import annotations

import datetime
import gc
import pathlib
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hf_tiny_models import V, batch, tiny_model  # noqa: E402

import ascend_ops.integrations.transformers as aot  # noqa: E402

DTYPE = torch.bfloat16


def shard_rows(rank: int, world: int) -> tuple[int, int]:
    """[start, end) of this rank's vocabulary rows: the first ranks take one more."""
    sizes = [V // world + (r < V % world) for r in range(world)]
    start = sum(sizes[:rank])
    return start, start + sizes[rank]


def run(rank: int, world: int) -> dict:
    model = tiny_model("llama", DTYPE)
    start, end = shard_rows(rank, world)
    full = model.lm_head.weight
    model.lm_head = torch.nn.Linear(full.size(1), end - start, bias=False, dtype=DTYPE)
    with torch.no_grad():
        model.lm_head.weight.copy_(full[start:end])
    aot.apply(model, process_group=dist.group.WORLD, vocab_start_index=start)
    ids, labels = batch()
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    return dict(loss=loss.detach(), start=start, end=end,
                grads={n: p.grad for n, p in model.named_parameters()})


def main(rank: int, world: int, port: int, out: pathlib.Path) -> None:
    torch.set_num_threads(1)  # ranks share the machine's cores
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        torch.save(run(rank, world), out / f"rank{rank}.pt")
    finally:
        gc.collect()  # free the group's last users while it lives
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
