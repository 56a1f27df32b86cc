"""The checker: a Transformers model class built tiny from its own configuration class, with
random weights, run unpatched and patched on the same batch, in float32 and in bfloat16; the
loss and the gradients must agree (Agreement). Used by `python -m
ascend_ops.integrations.transformers --check`, by scripts/sweep_hf_models.py (every class of
the causal-LM and image-text-to-text mappings; its verdicts ship as hf_verdicts.json, which
`apply` reads) and by tests/test_hf_models.py.

A tiny model is the class's default configuration with its sizes made small (TINY_SIZES,
in every sub-configuration; TINY_OVERRIDES for the few model types that need more), what
follows the head made to matter (TINY_HEAD), dropout off and the special token ids moved
into a small vocabulary (VOCAB). The batch is text only, its labels with a prompt and
padding ignored: a vision-language model runs as its language model, and what follows its
head, the only part the patch replaces, is the same with images.

Tolerances (as tests/test_hf_integration.py): float32 loss 1e-5 and gradients 1e-4 (the
float32 head computes in float32: only the order of sums differs); bfloat16 loss 1e-3 and
gradients 2e-2 (Transformers rounds the logits to bfloat16 before its float32 loss;
linear_cross_entropy keeps them in float32 and rounds the gradients of the hidden states and
of the head's weight to bfloat16), each on top of twice the unpatched run's own distance to
a finer reference (Agreement).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys
import time

import torch

from ._hf_heads import NotPatchable, class_key, head_rule

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 301  # odd, so no block of the kernels' vocabulary loop is whole by accident
BATCH, SEQ = 2, 13
TOLERANCES = {torch.float32: (1e-5, 1e-4), torch.bfloat16: (1e-3, 2e-2)}  # (loss, gradient)
DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16"}
MAPPINGS = ("causal-lm", "image-text-to-text")

# Every (sub-)configuration's sizes, by field name: small, and consistent with each other
# (64 = 4 heads x 16, the MLA ranks below the head sizes, 4 experts of which 2 per token).
TINY_SIZES = {
    "hidden_size": 64, "n_embd": 64, "d_model": 64, "embed_dim": 64, "dim": 64,
    "intermediate_size": 128, "ffn_dim": 128, "n_inner": 128, "d_ff": 128,
    "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "mlp_dim": 128, "ffn_hidden_size": 128,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "shared_intermediate_size": 32, "moe_shared_expert_intermediate_size": 32,
    "dense_intermediate_size": 128, "intermediate_size_mlp": 128, "expert_ffn_hidden_size": 32,
    "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2, "n_layers": 2, "depth": 2,
    "encoder_layers": 2, "decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "num_heads": 4, "n_heads": 4,
    "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "num_key_value_heads": 2, "num_kv_heads": 2, "head_dim": 16,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "n_shared_experts": 1, "n_group": 1,
    "topk_group": 1, "first_k_dense_replace": 1,
    "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16,
    "qk_head_dim": 32, "v_head_dim": 16, "rotary_dim": 8,
    "index_head_dim": 16, "index_n_heads": 2, "index_topk": 8,
    "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "projection_dim": 64, "out_hidden_size": 64, "text_hidden_size": 64,
    "projector_hidden_size": 64,
    # state-space layers: 4 heads of 32 = 2 x 64 (their expand), small states and chunks
    "mamba_n_heads": 4, "mamba_num_heads": 4, "mamba_d_head": 32, "mamba_head_dim": 32,
    "mamba_d_ssm": 128, "mamba_d_state": 16, "ssm_state_size": 16, "state_size": 16,
    "mamba_chunk_size": 16, "chunk_size": 16, "n_groups": 1, "mamba_n_groups": 1,
    # Gemma's per-layer embeddings
    "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 16,
}
# What follows the head, made to matter: a soft-cap near these tiny models' largest logits
# (~0.4), a scale far from 1, the router's auxiliary loss computed (and so added).
TINY_HEAD = {"final_logit_softcapping": 0.25, "logits_soft_cap": 0.25, "logits_scaling": 4.0,
             "output_router_logits": True}
# The rotary sections of multimodal RoPE (time, height, width) sum to half the rotary width:
# 8 for the heads of 16 above.
ROPE_HALF = 8


def _with_mrope(fields: dict) -> dict:
    """Multimodal RoPE's sections, which the model otherwise takes at full size."""
    return {**(fields.get("rope_parameters") or {}), "mrope_section": _rope_sections([2, 3, 3])}


