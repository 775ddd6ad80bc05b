"""`python -m matrix`: this repository's matrix through the package's command line (grpo-compat matrix)."""

import sys

from grpo_compat.matrix.cli import main
from matrix.project import repository_project

sys.exit(main(sys.argv[1:], repository=repository_project))
