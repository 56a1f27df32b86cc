"""Tiny randomly initialised Transformers causal LMs and batches, built from fixed seeds
(nothing downloaded): shared by tests/test_hf_integration.py and its multi-process worker."""

from __future__ import annotations

import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402

V = 257  # odd, so no block of the kernels' vocabulary loop is whole by accident
H = 32
SOFTCAP = 0.25


def decoder_config(cls, **extra):
    return cls(vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               **extra)


CONFIGS = {
    "llama": lambda: decoder_config(transformers.LlamaConfig, tie_word_embeddings=False),
    "llama-tied": lambda: decoder_config(transformers.LlamaConfig, tie_word_embeddings=True),
    "qwen2": lambda: decoder_config(transformers.Qwen2Config, tie_word_embeddings=False),
    "qwen3": lambda: decoder_config(transformers.Qwen3Config, head_dim=8,
                                     tie_word_embeddings=False),
    "mistral": lambda: decoder_config(transformers.MistralConfig, tie_word_embeddings=False),
    "gemma": lambda: decoder_config(transformers.GemmaConfig, head_dim=8),  # tied
    "gemma2-no-softcap": lambda: decoder_config(transformers.Gemma2Config, head_dim=8,
                                                 final_logit_softcapping=None),
    # soft-capped logits: a cap near these tiny models' largest logits (~0.4), so that it
    # bends them (without it the loss moves by ~0.05, far above the tolerances)
    "gemma2": lambda: decoder_config(transformers.Gemma2Config, head_dim=8,
                                     final_logit_softcapping=SOFTCAP),
    "gemma3": lambda: decoder_config(transformers.Gemma3TextConfig, head_dim=8,
                                     final_logit_softcapping=SOFTCAP),
    "granite": lambda: decoder_config(transformers.GraniteConfig, logits_scaling=4.0,
                                       tie_word_embeddings=False),
    "cohere": lambda: decoder_config(transformers.CohereConfig, logit_scale=0.5,
                                     bos_token_id=0, eos_token_id=0),  # tied
    "phi3": lambda: decoder_config(transformers.Phi3Config, pad_token_id=0, bos_token_id=0,
                                   eos_token_id=0, tie_word_embeddings=False),
    "olmo2": lambda: decoder_config(transformers.Olmo2Config, eos_token_id=0,
                                    tie_word_embeddings=False),
    "olmo": lambda: decoder_config(transformers.OlmoConfig, pad_token_id=0, bos_token_id=0,
                                   eos_token_id=0, tie_word_embeddings=False),
    # MoE, router outputs on so that the auxiliary loss is part of the loss
    "mixtral": lambda: decoder_config(transformers.MixtralConfig, num_local_experts=4,
                                      num_experts_per_tok=2, output_router_logits=True,
                                      router_aux_loss_coef=0.1, tie_word_embeddings=False),
    "qwen2-moe": lambda: decoder_config(transformers.Qwen2MoeConfig, num_experts=4,
                                        num_experts_per_tok=2, moe_intermediate_size=32,
                                        shared_expert_intermediate_size=32,
                                        output_router_logits=True, router_aux_loss_coef=0.1,
                                        tie_word_embeddings=False),
    "qwen3-moe": lambda: decoder_config(transformers.Qwen3MoeConfig, head_dim=8, num_experts=4,
                                        num_experts_per_tok=2, moe_intermediate_size=32,
                                        output_router_logits=True, router_aux_loss_coef=0.1,
                                        tie_word_embeddings=False),
    # heads with a bias; no dropout, so both runs see the same network
    "phi": lambda: decoder_config(transformers.PhiConfig, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attention_dropout=0.0, tie_word_embeddings=False),
    "gptj": lambda: transformers.GPTJConfig(vocab_size=V, n_embd=H, n_layer=2, n_head=4,
                                            rotary_dim=4, n_positions=64, resid_pdrop=0.0,
                                            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                            eos_token_id=0, tie_word_embeddings=False),
    "codegen": lambda: transformers.CodeGenConfig(vocab_size=V, n_embd=H, n_layer=2, n_head=4,
                                                  rotary_dim=4, n_positions=64, n_ctx=64,
                                                  resid_pdrop=0.0, embd_pdrop=0.0,
                                                  attn_pdrop=0.0, bos_token_id=0,
                                                  eos_token_id=0, tie_word_embeddings=False),
    # tied; no dropout, so both runs see the same network
    "gpt2": lambda: transformers.GPT2Config(vocab_size=V, n_embd=H, n_layer=2, n_head=4,
                                            n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                            attn_pdrop=0.0, bos_token_id=0, eos_token_id=0),
}


def tiny_model(family: str, dtype: torch.dtype = torch.float32, seed: int = 0):
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(CONFIGS[family]())
    head = model.get_output_embeddings()
    if head.bias is not None:  # Transformers initialises it to 0: give it values to matter
        with torch.no_grad():
            head.bias.normal_(0.0, 0.5)
    return model.to(dtype)


def batch(seed: int = 1, b: int = 3, t: int = 11):
    """input_ids [b, t] and labels with ignored rows: a prompt prefix and right padding."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (b, t), generator=gen)
    labels = ids.clone()
    labels[0, :4] = -100  # prompt tokens not trained on
    labels[1, -3:] = -100  # padding
    return ids, labels
