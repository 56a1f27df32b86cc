"""Which Hugging Face causal LMs the loss patch supports, and what each does to its logits
between `lm_head` and the loss, stated as a factor on the hidden states (the model's own
code applies it to the hidden states the capturing head hands back, _hf_forward.py; the
rule is there to refuse what cannot be expressed so).

The patch keeps the model's own forward and only replaces what follows the head, so a model
is supported when its forward computes `logits = lm_head(hidden)`, then at most a
per-model transform, then `self.loss_function(logits, labels, vocab_size, **kwargs)`. A
transform is expressible through linear_cross_entropy only if it is linear in the logits:
`logits * s == (hidden * s) @ W.T`. Soft-capping (`cap * tanh(logits / cap)`) is not, so
a model that has it is refused rather than given a different loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class HeadRule:
    """`logit_scale(model)` → the factor s in `loss(logits * s)`; raises for a transform
    linear_cross_entropy cannot express."""

    logit_scale: Callable[[torch.nn.Module], float]


def _plain(model: torch.nn.Module) -> float:
    return 1.0


def _refuse_softcapping(model: torch.nn.Module) -> float:
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap is not None:
        raise ValueError(
            f"ascend_ops.integrations.transformers.apply: {type(model).__name__} soft-caps its "
            f"logits (config.final_logit_softcapping = {cap}): cap * tanh(logits / cap) is not "
            f"linear in the logits, so linear_cross_entropy cannot compute this model's loss. "
            f"Set config.final_logit_softcapping = None (training without soft-capping) or "
            f"leave the model unpatched")
    return 1.0


def _granite_scale(model: torch.nn.Module) -> float:
    return 1.0 / float(model.config.logits_scaling)  # logits / logits_scaling


def _cohere_scale(model: torch.nn.Module) -> float:
    return float(model.logit_scale)  # logits * logit_scale


# Class name → rule. Each of these forwards is `lm_head`, the transform, then
# self.loss_function(...) with ForCausalLMLoss (checked in Transformers 5.24's sources).
RULES: dict[str, HeadRule] = {
    "LlamaForCausalLM": HeadRule(_plain),
    "MistralForCausalLM": HeadRule(_plain),
    "Qwen2ForCausalLM": HeadRule(_plain),
    "Qwen3ForCausalLM": HeadRule(_plain),
    "GemmaForCausalLM": HeadRule(_plain),
    "Gemma2ForCausalLM": HeadRule(_refuse_softcapping),
    "Gemma3ForCausalLM": HeadRule(_refuse_softcapping),
    "Phi3ForCausalLM": HeadRule(_plain),
    "Olmo2ForCausalLM": HeadRule(_plain),
    "GPT2LMHeadModel": HeadRule(_plain),
    "GraniteForCausalLM": HeadRule(_granite_scale),
    "CohereForCausalLM": HeadRule(_cohere_scale),
    "OlmoForCausalLM": HeadRule(_plain),
    # MoE: after the loss, `loss += router_aux_loss_coef * aux_loss` when labels are given
    # and output_router_logits is on; the patched forward adds the same term.
    "MixtralForCausalLM": HeadRule(_plain),
    "Qwen2MoeForCausalLM": HeadRule(_plain),
    "Qwen3MoeForCausalLM": HeadRule(_plain),
}


def supported_class(model: torch.nn.Module) -> type:
    """The class in `model`'s MRO whose rule applies; a subclass is accepted only when it
    keeps that class's forward (an overridden forward may treat the logits differently)."""
    for cls in type(model).__mro__:
        if cls.__name__ in RULES and cls.__module__.startswith("transformers."):
            if type(model).forward is not cls.forward:
                raise ValueError(
                    f"ascend_ops.integrations.transformers.apply: {type(model).__name__} "
                    f"overrides the forward of {cls.__name__}; the patch supports only the "
                    f"forward Transformers defines")
            return cls
    raise ValueError(
        f"ascend_ops.integrations.transformers.apply: {type(model).__name__} is not a "
        f"supported causal LM; supported: {', '.join(sorted(RULES))}")
