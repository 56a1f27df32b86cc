"""One rank of the Megatron tests (tests/megatron/test_megatron.py starts them): a 2-layer
megatron-core GPTModel (local layer spec) over gloo on CPU, tensor-parallel over every rank,
one training step unpatched and one patched (ascend_ops.integrations.megatron), from the
same weights; saves both losses and every gradient.

    python tests/megatron/megatron_worker.py CASES RANK WORLD PORT OUT_DIR

CASES: comma-separated, each `tied|untied`-`sp|nosp`-`fp32|bf16`, optionally `-smooth` (label
smoothing, against a reference from the whole vocabulary's logits), saved as {case: result};
or one `memory-ours|memory-megatron` (the peak resident memory of one step, one provider
per process).

What a CPU run needs, and no more: megatron-core asks torch.cuda for the current device
(mapped to "cpu") and keeps its RNG states in a CUDA tracker (replaced by one that forks
nothing: dropout is off, so no state is drawn); its torch norm refuses sequence parallel
because the norm's weight gradient then needs the all-reduce the training loop does
(finalize_model_grads), a step both runs compare before, so the test builds it anyway.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import pathlib
import sys

import torch
import torch.distributed as dist

V, H, HEADS, LAYERS = 258, 64, 4, 2  # V divisible by the ranks, as Megatron pads it
B, S = 3, 12
SMOOTHING = 0.1
MEMORY_SIZE = dict(vocab=65536, seq=1024, batch=1)  # [s, b, V/tp] bf16 logits: 64 MiB a rank


class CpuRngTracker:
    """Megatron's CUDA RNG tracker's interface, forking nothing (no dropout here)."""

    def fork(self, name=None):
        return contextlib.nullcontext()

    def add(self, name, seed):
        pass

    def reset(self):
        pass

    def get_states(self):
        return {}

    def set_states(self, states):
        pass

    def is_initialized(self):
        return True


def run_megatron_on_cpu() -> None:
    from megatron.core.tensor_parallel import random as megatron_random
    from megatron.core.transformer import torch_norm

    torch.cuda.current_device = lambda: "cpu"
    megatron_random._CUDA_RNG_STATE_TRACKER = CpuRngTracker()
    megatron_random._CUDA_RNG_STATE_TRACKER_INITIALIZED = True

    def torch_norm_for_any_parallelism(cls, config, hidden_size, eps=1e-5, **unused):
        return torch.nn.LayerNorm(hidden_size, eps=eps)

    torch_norm.WrappedTorchNorm.__new__ = staticmethod(torch_norm_for_any_parallelism)


def build(case: str, world: int, vocab: int = V, seq: int = S):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    bf16 = "bf16" in case
    config = TransformerConfig(
        num_layers=LAYERS, hidden_size=H, num_attention_heads=HEADS, hidden_dropout=0.0,
        attention_dropout=0.0, tensor_model_parallel_size=world,
        sequence_parallel="-sp" in case and world > 1, use_cpu_initialization=True, bf16=bf16)
    torch.manual_seed(0)  # the same full weights on every rank and in both runs, then split
    model = GPTModel(config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=vocab, max_sequence_length=seq,
                     share_embeddings_and_output_weights=case.startswith("tied"))
    if bf16:  # as Megatron trains in bfloat16: its parameters and activations in bfloat16
        from megatron.core.transformer.module import Float16Module

        return Float16Module(config, model)
    return model


def batch(vocab: int = V, b: int = B, s: int = S):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (b, s), generator=gen)
    labels = torch.randint(0, vocab, (b, s), generator=gen)
    loss_mask = torch.ones(b, s)
    loss_mask[0, :4] = 0  # a prompt not trained on, as Megatron's loss_func masks it
    positions = torch.arange(s).unsqueeze(0).expand(b, s)
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool), 1).view(1, 1, s, s).expand(b, 1, s, s)
    return ids, positions, causal, labels, loss_mask


def whole_vocabulary_reference(*, hidden_states, output_layer, output_weight, labels, **unused):
    """Label smoothing's reference: Megatron's logits, gathered over the vocabulary, and
    torch's cross entropy with smoothing s = α·V/(V − 1) (Options' definition)."""
    from megatron.core.tensor_parallel.mappings import gather_from_tensor_model_parallel_region

    logits, _ = output_layer(hidden_states, weight=output_weight)  # [s, b, V/tp]
    logits = gather_from_tensor_model_parallel_region(logits, output_layer.tp_group)
    s, b, vocab = logits.shape
    loss = torch.nn.functional.cross_entropy(
        logits.float().reshape(s * b, vocab), labels.transpose(0, 1).reshape(-1),
        reduction="none", label_smoothing=SMOOTHING * vocab / (vocab - 1))
    return loss.view(s, b).transpose(0, 1)


def step(model, inputs, **forward_kwargs):
    """Megatron's loss_func: the masked mean of the per-token loss; forward and backward."""
    ids, positions, causal, labels, loss_mask = inputs
    model.zero_grad(set_to_none=True)
    per_token = model(ids, positions, causal, labels=labels, **forward_kwargs)
    total = (per_token.float() * loss_mask).sum() / loss_mask.sum()
    total.backward()
    return per_token.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()
                                if p.grad is not None}