# What a few model types need beyond the rules above, by (sub-)configuration model type.
TINY_OVERRIDES: dict[str, dict] = {
    **{t: {"rope_parameters": _with_mrope} for t in (
        "qwen2_vl_text", "qwen2_5_vl_text", "qwen2_5_omni_text", "glm4v_text", "glm4v_moe_text",
        "glm_ocr_text", "glm46v_text", "paddleocr_vl_text")},
    # half of its heads rotate: sections of the 4 pairs that do
    "glm4v_moe_text": {"rope_parameters": lambda f: {**(f.get("rope_parameters") or {}),
                                                     "mrope_section": [1, 1, 2]}},
    "deepseek_v2": {"num_experts_per_tok": 2},  # None by default, which its router cannot take
    "deepseek_v4": {"num_hidden_layers": 4},  # its first 3 layers route by hash, no router loss
    "mistral4": {"head_dim": 32},  # its heads are qk_nope_head_dim + qk_rope_head_dim wide
    "mamba2": {"head_dim": 32},  # its heads are its state-space heads: 4 x 32 = 2 x 64
    # their layer lists, for 2 layers
    "gpt_neo": {"attention_types": [[["global", "local"], 1]]},
    "zamba": {"layers_block_type": ["linear_attention", "hybrid"]},
    "zamba2": {"layers_block_type": ["linear_attention", "hybrid"], "hybrid_layer_ids": [1]},
}
# The test suite's sample (tests/test_hf_models.py), by class: every family Liger-Kernel
# patches that the installed Transformers has (its text and its multimodal classes), and
# the DeepSeek and GLM models most trained on Atlas clusters.
SAMPLE = (
    "LlamaForCausalLM", "Llama4ForCausalLM", "MllamaForCausalLM",
    "MllamaForConditionalGeneration", "LlavaForConditionalGeneration", "MistralForCausalLM",
    "MinistralForCausalLM", "MixtralForCausalLM", "Mistral3ForConditionalGeneration",
    "GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration", "Gemma4ForCausalLM", "PaliGemmaForConditionalGeneration",
    "Qwen2ForCausalLM", "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForConditionalGeneration", "Phi3ForCausalLM",
    "Olmo2ForCausalLM", "Olmo3ForCausalLM", "Glm4ForCausalLM", "Glm4vForConditionalGeneration",
    "Glm4vMoeForConditionalGeneration", "GraniteForCausalLM", "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "GptOssForCausalLM",
    "InternVLForConditionalGeneration", "SmolLM3ForCausalLM", "SmolVLMForConditionalGeneration",
    "HunYuanDenseV1ForCausalLM", "HunYuanMoEV1ForCausalLM", "Exaone4ForCausalLM",
    "FalconH1ForCausalLM", "NemotronForCausalLM",
)
_DROPOUT_WORDS = ("dropout", "pdrop", "jitter")
_TOKEN_WORDS = ("token_id", "token_index", "token_ids")


@dataclasses.dataclass
class Verdict:
    """One class's check. verdict: "exact" (patched = unpatched within the tolerances, in
    both dtypes), "differs" (it ran, and a loss or gradient is off), "refused" (apply
    cannot patch its forward: reason), "not run" (no tiny model or batch could be run:
    reason)."""

    name: str
    verdict: str
    reason: str = ""
    model_type: str = ""
    mappings: tuple[str, ...] = ()
    rule: str = ""
    code_key: str = ""
    errors: dict = dataclasses.field(default_factory=dict)  # dtype → [loss, grad, param] (Agreement)
    references: dict = dataclasses.field(default_factory=dict)  # dtype → the reference's dtype
    seconds: float = 0.0

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["mappings"] = list(self.mappings)
        del out["name"], out["seconds"]  # the name is the key; times vary from run to run
        return {k: v for k, v in out.items() if v not in ("", (), [], {}, None) or k == "verdict"}


# -- which classes: the installed Transformers' mappings -----------------------------------------


def mapped_classes() -> dict[str, dict]:
    """class name → {"model_type": first model type naming it, "mappings": [...]}, for
    every class of the causal-LM and image-text-to-text auto mappings."""
    from transformers.models.auto import modeling_auto as auto

    found: dict[str, dict] = {}
    for mapping, names in zip(MAPPINGS, (auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                         auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)):
        for model_type, class_name in names.items():
            entry = found.setdefault(class_name, {"model_type": model_type, "mappings": []})
            if mapping not in entry["mappings"]:
                entry["mappings"].append(mapping)
    return found


