"""Call TRL's own per-token log-prob method without building a trainer (trl >= 0.15), for tests and benchmarks.

The method reads a handful of trainer attributes; a namespace holding them stands in for the trainer, so
upstream's code runs on any model and any ``logits_to_keep``. On trl >= 1.15 the method needs the fused
lm-head forward that ``GRPOTrainer.__init__`` installs on the model: it is installed the same way here.
``log_prob_method()`` is read from the class at call time, so after ``grpo_compat.apply()`` it is the
patched method.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any


def log_prob_method_name() -> str:
    from trl.trainer.grpo_trainer import GRPOTrainer

    newer = "_get_per_token_logps_and_entropies"  # trl >= 0.20
    return newer if hasattr(GRPOTrainer, newer) else "_get_per_token_logps"


def log_prob_method() -> Any:
    from trl.trainer.grpo_trainer import GRPOTrainer

    return getattr(GRPOTrainer, log_prob_method_name())


def trainer_stand_in(model: Any, temperature: float = 1.0) -> SimpleNamespace:
    """The trainer state the method reads (``model`` gets TRL's fused head on trl >= 1.15, as in __init__)."""
    from accelerate import Accelerator
    from trl.trainer import grpo_trainer

    fused_head = getattr(grpo_trainer, "add_fused_lm_head", None)
    if fused_head is not None:
        extra = {"outputs": ("log_probs", "entropy")} if "outputs" in inspect.signature(fused_head).parameters else {}
        fused_head(model, temperature=temperature, **extra)
    return SimpleNamespace(
        temperature=temperature,  # read by trl 0.16-1.14 (1.15+ bakes it into the fused head)
        model_kwarg_keys=set(inspect.signature(model.forward).parameters),  # trl 0.20-1.14
        _entropy_bonus_enabled=False,  # trl >= 1.8 with compute_entropy
        accelerator=Accelerator(cpu=True),  # autocast on 1.15+, profiling
        args=SimpleNamespace(report_to=[]),  # profiling_decorator
        state=SimpleNamespace(global_step=0),
    )


def causal_lm(vocab_size: int = 97, hidden_size: int = 32, seed: int = 0) -> Any:
    """A one-layer Qwen2 from a config (no files, no tokenizer), in eval mode so calls are deterministic."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
    )
    return Qwen2ForCausalLM(config).eval()


def log_probs(result: Any) -> Any:
    """The (B, K) log-probs of the method's result: a tensor (trl <= 0.19) or the first item of a tuple."""
    return result[0] if isinstance(result, tuple) else result
