"""Probe ms-swift's GRPO log-prob method on a batch whose first row is labelled from column 0 (KF-1); writes JSON.

    python -m matrix.probe_logps_swift --mode plain --output plain.json
    python -m matrix.probe_logps_swift --mode patched --set torch_dtype=bfloat16 --set padding_free=true

Builds the real trainer through `swift rlhf`'s pipeline (tiny Qwen2, CPU), then instead of training runs
one real rollout and swift's own batch preparation, with the first sample of the batch labelled from
its first token (as left truncation of a whole prompt leaves it), so logits_to_keep K equals the
sequence length L. It then calls swift's log-prob method (3.5: _get_per_token_logps, 3.8+:
_get_per_token_logps_and_entropies) on that batch, and on the same batch with K = L - 1, and checks:
K columns; where no logit predicts a token, alignment.UNPREDICTABLE_LOGP and a cleared loss mask
(3.x inputs['completion_mask'], 4.x grpo_batch.completion_mask); every other cell equal to the K = L - 1
result and to swift's mask. Upstream raises the gather error (or, 4.x padding-free bf16, a zip() error)
or returns shifted log-probs (3.12 padding-free bf16): either is the probe's error.
`--set padding_free=true` is set on the trainer's template after it is built (swift's arguments
refuse it without flash attention, which a CPU lacks; the forward then attends across the packed rows,
which changes the values, not the alignment). `--set sequence_parallel_size=N` relaunches the probe as N
CPU processes and compares with the local forward of the same batch instead (swift slices its gathered,
end-padded sequence-parallel log-probs from the padded end: shifted whenever L is not a multiple of N).
Other `--set` values go to `swift rlhf`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from grpo_compat.testing.smoke import parse_args, reward_function, run_smoke, tiny_model


class ProbeFailed(AssertionError):
    pass


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    result["summary"] = None  # marks a probe result, also when upstream raises below
    os.environ.setdefault("MODELSCOPE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if args.mode == "patched":
        import grpo_compat

        grpo_compat.apply()  # before swift, so patches hook its import
    from matrix.smoke_swift import (
        label_first_sample_from_column_0,
        register_reward,
        swift_api,
        swift_argv,
        write_dataset,
    )

    model_dir = tiny_model(args)
    padding_free = bool(args.config_overrides.pop("padding_free", False))
    api = swift_api()
    register_reward(api, reward_function(args))
    dataset = write_dataset(Path(output_dir) / "probe_prompts.jsonl")
    argv, _ = swift_argv(api, model_dir, dataset, output_dir, args)
    pipeline = api.pipeline(argv)

    def check_instead_of_training(trainer: Any) -> None:
        result["padding_free"] = padding_free
        if padding_free and hasattr(trainer, "padding_free_context"):
            trainer.padding_free = True  # 3.5-3.6: packed inside the forward only, batches keep their layout
        elif padding_free:
            trainer.template.padding_free = True
        label_first_sample_from_column_0(trainer.template)
        labels = record_labels(trainer.template, getattr(trainer.template, "sequence_parallel_size", 1))
        check(trainer, labels, result)

    pipeline.train = check_instead_of_training
    pipeline.main()
    if result["summary"] is None:
        raise ProbeFailed("swift's pipeline never handed over its trainer")


def record_labels(template: Any, ranks: int) -> list:
    """The labels of every training batch the template collates (swift pops them before the log-probs).

    With sequence parallel over ``ranks``, a batch whose length ranks divide gets one more column of
    padding: swift then pads the sequence for its ranks, the case that shifts its log-probs.
    """
    seen: list = []
    collate = template.data_collator

    def data_collator(batch: list, *args: Any, **kwargs: Any) -> Any:
        longest = max((len(item.get("input_ids") or ()) for item in batch if isinstance(item, dict)), default=0)
        if ranks > 1 and longest % ranks == 0 and kwargs.get("padding_to") is None:
            kwargs["padding_to"] = longest + 1
        collated = collate(batch, *args, **kwargs)
        if isinstance(collated, dict) and collated.get("labels") is not None:
            seen.append(collated["labels"].clone())
        return collated

    template.data_collator = data_collator
    return seen


class SwiftBatch:
    """One prepared micro-batch of any ms-swift layout, and swift's log-prob method called on it."""

    def __init__(self, trainer: Any, batch: dict) -> None:
        self.trainer, self.batch = trainer, batch
        self.grpo = batch.get("grpo_batch")  # ms-swift >= 4.4
        self.inputs = batch["model_inputs"] if self.grpo is not None else batch
        self.keep = self.grpo.logits_to_keep if self.grpo is not None else batch["logits_to_keep"]
        self.mask = self.grpo.completion_mask if self.grpo is not None else batch["completion_mask"]
        packed = getattr(trainer.template, "padding_free", False)
        lengths = self.grpo.seq_lengths if self.grpo is not None else batch.get("seq_lengths")
        self.lengths = lengths if packed and lengths is not None else None  # 3.5 re-pads: batch layout
        newer = "_get_per_token_logps_and_entropies"
        self.method = newer if hasattr(trainer, newer) else "_get_per_token_logps"

    def log_probs(self, keep: int, lengths: Any) -> Any:
        import torch

        method, model = getattr(self.trainer, self.method), self.trainer.model
        changes = {"logits_to_keep": keep, **({"seq_lengths": lengths} if lengths is not None else {})}
        with torch.no_grad():
            if self.grpo is not None:
                result = method(model, self.inputs, dataclasses.replace(self.grpo, **changes))
            else:
                result = method(model, {**self.batch, **changes})
        return result[0] if isinstance(result, tuple) else result


