"""vLLM's truncated-sampling log-probs put back on the full vocabulary, for trl's importance-sampling correction.

trl asks vLLM for ``processed_logprobs``: after temperature and after min_p / top_k / top_p have dropped tokens and
renormalised over the ones kept, so vLLM returns log(p / S), S the probability mass the truncation kept at that
position. The trainer scores the same token over the full vocabulary, log p. Their difference, trl's importance
ratio, is then S at every token (its product over a completion in the sequence modes) however well the two
engines agree (census row 40, huggingface/trl#6789). Adding log S back, with S replayed on the trainer's logits as
vLLM's sampler computes it, leaves only what the correction is for: the engines' disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Truncation:
    """The sampling settings vLLM truncates with (its SamplingParams semantics: top_k <= 0 and top_p 1 keep all)."""

    temperature: float
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    @property
    def truncates(self) -> bool:
        return self.top_k > 0 or self.top_p < 1.0 or self.min_p > 0.0


def sampling_truncation(trainer: Any) -> Truncation:
    """What trl hands vLLM's sampler: the trainer's settings, overridden by ``generation_kwargs`` as trl does."""
    settings = {
        "temperature": trainer.temperature,
        "top_k": trainer.top_k,
        "top_p": trainer.top_p,
        "min_p": trainer.min_p,
    }
    overrides = getattr(trainer.args, "generation_kwargs", None) or {}
    settings.update({key: value for key, value in overrides.items() if key in settings})
    return Truncation(
        temperature=float(settings["temperature"]),
        top_k=int(settings["top_k"] or 0),
        top_p=1.0 if settings["top_p"] is None else float(settings["top_p"]),
        min_p=float(settings["min_p"] or 0.0),
    )


def kept_log_mass(logits: Any, truncation: Truncation) -> Any:
    """log S for each row of ``logits`` (..., vocab): the log of the probability under softmax(logits / temperature)
    of the tokens vLLM's sampler keeps: min_p first (a logits processor), then top_k, then top_p over what top_k
    kept (vllm.v1.sample's apply_top_k_top_p), the last token always kept."""
    import torch

    scaled = logits.float() / truncation.temperature
    log_probs = scaled.log_softmax(dim=-1)
    masked = scaled
    if truncation.min_p > 0.0:
        probs = log_probs.exp()
        masked = masked.masked_fill(probs < truncation.min_p * probs.amax(dim=-1, keepdim=True), -torch.inf)
    if 0 < truncation.top_k < masked.shape[-1]:
        kth_largest = masked.topk(truncation.top_k, dim=-1).values[..., -1:]
        masked = masked.masked_fill(masked < kth_largest, -torch.inf)
    if truncation.top_p < 1.0:
        ascending, order = masked.sort(dim=-1)
        dropped = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1.0 - truncation.top_p
        dropped[..., -1] = False
        masked = masked.masked_fill(torch.zeros_like(dropped).scatter(-1, order, dropped), -torch.inf)
    return log_probs.masked_fill(masked == -torch.inf, -torch.inf).logsumexp(dim=-1)


def on_full_vocabulary(
    model: Any,
    prompt_ids: list,
    completion_ids: list,
    logprobs: list,
    truncation: Truncation,
    batch_size: int,
) -> list:
    """``logprobs`` (vLLM's, one list per completion) plus log S at each completion token, S from ``model``'s logits.

    One extra forward pass without gradients over the generated sequences, ``batch_size`` at a time (right-padded,
    so every row keeps its own positions). A None (vLLM's NaN) stays None.
    """
    import torch

    device = next(model.parameters()).device
    corrected: list = []
    for start in range(0, len(prompt_ids), batch_size):
        rows = range(start, min(start + batch_size, len(prompt_ids)))
        sequences = [list(prompt_ids[i]) + list(completion_ids[i]) for i in rows]
        input_ids = torch.zeros(len(sequences), max(map(len, sequences)), dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, sequence in enumerate(sequences):
            input_ids[row, : len(sequence)] = torch.tensor(sequence)
            attention_mask[row, : len(sequence)] = 1
        with torch.no_grad():
            logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits
        for row, i in enumerate(rows):
            first = len(prompt_ids[i]) - 1  # the logits at position j predict token j + 1
            log_mass = kept_log_mass(logits[row, first : first + len(completion_ids[i])], truncation).tolist()
            corrected.append(
                [None if value is None else value + mass for value, mass in zip(logprobs[i], log_mass, strict=True)]
            )
    return corrected