def resolve(what: str) -> tuple[type, str]:
    """(class, model type) of a model type, a class name of the mappings, or
    `module:Class` (a class of the user's own)."""
    import importlib

    import transformers
    from transformers.models.auto import modeling_auto as auto

    if ":" in what:
        module, _, name = what.partition(":")
        cls = importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
        return cls, getattr(cls.config_class, "model_type", "")
    classes = mapped_classes()
    if what in classes:
        return getattr(transformers, what), classes[what]["model_type"]
    for names in (auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                  auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES):
        if what in names:
            return getattr(transformers, names[what]), what
    raise ValueError(f"{what!r} is neither a model type nor a class of Transformers' causal-LM "
                     f"or image-text-to-text mappings, nor a module:Class")


# -- a tiny model ------------------------------------------------------------------------------


def tiny_config(config_class, config=None):
    """A small configuration of `config_class`: TINY_SIZES, no dropout, the token ids in
    VOCAB; from its defaults with TINY_HEAD, or from `config`'s fields as they are (a
    user's configuration is checked with its own soft-cap, scale and router settings)."""
    base = (config if config is not None else config_class()).to_dict()
    kwargs = _tiny_fields(base, {}, TINY_HEAD if config is None else {}, own=config is not None)
    kwargs.pop("model_type", None)
    return config_class(**kwargs)


# Sizes a configuration derives when they are None (so None is no choice of the model's).
_DERIVED_WHEN_NONE = ("head_dim", "num_key_value_heads")


def _tiny_fields(fields: dict, token_ids: dict[int, int], head: dict, own: bool) -> dict:
    """The fields of a tiny configuration: the rules above, and for a user's configuration
    (own) every other field as it is, but its per-layer lists (rebuilt for 2 layers)."""
    sizes = dict(TINY_SIZES)
    if "kv_lora_rank" in fields:  # multi-head latent attention: a key and value per head
        sizes["num_key_value_heads"] = sizes["num_attention_heads"]
    layers = fields.get("num_hidden_layers")
    out = {}
    for key, value in fields.items():
        if isinstance(value, dict) and "model_type" in value:
            out[key] = _tiny_fields(value, token_ids, head, own)
        elif key == "vocab_size" and isinstance(value, int):
            out[key] = VOCAB
        elif key in sizes and ((isinstance(value, int) and not isinstance(value, bool))
                               or (value is None and key in _DERIVED_WHEN_NONE)):
            out[key] = sizes[key]
        elif key in head:
            out[key] = head[key]
        elif any(w in key for w in _DROPOUT_WORDS) and isinstance(value, float):
            out[key] = 0.0
        elif any(w in key for w in _TOKEN_WORDS):
            out[key] = _small_token_ids(value, token_ids)
        elif key == "rope_parameters" and isinstance(value, dict) and "mrope_section" in value:
            out[key] = {**value, "mrope_section": _rope_sections(value["mrope_section"])}
        elif key == "model_type":
            out[key] = value
        elif own and not (isinstance(value, list) and len(value) == layers):
            out[key] = value
    for key, value in TINY_OVERRIDES.get(fields.get("model_type"), {}).items():
        out[key] = value(fields) if callable(value) else value
    return out


def _rope_sections(sections: list[int]) -> list[int]:
    """The sections scaled to sum to ROPE_HALF, each at least 1."""
    total = sum(sections)
    scaled = [max(1, round(s * ROPE_HALF / total)) for s in sections]
    scaled[0] += ROPE_HALF - sum(scaled)
    return scaled


