"""grpo_compat.apply() in every Python process a `grpo-compat run -- <command>` launch starts.

`grpo-compat run` puts this file's folder first on PYTHONPATH, so Python imports it at start-up in the
launcher, each rank and anything they start. It applies grpo_compat when GRPO_COMPAT_RUN=1 (which `run`
sets), then hands over to the sitecustomize it hides (the user's or the distribution's), if any. Its
folder leaves sys.path again, so the process sees the path it would have without grpo_compat.
"""

import os
import sys

RUN_ENV = "GRPO_COMPAT_RUN"  # "1": apply; anything else (this folder on a copied PYTHONPATH): do nothing
STRICT_ENV, ONLY_ENV, SKIP_ENV = "GRPO_COMPAT_RUN_STRICT", "GRPO_COMPAT_RUN_ONLY", "GRPO_COMPAT_RUN_SKIP"


def _refuse(message):
    # An exception here would be printed as "Error in sitecustomize" and the process would go on
    # unpatched; SystemExit is a fatal start-up error with a traceback. One line and the exit status, then.
    sys.stderr.write(f"grpo-compat run: {message}\n")
    sys.stderr.flush()
    os._exit(1)


class _RefuseUnpatchedTraining:
    """In a Python without grpo_compat: stop the process where it imports trl or ms-swift, not before.

    A launch may start Pythons that train nothing (a job script's helpers); those run as they would.
    """

    def find_spec(self, name, path=None, target=None):
        if name in ("trl", "swift"):
            _refuse(
                f"{sys.executable} cannot import grpo_compat, so it would train without it (it imports {name}); "
                f"install it into that environment: {_install_command()}"
            )


def _install_command() -> str:
    """How the launching grpo_compat (this file's package) installs into another Python of this machine: pip of
    its checkout's folder, else what pip recorded it was installed from (PEP 610 direct_url.json: a VCS URL at its
    commit, a folder, a wheel), else its release from the package index it came from."""
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pip = f"{sys.executable} -m pip install"
    if os.path.isfile(os.path.join(home, "pyproject.toml")):
        return f"{pip} {home}"
    prefix, suffix = "grpo_compat-", ".dist-info"  # the installed release's metadata folder, beside the package
    releases = [entry for entry in os.listdir(home) if entry.startswith(prefix) and entry.endswith(suffix)]
    if len(releases) != 1:
        return f"{pip} grpo-compat (from where you installed it)"
    source = _installed_from(os.path.join(home, releases[0], "direct_url.json"))
    return f"{pip} {source or 'grpo-compat==' + releases[0][len(prefix) : -len(suffix)]}"


def _installed_from(direct_url_json: str):
    """The pip argument PEP 610's direct_url.json names, quoted for a shell; None when there is none (an index)."""
    import json
    import shlex
    from urllib.parse import unquote, urlparse

    try:
        with open(direct_url_json, encoding="utf-8") as file:
            data = json.load(file)
        url, vcs = data["url"], data.get("vcs_info")
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if isinstance(vcs, dict) and vcs.get("vcs"):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        return shlex.quote(f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else ""))
    parsed = urlparse(url)
    return shlex.quote(unquote(parsed.path)) if parsed.scheme == "file" else shlex.quote(url)


def _apply():
    try:
        import grpo_compat
    except ImportError:
        sys.meta_path.insert(0, _RefuseUnpatchedTraining())
        return
    ids = {
        name: [i for i in os.environ.get(env, "").split(",") if i] or None
        for name, env in (("only", ONLY_ENV), ("skip", SKIP_ENV))
    }
    from grpo_compat.fixes.detectors import GRPO_TRAINER_MODULES

    # Every process of the launch applies; the report is logged by the one that trains (on rank 0), not by a
    # launcher such as `trl grpo` that imports trl to read its arguments and then starts the training process.
    grpo_compat._engine.defer_report(GRPO_TRAINER_MODULES)
    try:
        grpo_compat.apply(strict=os.environ.get(STRICT_ENV) == "1", only=ids["only"], skip=ids["skip"])
    except grpo_compat.GRPOCompatError as error:
        _refuse(f"{type(error).__name__}: {error}")


def _hand_over():
    """Import the sitecustomize this file hides on sys.path, as Python would have without grpo_compat."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    this = sys.modules.pop("sitecustomize")
    try:
        import sitecustomize  # noqa: F401 - the next one on the path runs as it would have
    except ModuleNotFoundError as error:
        if error.name != "sitecustomize":
            raise
        sys.modules["sitecustomize"] = this


if os.environ.get(RUN_ENV) == "1":
    _apply()
_hand_over()
