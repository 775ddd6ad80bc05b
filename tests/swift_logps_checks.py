"""Run inside an ms-swift >= 4.4 env: swift's GRPO batch and log-prob path before and after grpo_compat.apply().

    python tests/swift_logps_checks.py MODEL_DIR  ->  one JSON line on stdout

Builds the real trainer through `swift rlhf`'s pipeline (tiny Qwen2, CPU, fp32), lets it roll out one
generation batch, and takes the samples swift hands to _prepare_batch_inputs. Then, with upstream's code
and again after grpo_compat.apply() (which wraps the already imported modules), it collates those samples
with swift's collate_to_grpo_micro_batch, in the batch layout and padding-free, as they are (aligned) and
with the first sample labelled from column 0 (logits_to_keep = L), and calls swift's log-prob method.
tests/test_swift_logps_alignment.py asserts on the result.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def traced(call: Any) -> tuple[Any, list]:
    """``call()``'s result and every aten op it ran, with its output shapes (the tensors it allocated)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            leaves = out if isinstance(out, tuple | list) else (out,)
            shapes = [list(t.shape) for t in leaves if isinstance(t, torch.Tensor)]
            self.ops.append([str(func), shapes])
            return out

    with torch.no_grad(), Record() as record:
        result = call()
    return result, record.ops


def labelled_from_column_0(samples: list) -> list:
    first = samples[0]
    encoded = {**first.encoded, "labels": list(first.encoded["input_ids"])}
    return [dataclasses.replace(first, encoded=encoded), *samples[1:]]


def with_rollout_logprobs(samples: list) -> list:
    # vLLM hands one log-prob per completion token; swift places them with the (uncleared) mask.
    def counted(sample: Any) -> Any:
        tokens = sum(1 for label in sample.encoded["labels"] if label != -100)
        return dataclasses.replace(sample, rollout_logprobs=[[-0.5] * tokens])

    return [counted(s) for s in samples]


def checks(trainer: Any, out: dict) -> None:
    import torch
    from swift.rlhf_trainers import utils as swift_utils

    import grpo_compat

    captured: list = []
    prepare = trainer._prepare_batch_inputs
    trainer._prepare_batch_inputs = lambda samples: (captured.append(samples), prepare(samples))[1]
    trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    del trainer._prepare_batch_inputs
    samples = captured[0][: trainer.args.per_device_train_batch_size]
    template, model = trainer.template, trainer.model

    def collate(batch: list, padding_free: bool = False) -> tuple:
        template.padding_free = padding_free
        inputs, grpo_batch = swift_utils.collate_to_grpo_micro_batch(
            batch, template, device=model.device, use_logits_to_keep=True
        )
        inputs.pop("labels", None)  # as _prepare_batch_inputs does: the model would compute a loss
        return inputs, grpo_batch

    def log_probs(inputs: dict, batch: Any, **changes: Any) -> Any:
        batch = dataclasses.replace(batch, **changes) if changes else batch
        return trainer._get_per_token_logps_and_entropies(model, inputs, batch, compute_entropy=True)

    full = labelled_from_column_0(samples)
    upstream: dict[str, Any] = {}
    for padding_free in (False, True):
        inputs, batch = collate(samples, padding_free)
        upstream[padding_free] = (inputs, batch, *traced(lambda i=inputs, b=batch: log_probs(i, b)))
    upstream_full = {pf: collate(full, pf) for pf in (True, False)}  # ends in the batch layout
    try:
        log_probs(*upstream_full[False])
        out["upstream_full_length_error"] = None
    except Exception as error:  # noqa: BLE001 - upstream's failure is what is recorded
        out["upstream_full_length_error"] = f"{type(error).__name__}: {error}"
    out["upstream_rollout_logps_placed"] = collate(with_rollout_logprobs(full))[1].rollout_per_token_logps is not None

    grpo_compat.apply()
    out["statuses"] = {p.id: p.status.value for p in grpo_compat.report().patches}
    for padding_free in (False, True):
        key = "padding_free" if padding_free else "batch"
        inputs, batch, before, before_ops = upstream[padding_free]
        _, collated = collate(samples, padding_free)
        after, after_ops = traced(lambda i=inputs, b=batch: log_probs(i, b))
        out[f"aligned_{key}"] = {
            "logits_to_keep_below_length": batch.logits_to_keep < inputs["input_ids"].shape[-1],
            "mask_identical": torch.equal(collated.completion_mask, batch.completion_mask),
            "seq_lengths_identical": torch.equal(collated.seq_lengths, batch.seq_lengths),
            "log_probs_identical": torch.equal(after[0], before[0]) and torch.equal(after[1], before[1]),
            "same_tensor_ops": after_ops == before_ops,
            "ops": len(after_ops),
        }
        up_batch = upstream_full[padding_free][1]
        inputs, batch = collate(full, padding_free)
        length, keep = inputs["input_ids"].shape[-1], batch.logits_to_keep
        expected = up_batch.completion_mask.clone()
        cell = (slice(None), 0) if not padding_free else (0, keep - int(up_batch.seq_lengths[0]))
        expected[cell] = False
        logps, entropies = log_probs(inputs, batch)
        shorter = batch.seq_lengths.clone()
        shorter[0] -= 1
        changes = {"logits_to_keep": keep - 1, **({"seq_lengths": shorter} if padding_free else {})}
        reference = log_probs(inputs, batch, **changes)
        shifted = logps[:, 1:]
        if padding_free:  # cells swift fills in the K - 1 result (rows right-aligned), the others are padding
            filled = torch.arange(keep - 1).unsqueeze(0) >= (keep - 1 - shorter).unsqueeze(1)
        else:
            filled = torch.ones_like(reference[0], dtype=torch.bool)
        out[f"full_length_{key}"] = {
            "logits_to_keep_is_length": keep == length,
            "upstream_mask_counts_the_token": bool(up_batch.completion_mask[cell].any()),
            "mask_is_swifts_minus_the_token": torch.equal(batch.completion_mask, expected),
            "shape": list(logps.shape),
            "entropies_shape": list(entropies.shape),
            "token_holds": logps[cell].tolist(),
            "rest_equals_shorter_keep": torch.equal(shifted[filled], reference[0][filled]),
        }
    _, rollout_batch = collate(with_rollout_logprobs(full))
    out["patched_rollout_logps_placed"] = rollout_batch.rollout_per_token_logps is not None
    out["patched_rollout_mask_cleared"] = not bool(rollout_batch.completion_mask[:, 0].any())


def main() -> None:
    os.environ.setdefault("MODELSCOPE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from grpo_compat.testing.smoke import parse_args, reward_function
    from grpo_compat.testing.tiny_model import build_tiny_qwen2
    from matrix.smoke_swift import register_reward, swift_api, swift_argv, write_dataset

    args = parse_args(__doc__.splitlines()[0], "swift rlhf argument", ["--model-dir", sys.argv[1]])
    model_dir = build_tiny_qwen2(args.model_dir, seed=0)
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="swift_logps_checks_") as output_dir:
        api = swift_api()
        register_reward(api, reward_function(args))
        dataset = write_dataset(Path(output_dir) / "prompts.jsonl")
        argv, _ = swift_argv(api, model_dir, dataset, output_dir, args)
        pipeline = api.pipeline(argv)
        pipeline.train = lambda trainer: checks(trainer, out)
        pipeline.main()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
