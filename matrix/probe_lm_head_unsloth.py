"""Probe Unsloth's generated GRPO projection with logits instead of hidden states (KF-3); writes a JSON result.

    python -m matrix.probe_lm_head_unsloth --mode plain --device cuda --output plain.json

Needs a GPU, unsloth and unsloth-zoo 2026.1.2-2026.5.3. Not run yet: no matrix cell carries unsloth
(GPU proof of unsloth.lm-head-guard is pending; its guard functions are tested on CPU). `import unsloth`
generates unsloth_compiled_cache/UnslothGRPOTrainer.py; the probe calls that module's own
chunked_hidden_states_selective_log_softmax, as its GRPO loss does, with hidden states (B, T, H), then
with the logits they give (B, T, V): upstream fails in the matmul; patched, the log-probs must equal
the hidden-state ones (and the hidden call upstream's, bit for bit), and another width must raise
LMHeadShapeError. Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import sys

from grpo_compat.testing.smoke import parse_args, run_smoke

HIDDEN, VOCAB, NARROW = 64, 500, 40
MODULES = ("UnslothGRPOTrainer", "unsloth_cache_UnslothGRPOTrainer", "unsloth_compiled_cache.UnslothGRPOTrainer")


class ProbeFailed(AssertionError):
    pass


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    result["summary"] = None  # marks a probe result, also when upstream raises below
    import grpo_compat

    if args.mode == "patched":
        grpo_compat.apply()  # before unsloth, so the trainer module it generates is guarded
    import torch
    import unsloth  # noqa: F401 - generates the GRPO trainer module (PatchFastRL at import)

    from grpo_compat.core.errors import LMHeadShapeError

    module = next((sys.modules[name] for name in MODULES if name in sys.modules), None)
    if module is None:
        raise ProbeFailed(f"import unsloth generated none of {MODULES}")
    project = module.chunked_hidden_states_selective_log_softmax
    generator = torch.Generator(device=args.device).manual_seed(args.seed)
    hidden = torch.randn(2, 6, HIDDEN, device=args.device, generator=generator)
    head = torch.randn(VOCAB, HIDDEN, device=args.device, generator=generator) * 0.05
    index = torch.randint(0, VOCAB, (2, 6), device=args.device, generator=generator)
    scaling = (4, 0.0, 0.0, 0.0, 1.0)  # chunks, logit_scale_multiply, logit_scale_divide, softcapping, temperature
    from_hidden = project(hidden, head, index, *scaling)
    checked = f"hidden {list(hidden.shape)}: log-probs {list(from_hidden.shape)}"
    if args.mode == "patched":
        if not torch.equal(from_hidden, project.__wrapped__(hidden, head, index, *scaling)):
            raise ProbeFailed("hidden states: the guarded projection differs from upstream's")
        checked += ", bit-identical to upstream's"
    from_logits = project(hidden @ head.t(), head, index, *scaling)  # upstream: the matmul error
    if not torch.allclose(from_logits, from_hidden, rtol=1e-4, atol=1e-4):
        raise ProbeFailed("logits: log-probs differ from those of the hidden states they came from")
    checked += f"; logits [2, 6, {VOCAB}]: the same log-probs"
    try:
        project(hidden[..., :NARROW], head, index, *scaling)
    except LMHeadShapeError:
        checked += f"; width {NARROW}: LMHeadShapeError"
    else:
        raise ProbeFailed(f"width {NARROW}: no LMHeadShapeError")
    result["summary"] = checked


def main(argv: list[str] | None = None) -> int:
    return run_smoke("probe_lm_head_unsloth", parse_args(__doc__.splitlines()[0], "unused", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