def right_aligned(lengths: Any, width: int) -> Any:
    """(B, width) bool: the cells swift's padding-free re-batching fills (rows right-aligned)."""
    import torch

    columns = torch.arange(width, device=lengths.device)
    return columns.unsqueeze(0) >= (width - lengths).unsqueeze(1)


def check(trainer: Any, recorded_labels: list, result: dict) -> None:
    import torch

    from grpo_compat.fixes.alignment import UNPREDICTABLE_LOGP

    generation_batch = next(iter(trainer.get_train_dataloader()))
    with torch.no_grad():
        prepared = trainer._generate_and_score_completions(generation_batch)
    view = SwiftBatch(trainer, prepared[0])
    result["method"] = view.method
    length, keep = view.inputs["input_ids"].shape[-1], view.keep
    result["sequence_length"], result["logits_to_keep"] = length, keep
    if keep != length:
        raise ProbeFailed(f"logits_to_keep={keep} with L={length}: the row labelled from column 0 did not reach it")
    shorter = None
    if view.lengths is not None:
        shorter = view.lengths.clone()
        shorter[0] -= 1
    full = view.log_probs(keep, view.lengths)
    ranks = getattr(trainer.template, "sequence_parallel_size", 1)
    if ranks > 1:
        # Both of swift's sequence-parallel answers can be shifted alike: the truth is the local forward.
        if view.lengths is not None or not hasattr(trainer, "_disable_sp_context"):
            raise ProbeFailed("sequence parallel is probed in the batch layout on ms-swift >= 3.11 only")
        with trainer._disable_sp_context(trainer.template):
            reference = view.log_probs(keep - 1, shorter)
    else:
        reference = view.log_probs(keep - 1, shorter)
    rows = reference.shape[0]
    if tuple(full.shape) != (rows, keep):
        raise ProbeFailed(f"{view.method} returned {tuple(full.shape)} for logits_to_keep=L={keep}, not {(rows, keep)}")
    if view.lengths is None:  # batch layout: column 0 of every row has no predicting logit
        predicted, unpredictable = torch.ones_like(reference, dtype=torch.bool), (slice(None), 0)
    else:  # padding-free: the first token of the first sequence
        predicted, unpredictable = right_aligned(shorter, keep - 1), (0, keep - int(view.lengths[0]))
    # The ranks' attention splits heads: the same values, compared with a tolerance far below a shift's.
    same = torch.equal if ranks == 1 else lambda a, b: torch.allclose(a, b, rtol=0, atol=1e-5)
    if not same(full[:, 1:][predicted], reference[predicted]):
        against = f"the K={keep - 1} result" + (" of the local forward" if ranks > 1 else "")
        raise ProbeFailed(f"misaligned: log-probs for logits_to_keep=L={keep} differ from {against}")
    if not bool((full[unpredictable] == UNPREDICTABLE_LOGP).all()):
        raise ProbeFailed(f"the token no logit predicts holds {full[unpredictable].tolist()}, not {UNPREDICTABLE_LOGP}")
    swift_mask = recorded_labels[0][:, -keep:] != -100  # swift's own mask, before any clearing
    if bool(view.mask[unpredictable].any()):
        raise ProbeFailed("the loss mask still counts the token no logit predicts")
    if view.lengths is None:
        expected = swift_mask.clone()
        expected[unpredictable] = False
        same = torch.equal(view.mask.cpu(), expected.cpu())
    else:
        same = int(view.mask.sum()) == int(swift_mask.sum()) - 1
    if not same:
        raise ProbeFailed("the loss mask differs from swift's beyond the token no logit predicts")
    layout = "padding-free, packed" if view.lengths is not None else "batch layout"
    layout += ", padding_free in the forward" if result["padding_free"] and view.lengths is None else ""
    layout += f", sequence parallel over {ranks} ranks vs the local forward" if ranks > 1 else ""
    result["summary"] = (
        f"{view.method} ({layout}, {full.dtype}): K=L={keep} gives {tuple(full.shape)}; the token no logit "
        f"predicts holds {UNPREDICTABLE_LOGP} and is cleared from the loss mask; the rest equals K={keep - 1} "
        "and swift's mask"
    )


def relaunch(ranks: int, argv: list[str]) -> int:
    """This probe again as ``ranks`` CPU processes (gloo): sequence parallel needs one process per rank."""
    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks)]
    return subprocess.run([*launch, "--master_port", str(port), __file__, *argv], check=False).returncode


def main(argv: list[str] | None = None) -> int:
    help_set = "swift rlhf argument (JSON value); padding_free goes to the template"
    args = parse_args(__doc__.splitlines()[0], help_set, argv)
    ranks = args.config_overrides.get("sequence_parallel_size", 1)
    if isinstance(ranks, int) and ranks > 1 and "WORLD_SIZE" not in os.environ:
        return relaunch(ranks, sys.argv[1:] if argv is None else argv)  # rank 0 writes the JSON
    return run_smoke("probe_logps_swift", args, probe)


if __name__ == "__main__":
    sys.exit(main())