def _small_token_ids(value, token_ids: dict[int, int]):
    """Special token ids at the top of VOCAB (each old id keeps one new id everywhere)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if value < 0:
            return value
        if value not in token_ids:
            token_ids[value] = VOCAB - 1 - len(token_ids)
        return token_ids[value]
    if isinstance(value, (list, tuple)):
        return type(value)(_small_token_ids(v, token_ids) for v in value)
    return value


def special_token_ids(config) -> set[int]:
    """Every token id a configuration (and its sub-configurations) names."""
    ids: set[int] = set()

    def walk(fields: dict):
        for key, value in fields.items():
            if isinstance(value, dict):
                walk(value)
            elif isinstance(key, str) and any(w in key for w in _TOKEN_WORDS):
                for v in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                        ids.add(v)

    walk(config.to_dict())
    return ids


def tiny_model(cls: type, config, dtype: torch.dtype, seed: int = 0) -> torch.nn.Module:
    """A model of `cls` from `config`, random weights from `seed`, in training mode."""
    torch.manual_seed(seed)
    model = cls(config)
    head = model.get_output_embeddings()
    if isinstance(head, torch.nn.Linear) and head.bias is not None:
        with torch.no_grad():  # Transformers initialises it to 0: give it values to matter
            head.bias.normal_(0.0, 0.5)
    return model.to(dtype).train()


def text_batch(config, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids [BATCH, SEQ] free of special tokens, and labels with ignored rows: a prompt
    prefix and right padding."""
    specials = special_token_ids(config)
    allowed = torch.tensor([i for i in range(VOCAB) if i not in specials])
    gen = torch.Generator().manual_seed(seed)
    ids = allowed[torch.randint(0, len(allowed), (BATCH, SEQ), generator=gen)]
    labels = ids.clone()
    labels[0, :4] = -100
    labels[1, -3:] = -100
    return ids, labels


# -- the comparison ----------------------------------------------------------------------------


