"""Settings this machine cannot run: ``grpo-compat check`` refuses them here, as upstream would when the job starts.

Each rule is what upstream itself does, read in the released code and run on real installs (the measurements
are in docs/newer-than-tested.md):

- **bf16 with no accelerator.** transformers 4.52 onwards refuses ``bf16`` (and ``bf16_full_eval``) without
  ``use_cpu`` when torch sees no bf16 device: ``ValueError: Your setup doesn't support bf16/gpu.`` while the config
  is parsed (``trl grpo --config`` stops there). transformers 4.45-4.51 checked only a CUDA GPU without bf16 and
  train in bf16 on a CPU, so they are left alone; with ``use_cpu`` every release trains on the CPU. trl 0.19
  onwards turns bf16 on when the config names neither bf16 nor fp16 (GRPOConfig's default, read from the settings
  history), so such a config is refused too, saying so.
- **use_vllm without vLLM.** Every trl with ``use_vllm`` raises ``ImportError: vLLM is not available and
  `use_vllm` is set to True`` when the trainer starts, in server mode as in colocate mode (both import vLLM here).
- **fp16 is not refused**: accelerate (0.34 to 1.15 read) leaves mixed precision off on a CPU device, and
  transformers has no CPU check with torch >= 2.3; a GRPO run with ``fp16: true`` trains on this CPU machine.

Whether the machine has an accelerator is read from its device files, never by importing torch (``check`` loads
nothing): any NVIDIA, AMD, Intel, Ascend, Habana, Neuron or TPU device file, macOS (MPS) or torch_xla counts as
one, so a machine that may have a device is never refused.
"""

from __future__ import annotations

import glob
import sys

from grpo_compat.core.versions import installed_version, window_problem
from grpo_compat.fixes.validation import Finding

# transformers' TrainingArguments refuses bf16 without use_cpu on a machine with no bf16 device (read: 4.45.2, 4.48.3,
# 4.51.3 do not; 4.52.0, 4.52.4, 4.53.3 ... 4.57.6, 5.0.0, 5.10.0, 5.23.0, 5.24.0 do).
BF16_REFUSED_WITHOUT_DEVICE = "transformers>=4.52"
UPSTREAM_BF16_MESSAGE = "Your setup doesn't support bf16/gpu"
# Device files of the accelerators torch trains bf16 on: NVIDIA (and its GPUs under WSL2, /dev/dxg), AMD (ROCm),
# Intel (XPU) and other DRM GPUs, Ascend NPU, Habana Gaudi and TPU (/dev/accel*), AWS Neuron, Moore Threads (MUSA),
# Cambricon (MLU).
DEVICE_FILES = (
    "/dev/nvidia[0-9]*",
    "/dev/dxg",
    "/proc/driver/nvidia/gpus/*",
    "/dev/kfd",
    "/dev/dri/renderD*",
    "/dev/davinci[0-9]*",
    "/dev/accel*",
    "/dev/neuron*",
    "/dev/mtgpu*",
    "/dev/cambricon*",
    "/dev/vfio/[0-9]*",
)


def has_accelerator() -> bool:
    """Whether this machine may have a device torch trains bf16 on; False only when none can be there."""
    if sys.platform == "darwin" or installed_version("torch-xla") or installed_version("torch_xla"):
        return True
    return any(glob.glob(pattern) for pattern in DEVICE_FILES)


def _on(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


def bf16_by_default(trl_version: str | None) -> bool:
    """Whether the trl release turns bf16 on when a config names neither bf16 nor fp16 (a ``None`` default)."""
    from grpo_compat.settings.history import load

    entry = load("trl").at(trl_version).get("bf16") if trl_version else None
    return bool(entry) and entry.get("default") is None


def machine_findings(config: dict, trl_version: str | None, accelerator: bool | None = None) -> list[Finding]:
    """What in a TRL config this machine cannot run, with the fix; nothing where trl is not installed here (the
    config is then checked for another machine) or where a device may be present."""
    if not installed_version("trl"):
        return []
    findings = []
    if not _on(config.get("use_cpu")) and not _on(config.get("no_cuda")):
        bf16 = config.get("bf16")
        implied = bf16 is None and not _on(config.get("fp16")) and bf16_by_default(trl_version)
        named = [name for name in ("bf16", "bf16_full_eval") if _on(config.get(name))]
        transformers = installed_version("transformers")
        refused = transformers and window_problem((BF16_REFUSED_WITHOUT_DEVICE,)) is None
        if (named or implied) and refused and not (has_accelerator() if accelerator is None else accelerator):
            what = (
                f"{' and '.join(f'{name}: true' for name in named)} is"
                if named
                else f"bf16 is not set, and trl {trl_version} turns it on (GRPOConfig's default since 0.19): it is"
            )
            fixes = (*(((name, False),) for name in named or ["bf16"]), (("use_cpu", True),))
            findings.append(
                Finding(
                    "bf16-without-gpu",
                    "error",
                    f"{what} refused on this machine, which has no GPU: transformers {transformers} stops at the "
                    f'config ("{UPSTREAM_BF16_MESSAGE}"). Train on a GPU machine (check a config meant for one '
                    "with --other-machine), or on this CPU in float32 or with use_cpu in bf16.",
                    fixes,
                )
            )
    if _on(config.get("use_vllm")) and not installed_version("vllm"):
        findings.append(
            Finding(
                "use-vllm-without-vllm",
                "error",
                "use_vllm: true needs vLLM installed in this environment (in server mode too: trl imports it to talk "
                'to the server), and none is: trl stops when the trainer starts ("vLLM is not available and '
                '`use_vllm` is set to True"). pip install vllm (the version your trl declares: pip install '
                "'trl[vllm]'), or generate with transformers.",
                ((("use_vllm", False),),),
            )
        )
    return findings
