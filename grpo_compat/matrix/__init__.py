"""The version matrix: GRPO runs across library versions, each plain and patched (`grpo-compat matrix`).

Roles, in the order a run goes through them:
    cells.py      cells files: the cells (pins of one env each) and a user's entries
    envs.py       one uv env per cell; "newest" pins resolved first; where grpo_compat comes from
    project.py    a project: cells file + plan (which runs, how started, how judged) + folders
    runner.py     the one runner: builds envs, runs the plan, writes a JSON per cell, then the reports
    report.py     summary.md, report.html (run kinds down, cells across) and JUnit XML
    workflow.py   a GitHub Actions workflow from a cells file
    launchers.py  1 or 2 processes: python, accelerate launch (DDP, DeepSpeed ZeRO-2/3), torchrun
    entries.py    a user's plan: their script / `trl grpo` config / `swift rlhf` arguments
    entry_run.py  runs one entry in a cell env, plainly or with grpo_compat, and writes its result
    init.py       `grpo-compat matrix init`: a starter cells file and entry point
    cli.py        the command line
This repository's own plan (smoke scripts, reproducers, probes) lives in its checkout's matrix/.
"""
