"""Models for the KF-3 checks: a causal LM whose backbone output is not the hidden states lm_head expects.

TRL's Liger path takes "the last hidden state" from the model's backbone (``.model`` on trl 0.17-1.5,
``.base_model`` on 1.6+) and projects it through ``lm_head`` itself. ``BackboneOutputsLogits`` is
the hazard that breaks it: a model whose backbone is the causal LM itself, so what comes back is
already logits (B, T, V), as when ``base_model is self``. Its full forward is the real model's, so
the non-Liger loss sees the right logits. ``width`` > 0 gives a backbone output of some other width
(neither H nor V) instead. torch and transformers are imported by the caller first.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.modeling_outputs import BaseModelOutputWithPast


class _Backbone(torch.nn.Module):
    def __init__(self, lm: Any, width: int) -> None:
        super().__init__()
        self.lm, self.width = lm, width

    def forward(self, **kwargs: Any) -> BaseModelOutputWithPast:
        if self.width:  # hidden states cut to a width that fits nothing
            hidden = self.lm.model(**kwargs).last_hidden_state
            return BaseModelOutputWithPast(last_hidden_state=hidden[..., : self.width])
        return BaseModelOutputWithPast(last_hidden_state=self.lm(**kwargs).logits)


class BackboneOutputsLogits(torch.nn.Module):
    """``lm`` with a backbone that returns its logits (or, with ``width``, a tensor of that width)."""

    def __init__(self, lm: Any, width: int = 0) -> None:
        super().__init__()
        self.lm = lm
        self.backbone = _Backbone(lm, width)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.lm(*args, **kwargs)

    @property
    def model(self) -> torch.nn.Module:  # what trl 0.17-1.5 call
        return self.backbone

    @property
    def base_model(self) -> torch.nn.Module:  # what trl 1.6+ call
        return self.backbone

    @property
    def lm_head(self) -> torch.nn.Module:
        return self.lm.lm_head
