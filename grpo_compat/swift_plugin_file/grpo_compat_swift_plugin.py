"""grpo_compat for ms-swift's command line, in every process swift starts.

    swift rlhf --rlhf_type grpo ... --external_plugins "$(grpo-compat plugin-path)" [your_plugin.py ...]

ms-swift imports this file in each rank while it parses the arguments, before the model loads; what
happens then is grpo_compat.swift_plugin.activate(). Absolute imports only: ms-swift 3.x imports the
file as a top-level module. It is alone in its folder because swift puts the folder first on sys.path.
"""

try:
    from grpo_compat.swift_plugin import activate
except ModuleNotFoundError as error:
    if error.name is None or error.name.split(".")[0] != "grpo_compat":
        raise
    raise ModuleNotFoundError(
        "grpo_compat's ms-swift plugin was passed to swift, but grpo_compat cannot be imported by the Python that "
        "runs swift: install grpo-compat in that environment as you installed it where `grpo-compat plugin-path` runs "
        "(pip install of the clone's folder, of a wheel built from it, or "
        'pip install "git+https://github.com/grpo-compat/grpo-compat")'
    ) from None

activate()
