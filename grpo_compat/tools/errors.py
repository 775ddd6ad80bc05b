"""The error of every grpo-compat command: input it cannot use is one line on stderr and exit status 2.

Apart from grpo_compat.tools.arguments so that `grpo-compat run`, which starts before every launch, raises
it without importing argparse.
"""


class InputError(ValueError):
    """A command's input it cannot use; the message names the input and what was expected."""