def rel_err(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    theirs = theirs.double()
    return ((ours.double() - theirs).norm() / theirs.norm().clamp_min(1e-30)).item()


def run(model: torch.nn.Module, inputs: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Forward and backward of one model (the same RNG state for every model: dropout or
    router noise draw alike): its loss, and the gradients of every parameter and, under
    "(head input)", of the hidden states its head is given."""
    seen = {}

    def keep_grad(module, args, output):
        if torch.is_tensor(args[0]) and args[0].requires_grad:
            args[0].register_hook(lambda g: seen.__setitem__("grad", g))

    handle = model.get_output_embeddings().register_forward_hook(keep_grad)
    try:
        torch.manual_seed(2)
        out = model(**inputs)
        out.loss.backward()
    finally:
        handle.remove()
    if out.logits is not None and getattr(model, "_ascend_ops_patch", None) is not None:
        raise AssertionError("the patched forward made logits")
    grads = {n: p.grad for n, p in model.named_parameters()}
    grads[HEAD_INPUT] = seen.get("grad")
    return out.loss.detach(), grads


HEAD_INPUT = "(head input)"
ALL_PARAMETERS = "(all parameters)"


@dataclasses.dataclass
class Agreement:
    """The patched run against the unpatched one, each measured against a run of the
    unpatched model on the same weights in a finer dtype (float64 for float32, float32 for
    bfloat16): for each tensor compared, the fraction of its bound the patched run uses,
    ‖ours − ref‖ / (2 ‖theirs − ref‖ + tol ‖ref‖) (STYLE: "no worse than Transformers at
    this dtype"). `loss` is the loss's; `grad` the worst gradient's, `param` its name.
    Exact: both ≤ 1. A 5 % error in the loss or in any tensor compared is rejected where the
    unpatched run is within 1.5 % of the reference (every regular gradient). A gradient
    that is zero in exact arithmetic is rounding noise in every run and is not compared
    (is_noise).

    Which tensors: in float32 every parameter's gradient. In bfloat16 the ones the patch
    computes (the gradient of the head's input, which alone carries the loss into the
    decoder, and of the head's parameters) and all parameters' gradients as one vector: the
    decoder's backward is Transformers' own code in both runs, and a single small
    parameter's bfloat16 gradient (a learned scalar, a gate bias) is rounding noise whose
    two draws differ by any ratio."""

    loss: float
    grad: float
    param: str

    def within(self) -> bool:
        return self.loss <= 1.0 and self.grad <= 1.0  # False for NaN


def bound_used(ours: torch.Tensor, theirs: torch.Tensor, ref: torch.Tensor | None,
               tol: float) -> float:
    """‖ours − ref‖ / (2 ‖theirs − ref‖ + tol ‖ref‖); without a reference, ‖ours − theirs‖
    / (tol ‖theirs‖)."""
    if ref is None:
        return rel_err(ours, theirs) / tol
    ref = ref.double()
    bound = 2 * (theirs.double() - ref).norm() + tol * ref.norm()
    value = ((ours.double() - ref).norm() / bound.clamp_min(1e-300)).item()
    return value if value == value else float("inf")  # NaN: the worst there is


def is_noise(theirs: torch.Tensor, ref: torch.Tensor) -> bool:
    """A gradient the unpatched run gets wrong by more than its own size: zero in exact
    arithmetic (a key bias's, a hash-routed gate's), rounding noise in every run."""
    ref = ref.double()
    return bool((theirs.double() - ref).norm() > ref.norm())


def reference_of(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """The unpatched model on the same weights in a finer dtype: float64 for a float32 run,
    float32 for a bfloat16 one; experts computed one by one (grouped_mm takes no float64)."""
    reference = copy.deepcopy(model).to(torch.float64 if dtype == torch.float32 else torch.float32)
    for module in reference.modules():
        config = getattr(module, "config", None)
        if getattr(config, "_experts_implementation", None) not in (None, "eager"):
            config._experts_implementation = "eager"
    return reference


def compared_tensors(grads: dict, head: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The gradients the verdict compares in this dtype (Agreement)."""
    present = {n: g for n, g in grads.items() if g is not None}
    if dtype == torch.float32:
        return present
    params = [g.reshape(-1).double() for n, g in present.items() if n != HEAD_INPUT]
    picked = {n: g for n, g in present.items() if n == HEAD_INPUT or n.startswith(head + ".")}
    picked[ALL_PARAMETERS] = torch.cat(params)
    return picked


def compare(theirs: torch.nn.Module, ours: torch.nn.Module, head: str, inputs: dict,
            dtype: torch.dtype) -> tuple[Agreement, str]:
    """Runs the unpatched, the patched and the reference model; (the agreement, what the
    reference was). Where the reference cannot run, the unpatched run alone is the reference."""
    loss_tol, grad_tol = TOLERANCES[dtype]
    loss_theirs, grads_theirs = run(theirs, inputs)
    loss_ours, grads_ours = run(ours, inputs)
    for name, g in grads_ours.items():
        if (g is None) != (grads_theirs[name] is None):
            raise AssertionError(f"{name}: a gradient on one side only")
    try:
        reference = reference_of(theirs, dtype)
        loss_ref, grads_ref = run(reference, inputs)
        what = str(next(reference.parameters()).dtype).replace("torch.", "")
    except Exception as e:  # noqa: BLE001 - an op without the finer dtype on CPU
        loss_ref, grads_ref, what = None, {}, f"none ({type(e).__name__}: {_first_line(str(e))})"
    theirs_t = compared_tensors(grads_theirs, head, dtype)
    ours_t = compared_tensors(grads_ours, head, dtype)
    ref_t = compared_tensors(grads_ref, head, dtype) if grads_ref else {}
    if len(ours_t) <= 1:
        raise AssertionError("no parameter received a gradient")
    loss = bound_used(loss_ours, loss_theirs, loss_ref, loss_tol)
    worst, worst_name = -1.0, ""
    for name, g in ours_t.items():
        if name in ref_t and is_noise(theirs_t[name], ref_t[name]):
            continue
        used = bound_used(g, theirs_t[name], ref_t.get(name), grad_tol)
        if used > worst:
            worst, worst_name = used, name
    return Agreement(loss=loss, grad=worst, param=worst_name), what


def training_inputs(model_class: type, config) -> dict:
    ids, labels = text_batch(config)
    inputs = dict(input_ids=ids, labels=labels)
    import inspect

    params = inspect.signature(model_class.forward).parameters
    if "use_cache" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        inputs["use_cache"] = False  # training: a hybrid's cache of linear layers alone fails
    return inputs


def check_class(cls: type, model_type: str = "", config=None,
                mappings: tuple[str, ...] = ()) -> Verdict:
    """The verdict for one class, from a tiny model of its configuration class (`config`'s
    fields when given, else the class's defaults)."""
    from . import transformers as aot

    start = time.perf_counter()
    verdict = Verdict(name=cls.__name__, verdict="not run", model_type=model_type,
                      mappings=tuple(mappings), code_key=class_key(cls))
    try:
        config = tiny_config(cls.config_class, config)
        inputs = training_inputs(cls, config)
        for dtype in (torch.float32, torch.bfloat16):
            theirs = tiny_model(cls, config, dtype)
            try:
                rule = head_rule(theirs)
            except NotPatchable as e:
                verdict.verdict, verdict.reason = "refused", str(e)
                return verdict
            verdict.code_key = rule.key
            verdict.rule = rule.describe(bias=theirs.get_output_embeddings().bias is not None)
            ours = aot.install(copy.deepcopy(theirs), rule)
            agreement, reference = compare(theirs, ours, rule.head, inputs, dtype)
            verdict.references[DTYPE_NAMES[dtype]] = reference
            verdict.errors[DTYPE_NAMES[dtype]] = [float(f"{agreement.loss:.3g}"),
                                                  float(f"{agreement.grad:.3g}"), agreement.param]
            if not agreement.within():
                verdict.reason = (f"{DTYPE_NAMES[dtype]}: the loss uses {agreement.loss:.3g} "
                                  f"of its bound, the gradient of {agreement.param} "
                                  f"{agreement.grad:.3g}")
                if reference.startswith("none"):
                    # without a finer run, a gradient that is zero in exact arithmetic cannot
                    # be told from rounding noise: no verdict on the patch
                    verdict.verdict = "not run"
                    verdict.reason += (f", with no finer run to tell rounding noise apart "
                                       f"(its own {reference})")
                else:
                    verdict.verdict = "differs"
                return verdict
        verdict.verdict = "exact"
        return verdict
    except Exception as e:  # noqa: BLE001 - a verdict records why a class could not be run
        verdict.verdict = "not run"
        verdict.reason = f"{type(e).__name__}: {_first_line(str(e))}"
        return verdict
    finally:
        verdict.seconds = round(time.perf_counter() - start, 2)


def _first_line(text: str) -> str:
    """An error's message on one line: its first two lines (a validation error's second
    says what failed), at most 200 characters."""
    line = " ".join(part.strip() for part in text.strip().splitlines()[:2])
    return line if len(line) <= 200 else line[:197] + "..."


# -- the command line --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    from . import _hf_verdicts

    parser = argparse.ArgumentParser(
        prog="python -m ascend_ops.integrations.transformers",
        description="Check that the loss patch gives a Transformers model class its own loss "
                    "and gradients (a tiny random model, float32 and bfloat16), and record "
                    "the verdict so that apply() takes the class.")
    parser.add_argument("--check", metavar="MODEL_TYPE_OR_CLASS_OR_DIR", required=True,
                        help="a model type (llama), a class name (LlamaForCausalLM), or a "
                             "directory holding a config.json (its class from "
                             "`architectures`)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="for a directory whose model is defined by its own code")
    parser.add_argument("--no-record", action="store_true",
                        help=f"only print the verdict (default: record it in "
                             f"{_hf_verdicts.user_verdicts_path()})")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    if os.path.isdir(args.check) or args.check.endswith(".json"):
        verdict = check_directory(args.check, args.trust_remote_code)
    else:
        cls, model_type = resolve(args.check)
        verdict = check_class(cls, model_type, mappings=tuple(
            mapped_classes().get(cls.__name__, {}).get("mappings", ())))
    shipped = _hf_verdicts.shipped().get(verdict.name)
    if shipped is not None and shipped.get("code_key") == verdict.code_key:
        print(f"(the shipped sweep found {verdict.name} {shipped['verdict']})")
    print(format_verdict(verdict))
    if not args.no_record and verdict.code_key:
        path = _hf_verdicts.record(verdict)
        print(f"recorded in {path}")
    return 0 if verdict.verdict == "exact" else 1


def check_directory(path: str, trust_remote_code: bool) -> Verdict:
    """A model directory (its config.json): the class its `architectures` names, from the
    installed Transformers or (trust_remote_code) the directory's own code, checked tiny
    from that configuration."""
    import transformers
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    names = getattr(config, "architectures", None) or []
    if not names:
        raise SystemExit(f"{path}: its config.json names no `architectures`")
    auto_map = getattr(config, "auto_map", None) or {}
    if hasattr(transformers, names[0]):
        cls = getattr(transformers, names[0])
    elif trust_remote_code and "AutoModelForCausalLM" in auto_map:
        cls = get_class_from_dynamic_module(auto_map["AutoModelForCausalLM"], path)
    else:
        raise SystemExit(f"{path}: {names[0]} is not a class of the installed Transformers "
                         f"{transformers.__version__}" + ("" if trust_remote_code else
                                                          " (--trust-remote-code for its own)"))
    return check_class(cls, config.model_type, config=config)


def format_verdict(v: Verdict) -> str:
    lines = [f"{v.name} ({v.model_type or '?'}): {v.verdict}" + (f": {v.reason}" if v.reason else "")]
    if v.rule:
        lines.append(f"  between head and loss: {v.rule}")
    for dtype, (loss, grad, name) in v.errors.items():
        lines.append(f"  {dtype}: the loss uses {loss:.3g} of its bound, the gradients at most "
                     f"{grad:.3g} ({name}); reference {v.references.get(dtype, '?')}")
    lines.append(f"  {v.seconds:.1f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
