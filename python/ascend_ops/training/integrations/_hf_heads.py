"""Which Hugging Face causal LMs the loss patch supports, and what each does to its logits
between `lm_head` and the loss, as linear_cross_entropy's options (SPEC §7).

The patch keeps the model's own forward and only replaces what follows the head, so a model
is supported when its forward computes `logits = lm_head(hidden)` (a bias included), then
at most a per-model transform, then `self.loss_function(logits, labels, vocab_size,
**kwargs)`. The transforms in use are a scale (Granite divides by `logits_scaling`, Cohere
multiplies by `logit_scale`) and Gemma 2/3's soft-capping `cap * tanh(logits / cap)`
(`final_logit_softcapping`): each is an option of linear_cross_entropy (`logit_scale`,
`softcap`), applied to the fp32 logits inside the kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class HeadRule:
    """`options(model)` → linear_cross_entropy's logit options for the model's transform
    ({"logit_scale": s, "softcap": cap}, each left out when neutral)."""

    options: Callable[[torch.nn.Module], dict]


def _plain(model: torch.nn.Module) -> dict:
    return {}


def _softcapping(model: torch.nn.Module) -> dict:
    cap = getattr(model.config, "final_logit_softcapping", None)
    return {} if cap is None else {"softcap": float(cap)}


def _granite_scale(model: torch.nn.Module) -> dict:
    return {"logit_scale": 1.0 / float(model.config.logits_scaling)}  # logits / logits_scaling


def _cohere_scale(model: torch.nn.Module) -> dict:
    return {"logit_scale": float(model.logit_scale)}  # logits * logit_scale


# Class name → rule. Each of these forwards is `lm_head`, the transform, then
# self.loss_function(...) with ForCausalLMLoss (checked in Transformers 5.24's sources).
RULES: dict[str, HeadRule] = {
    "LlamaForCausalLM": HeadRule(_plain),
    "MistralForCausalLM": HeadRule(_plain),
    "Qwen2ForCausalLM": HeadRule(_plain),
    "Qwen3ForCausalLM": HeadRule(_plain),
    "GemmaForCausalLM": HeadRule(_plain),
    "Gemma2ForCausalLM": HeadRule(_softcapping),
    "Gemma3ForCausalLM": HeadRule(_softcapping),
    "Phi3ForCausalLM": HeadRule(_plain),
    "Olmo2ForCausalLM": HeadRule(_plain),
    "GPT2LMHeadModel": HeadRule(_plain),
    "GraniteForCausalLM": HeadRule(_granite_scale),
    "CohereForCausalLM": HeadRule(_cohere_scale),
    "OlmoForCausalLM": HeadRule(_plain),
    # heads with a bias: linear_cross_entropy's linear_bias
    "PhiForCausalLM": HeadRule(_plain),
    "GPTJForCausalLM": HeadRule(_plain),
    "CodeGenForCausalLM": HeadRule(_plain),
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