def compare(case: str, world: int) -> dict:
    import ascend_ops.integrations.megatron as aom

    inputs = batch()
    theirs = build(case, world)
    ours = build(case, world)
    if case.endswith("-smooth"):
        loss_theirs, grads_theirs = step(theirs, inputs,
                                         output_processor=whole_vocabulary_reference)
        aom.apply(gpt_model(ours), label_smoothing=SMOOTHING)
    else:
        loss_theirs, grads_theirs = step(theirs, inputs)
        aom.apply(gpt_model(ours))
    assert aom.is_patched(gpt_model(ours))
    loss_ours, grads_ours = step(ours, inputs)
    gpt = gpt_model(ours)
    return dict(loss_theirs=loss_theirs, loss_ours=loss_ours, grads_theirs=grads_theirs,
                grads_ours=grads_ours, sequence_parallel=gpt.output_layer.sequence_parallel,
                tied=gpt.output_layer.weight is None,
                weight_dtype=gpt.shared_embedding_or_output_weight().dtype)


def gpt_model(model):
    """The GPTModel inside Megatron's Float16Module (apply patches the model itself)."""
    return getattr(model, "module", model)


def memory(provider: str, world: int) -> dict:
    """The peak resident memory of one training step beyond the resident memory before it,
    less the gradients it leaves (as scripts/benchmark_hf_integration.py measures)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
    from worker_processes import reset_peak_rss, status_kb

    import ascend_ops.integrations.megatron as aom

    size = MEMORY_SIZE
    model = build("tied-nosp-bf16", world, vocab=size["vocab"], seq=size["seq"])
    if provider == "ours":
        aom.apply(gpt_model(model))
    inputs = batch(size["vocab"], size["batch"], size["seq"])
    step(model, inputs)  # warm-up
    model.zero_grad(set_to_none=True)
    gc.collect()
    before = status_kb("VmRSS")
    reset_peak_rss()
    _, grads = step(model, inputs)
    peak = status_kb("VmHWM")
    grads_kb = sum(g.nbytes for g in grads.values()) / 1024
    return dict(peak_extra_mib=max(0.0, (peak - before - grads_kb) / 1024), **size)


def main(case: str, rank: int, world: int, port: int, out: pathlib.Path) -> None:
    torch.set_num_threads(1)  # the ranks share the machine's cores
    run_megatron_on_cpu()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=world)
    try:
        if case.startswith("memory-"):
            result = memory(case.removeprefix("memory-"), world)
        else:
            result = {c: compare(c, world) for c in case.split(",")}
        torch.save(result, out / f"rank{rank}.pt")
    finally:
        parallel_state.destroy_model_parallel()
        gc.collect()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
         pathlib.Path(sys.argv[5]))
