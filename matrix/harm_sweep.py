"""The do-no-harm sweep: DeepSpeed configs and launchers as users write them, each run plain and patched.

Every variant trains the field report's shape at smoke size (batch 2, accumulation 4, 2 generations) with a
DeepSpeed json whose batch keys are absent, "auto", a matching number or a contradicting one; stage 2 or 3;
optimizer and scheduler blocks present or not; the config given as a path or a dict to GRPOConfig, through
accelerate's flag or through an accelerate config file; launched by `accelerate launch`, `torchrun` or the
`deepspeed` launcher, on 1 or 2 processes. The variants cover each key state, each way of giving the config
and each launcher x process count at least once (not the full product: it would take hours on 2 cores).

The invariant (``judge_patched``): patched fails only where plain fails, or where plain trains wrongly (a
documented fix), and then no later; where both train, the weights are identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grpo_compat.fixes.deepspeed_config import ACCUMULATION, MICRO, TOTAL

# The trainer's side of every variant: valid on 1 and 2 processes under every trl's batch rule (trl 0.16 wants
# the global batch divisible by num_generations). A contradicting number never equals the trainer's value.
BATCH_SETTINGS = ("per_device_train_batch_size=2", "gradient_accumulation_steps=4", "num_generations=2")
TRAINER_MICRO, TRAINER_ACCUMULATION = 2, 4
CONTRADICTING = {MICRO: 3, ACCUMULATION: 2, TOTAL: 3}
# DeepSpeed's own optimizer and scheduler, filled by transformers from "auto"; torch_adam: no C++ build on CPU.
BLOCKS = {
    "optimizer": {
        "type": "AdamW",
        "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto", "torch_adam": True},
    },
    "scheduler": {
        "type": "WarmupLR",
        "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"},
    },
}
PHASES = ("config", "model", "train")  # where a smoke run can fail, earliest first


@dataclass(frozen=True)
class Variant:
    id: str
    stage: int
    micro: str = "auto"  # absent | auto | match | contradict
    accumulation: str = "auto"
    total: str = "auto"
    blocks: bool = False  # DeepSpeed optimizer and scheduler blocks
    # path | dict (GRPOConfig(deepspeed=...)) | accelerate-flag | accelerate-flag+path | accelerate-config
    given: str = "path"
    launcher: str = "accelerate"  # accelerate | torchrun | deepspeed
    processes: int = 2
    quick: bool = False  # also in `matrix run --quick` (CI)

    def config(self) -> dict:
        """The DeepSpeed json as the user wrote it."""
        trainer = {MICRO: TRAINER_MICRO, ACCUMULATION: TRAINER_ACCUMULATION}
        trainer[TOTAL] = TRAINER_MICRO * TRAINER_ACCUMULATION * self.processes
        config: dict = {"zero_optimization": {"stage": self.stage}, "bf16": {"enabled": "auto"}}
        config["fp16"] = {"enabled": "auto"}
        for key, state in ((MICRO, self.micro), (ACCUMULATION, self.accumulation), (TOTAL, self.total)):
            if state != "absent":
                config[key] = {"auto": "auto", "match": trainer[key], "contradict": CONTRADICTING[key]}[state]
        return {**config, **(BLOCKS if self.blocks else {})}


_V = Variant
VARIANTS = (
    # The issue-12 report: train_batch_size absent, ZeRO-3, accelerate's flag and GRPOConfig(deepspeed=path).
    _V("z3-total-absent-accelerate", 3, total="absent", given="accelerate-flag+path", quick=True),
    _V("z2-auto-accelerate-flag", 2, given="accelerate-flag"),
    _V("z3-auto-torchrun", 3, launcher="torchrun"),  # "train_batch_size": "auto" under zero.Init (upstream)
    _V("z2-total-absent-dict-accelerate", 2, total="absent", given="dict"),
    _V("z2-micro-absent-accelerate", 2, micro="absent", given="path"),
    _V("z3-micro-total-absent-accelerate-config", 3, micro="absent", total="absent", given="accelerate-config"),
    _V("z2-accumulation-absent-accelerate-flag", 2, accumulation="absent", given="accelerate-flag", quick=True),
    _V(
        "z3-accumulation-absent-torchrun-1proc",
        3,
        accumulation="absent",
        given="dict",
        launcher="torchrun",
        processes=1,
    ),
    _V("z2-all-absent-deepspeed-1proc", 2, "absent", "absent", "absent", launcher="deepspeed", processes=1),
    _V("z2-all-match-accelerate-config", 2, "match", "match", "match", given="accelerate-config"),
    _V("z3-all-match-accelerate-1proc", 3, "match", "match", "match", given="accelerate-flag", processes=1),
    _V("z2-micro-match-torchrun", 2, micro="match", launcher="torchrun"),
    _V("z3-total-match-accelerate-flag", 3, "absent", "absent", "match", given="accelerate-flag"),
    _V("z2-accumulation-match-deepspeed", 2, accumulation="match", total="absent", given="dict", launcher="deepspeed"),
    _V("z2-micro-contradicts-accelerate-flag", 2, micro="contradict", given="accelerate-flag"),
    _V("z3-accumulation-contradicts-torchrun", 3, accumulation="contradict", launcher="torchrun"),
    _V("z2-total-contradicts-accelerate-config-1proc", 2, total="contradict", given="accelerate-config", processes=1),
    _V("z2-blocks-auto-accelerate-flag", 2, blocks=True, given="accelerate-flag"),
    _V("z3-blocks-accumulation-absent-deepspeed", 3, accumulation="absent", blocks=True, launcher="deepspeed"),
    _V(
        "z2-blocks-micro-match-deepspeed-1proc",
        2,
        "match",
        total="absent",
        blocks=True,
        launcher="deepspeed",
        processes=1,
    ),
)


def launch(variant: Variant, python: Path, script: list[str], scratch: Path, port: int) -> list[str]:
    """The command line of one variant's run: its launcher, its config given its way, the smoke script.

    ``script``: the smoke script and its arguments, without an interpreter (each launcher starts the cell's).
    """
    config, config_path = variant.config(), scratch / f"{variant.id}.json"
    config_path.write_text(json.dumps(config, indent=2))
    if variant.given in ("path", "accelerate-flag+path"):
        script = [*script, "--set", f"deepspeed={config_path}"]
    elif variant.given == "dict":
        script = [*script, "--set", f"deepspeed={json.dumps(config)}"]
    # A process group for DeepSpeed's zero.Init is what the trainer makes, as in a user's script.
    script = [*script, "--no-early-deepspeed-init", *(f"--set={s}" for s in BATCH_SETTINGS)]
    n, bin_dir = str(variant.processes), python.parent
    if variant.launcher == "torchrun":  # every launcher starts the script with the cell's interpreter
        return [str(bin_dir / "torchrun"), "--nproc_per_node", n, "--master_port", str(port), *script]
    if variant.launcher == "deepspeed":
        deepspeed = [str(bin_dir / "deepspeed"), "--num_gpus", n, "--master_port", str(port), "--no_local_rank"]
        return [*deepspeed, *script]
    accelerate = [str(bin_dir / "accelerate"), "launch"]
    if variant.given == "accelerate-config":
        accelerate_config = scratch / f"{variant.id}.accelerate.yaml"
        accelerate_config.write_text(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
            f"deepspeed_config:\n  deepspeed_config_file: {config_path}\n"
            f"num_processes: {n}\nnum_machines: 1\nmachine_rank: 0\nmain_process_port: {port}\n"
        )  # no mixed_precision: with a deepspeed_config_file the json decides it, and accelerate refuses both
        return [*accelerate, "--config_file", str(accelerate_config), *script]
    accelerate += ["--num_processes", n, "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    accelerate += ["--main_process_port", str(port)]
    if variant.given.startswith("accelerate-flag"):
        return [*accelerate, "--use_deepspeed", "--deepspeed_config_file", str(config_path), *script]
    return [*accelerate, *(["--multi_gpu"] if variant.processes > 1 else []), *script]


def checks_of(variant: Variant) -> tuple[str, ...]:
    """Judge checks (matrix/runs.py failed_checks) of a run that trained: DeepSpeed stepped as the trainer did."""
    return ("kl", "accumulation", *(("ranks",) if variant.processes > 1 else ()))


def describe_plain(result: dict | None, findings: list[str]) -> str:
    """What upstream did with this variant, for the report."""
    if result is None:
        return "no result"
    if result.get("status") != "ok":
        return f"upstream fails (phase {result.get('phase')}): {_first_line(result)}"
    if findings or not result.get("all_trainable_params_changed"):
        return "upstream trains wrongly: " + ("; ".join(findings) or "weights did not change")
    return "upstream trains"


# Silent upstream failures of the catalogue that a plain run's checks cannot see, and the runs they hit: there
# plain trains wrongly, and a patched run that trains differently corrects it (its own reproducer proves how).
SILENT_UPSTREAM = {
    # transformers 4.48 + DeepSpeed: the loss is divided by gradient accumulation twice (KF-5; matrix reproducer
    # deepspeed-ga-double-scaling: ZeRO-2 grad_norm 1/4 of DDP's at accumulation 4).
    "deepspeed-loss-divided-twice": lambda result: (
        bool(result.get("engine_gradient_accumulation_steps"))
        and (result.get("trainer_gradient_accumulation_steps") or 1) > 1
    ),
}


def silent_upstream_failures(result: dict) -> list[str]:
    """The catalogue's silent failures a plain result that trained is known to have, one sentence each."""
    from grpo_compat.catalogue import load_failures

    return [
        f"{failure.title} (catalogue: {failure.id})"
        for failure in load_failures()
        if failure.id in SILENT_UPSTREAM
        and failure.affects_versions(result.get("versions") or {})
        and SILENT_UPSTREAM[failure.id](result)
    ]


def judge_patched(patched: dict, plain: dict | None, findings: list[str], plain_findings: list[str]) -> tuple[str, str]:
    """(status, outcome) of a patched run against the plain run of the same variant.

    ``findings``: what the judge checks (matrix/runs.py failed_checks, the watchdog's warnings among them) found
    wrong in a run that trained.
    """
    if plain is None:
        return "fail", "the plain run left no result to compare with"

    def trained(result: dict) -> bool:
        return result.get("status") == "ok" and bool(result.get("all_trainable_params_changed"))

    same_weights = trained(patched) and patched.get("weights_sha256") == plain.get("weights_sha256")
    if trained(plain) and not plain_findings:  # upstream trains correctly: patched must not change a thing
        if not trained(patched) or findings:
            return "fail", "HARM: plain trains, patched " + describe_plain(patched, findings).removeprefix("upstream ")
        if not same_weights:
            return "fail", "HARM: both train, but the weights differ from the plain run"
        return "pass", "both train, identical weights"
    upstream = describe_plain(plain, plain_findings)[:100]
    if trained(patched) and not findings:
        return "pass", f"corrects upstream ({upstream}): trains"
    if same_weights:  # left as upstream trains it; the watchdog may name what is wrong
        named = f"; watchdog: {findings[-1][:100]}" if findings else ""
        return "pass", f"as upstream ({upstream}), identical weights{named}"
    if patched.get("status") != "ok" and PHASES.index(patched.get("phase") or "train") <= PHASES.index(
        plain.get("phase") or "train"
    ):
        return "pass", f"both fail; patched in phase {patched.get('phase')}: {_first_line(patched)}"
    return "fail", "patched fails later than plain or trains wrongly: " + describe_plain(patched, findings)


def _first_line(result: dict) -> str:
    error = result.get("error") or ""
    lines = [line for line in error.splitlines() if line.strip()]
    return (lines[0] if lines else "")[:160]
