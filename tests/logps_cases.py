"""Observations of TRL's own log-prob method and GRPO loss, plain then with grpo_compat, in the env that runs this.

    python tests/logps_cases.py alignment MODEL_DIR   # any trl >= 0.15 (MODEL_DIR: tiny model, built if missing)
    python tests/logps_cases.py trim                  # trl 0.19.x: models that ignore logits_to_keep

Prints one JSON object; tests/test_logps_alignment.py runs this once per env (imports cost seconds) and
asserts on it. Run by path, not as ``tests.logps_cases``: some cell envs ship a ``tests`` package.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import tempfile
from typing import Any

import torch

import grpo_compat
from grpo_compat.core.engine import Engine
from grpo_compat.core.registry import registered_patches
from grpo_compat.testing.logps import causal_lm, log_prob_method, log_prob_method_name, log_probs, trainer_stand_in

LENGTH = 7


def error_of(call: Any) -> str:
    try:
        result = call()
    except Exception as error:  # noqa: BLE001 - upstream's failure is the observation
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return f"returned {tuple(log_probs(result).shape)}"


def per_token_shapes(result: Any) -> list:
    items = result if isinstance(result, tuple) else (result,)
    return [list(item.shape) if isinstance(item, torch.Tensor) and item.ndim >= 2 else None for item in items]


def all_equal(a: Any, b: Any) -> bool:
    pairs = zip(a, b, strict=True) if isinstance(a, tuple) else [(a, b)]
    return all((x is None and y is None) or torch.equal(x, y) for x, y in pairs)


def patch_named(patch_id: str) -> Any:
    return next(p for p in registered_patches() if p.id == patch_id)


def alignment(model_dir: str) -> dict:
    import trl

    model = causal_lm()
    trainer = trainer_stand_in(model)
    ids = torch.randint(0, 97, (2, LENGTH), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    original = log_prob_method()
    entropy = {"compute_entropy": True} if "compute_entropy" in inspect.signature(original).parameters else {}

    def run(method: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return method(trainer, model, ids, mask, *args, **kwargs)

    seen: dict[str, Any] = {"trl": trl.__version__, "method": log_prob_method_name()}
    seen["plain K=L"] = error_of(lambda: run(original, LENGTH))
    try:
        seen["plain loss"] = loss_case(model_dir)
    except Exception as error:  # noqa: BLE001 - upstream's failure is the observation
        seen["plain loss"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
    grpo_compat.apply()
    patched = log_prob_method()
    seen["status"] = grpo_compat.report().status_of("trl.logps-alignment").value
    with torch.no_grad():
        seen["one token"] = error_of(lambda: patched(trainer, model, ids[:, :1], mask[:, :1], 1))
    predictable = run(original, LENGTH - 1, **entropy)
    for keep in (LENGTH, LENGTH + 2):
        for how, result in (
            ("positional", run(patched, keep, **entropy)),
            ("keyword", run(patched, logits_to_keep=keep)),
        ):
            missing = keep - (LENGTH - 1)
            seen[f"K={keep} {how}"] = {
                "kind": f"{len(result)}-tuple" if isinstance(result, tuple) else "tensor",
                "shapes": per_token_shapes(result),
                "predictable_equal": torch.equal(log_probs(result)[:, missing:], log_probs(predictable)),
                "unpredictable_values": log_probs(result)[:, :missing].unique().tolist(),
            }
        if entropy:  # the entropies are padded the same way
            result = run(patched, keep, **entropy)
            seen[f"K={keep} entropies_equal"] = torch.equal(result[1][:, keep - (LENGTH - 1) :], predictable[1])
    for keep in (LENGTH - 3, LENGTH - 1):
        seen[f"aligned K={keep} equal"] = all_equal(run(patched, keep, **entropy), run(original, keep, **entropy))

    calls: list = []
    returned: list = []

    @functools.wraps(original)
    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        returned.append(original(*args, **kwargs))
        return returned[-1]

    from grpo_compat.patches.trl.logps_alignment import aligned_log_probs as wrapper

    with torch.no_grad():
        result = wrapper(recording, trainer, model, ids, mask, LENGTH - 1)
    seen["aligned call forwarded as is"] = (
        len(calls) == 1 and result is returned[0] and calls[0][0] == (trainer, model, ids, mask, LENGTH - 1)
    )
    calls.clear()
    with torch.no_grad():
        wrapper(recording, trainer, model, ids, mask, LENGTH)
    seen["K=L upstream calls"] = [bound_keep(original, args, kwargs) for args, kwargs in calls]
    seen["patched loss"] = loss_case(model_dir)
    grpo_compat.revert()
    seen["reverted"] = log_prob_method() is original
    return seen


def bound_keep(function: Any, args: tuple, kwargs: dict) -> int:
    return inspect.signature(function).bind(*args, **kwargs).arguments["logits_to_keep"]


def loss_case(model_dir: str) -> dict:
    """TRL's compute_loss on a batch whose prompts are empty (K = L): the loss and what the model attended to."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    model_dir = str(build_tiny_qwen2(model_dir, seed=0))
    wanted = dict(
        use_cpu=True,
        bf16=False,
        report_to="none",
        beta=0.0,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        loss_type="bnpo",  # sum over tokens / token count: the count shows which columns the loss used
    )
    with tempfile.TemporaryDirectory() as output_dir:
        fields = GRPOConfig.__dataclass_fields__
        config = GRPOConfig(output_dir=output_dir, **{k: v for k, v in wanted.items() if k in fields})
        trainer = GRPOTrainer(
            model=model_dir,
            reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
            args=config,
            train_dataset=Dataset.from_dict({"prompt": ["a b c"] * 4}),
        )
    model = trainer.model.eval()
    attended: list = []
    model.register_forward_pre_hook(
        lambda module, args, kwargs: attended.append(kwargs["attention_mask"]), with_kwargs=True
    )
    completion_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    inputs = {
        "prompt_ids": torch.zeros(2, 0, dtype=torch.long),
        "prompt_mask": torch.zeros(2, 0, dtype=torch.long),
        "completion_ids": torch.randint(0, model.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(1)),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.0, -1.0]),
        "old_per_token_logps": None,
        "ref_per_token_logps": None,
    }
    loss = trainer.compute_loss(model, inputs)
    return {
        "loss": loss.item(),
        "attention_masks": [mask.tolist() for mask in attended],
        "caller_mask_untouched": inputs["completion_mask"] is completion_mask and completion_mask[:, 0].all().item(),
    }


