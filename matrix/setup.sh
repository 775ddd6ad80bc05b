#!/usr/bin/env bash
# Set up the development environment (.venv) on a fresh machine: the default cell's pins (torch CPU build, trl,
# transformers, ...) and grpo_compat itself, editable, with its dev extras (uv among them).
# Nothing is installed into the system's Python (a PEP 668 one refuses it): uv and packaging, which build .venv,
# go into a venv of their own, .matrix/bootstrap, made here with python3 -m venv.
# With --smoke, then run the main job: a patched GRPO smoke run on the tiny model, printing the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bootstrap=.matrix/bootstrap
if [[ ! -x "$bootstrap/bin/uv" ]]; then
    python3 -m venv "$bootstrap" || { echo "setup: python3 -m venv failed (Debian/Ubuntu: apt install python3-venv)" >&2; exit 1; }
    "$bootstrap/bin/python" -m pip install --quiet uv packaging
fi
PATH="$PWD/$bootstrap/bin:$PATH" "$bootstrap/bin/python" matrix/repository.py ensure --path .venv --extras dev >/dev/null
echo "set up .venv: $(.venv/bin/python -c 'import torch, trl, transformers; print("torch", torch.__version__, "trl", trl.__version__, "transformers", transformers.__version__)')"
if [[ "${1:-}" == "--smoke" ]]; then
    .venv/bin/python matrix/smoke_grpo.py --mode patched --output .matrix/smoke-patched.json --print-report
fi
