#!/usr/bin/env bash
# Set up the development environment (.venv) on a fresh machine: uv, the default cell's pins
# (torch CPU build, trl, transformers, ...) and grpo_compat itself, editable, with its dev extras.
# With --smoke, then run the main job: a patched GRPO smoke run on the tiny model, printing the report.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
python3 -c "import packaging" 2>/dev/null || python3 -m pip install --quiet packaging
python3 matrix/repository.py ensure --path .venv --extras dev >/dev/null
echo "set up .venv: $(.venv/bin/python -c 'import torch, trl, transformers; print("torch", torch.__version__, "trl", trl.__version__, "transformers", transformers.__version__)')"
if [[ "${1:-}" == "--smoke" ]]; then
    .venv/bin/python matrix/smoke_grpo.py --mode patched --output .matrix/smoke-patched.json --print-report
fi