def trim() -> dict:
    """trl 0.19.x with a model that ignores logits_to_keep, each patch alone, both stacked either way, reverted."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    from grpo_compat.testing.smoke import ignore_logits_to_keep

    model = causal_lm()
    trainer = trainer_stand_in(model)
    ids = torch.randint(0, 97, (2, LENGTH), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    name = log_prob_method_name()
    original = GRPOTrainer.__dict__[name]
    aligned = LENGTH - 3

    def run(keep: int) -> torch.Tensor:
        with torch.no_grad():
            return log_prob_method()(trainer, model, ids, mask, keep)

    honoured, predictable = run(aligned), run(LENGTH - 1)
    ignore_logits_to_keep(model)
    seen: dict[str, Any] = {"method": name, "plain aligned": error_of(lambda: run(aligned))}

    def effect() -> dict:
        full = run(LENGTH)
        return {
            "aligned_equal": torch.equal(run(aligned), honoured),
            "full_shape": list(full.shape),
            "full_predictable_equal": torch.equal(full[:, 1:], predictable),
            "full_unpredictable": full[:, 0].unique().tolist(),
        }

    grpo_compat.apply()
    seen["statuses"] = {
        i: grpo_compat.report().status_of(i).value for i in ("trl.logps-alignment", "trl.logps-trim-logits")
    }
    seen["all patches"] = effect()
    grpo_compat.revert()
    seen["reverted all"] = GRPOTrainer.__dict__[name] is original
    grpo_compat.apply(only=["trl.logps-trim-logits"])
    seen["trim alone aligned equal"] = torch.equal(run(aligned), honoured)
    seen["trim alone K=L"] = error_of(lambda: run(LENGTH))
    grpo_compat.revert()
    for order in (("trl.logps-trim-logits", "trl.logps-alignment"), ("trl.logps-alignment", "trl.logps-trim-logits")):
        engines = [Engine([patch_named(patch_id)]) for patch_id in order]
        for engine in engines:
            engine.apply()
        key = " then ".join(order)
        seen[f"stacked {key}"] = effect()
        for engine in reversed(engines):
            engine.revert()
        seen[f"reverted {key}"] = GRPOTrainer.__dict__[name] is original
    return seen


def main() -> None:
    case = sys.argv[1]
    seen = alignment(sys.argv[2]) if case == "alignment" else trim()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
