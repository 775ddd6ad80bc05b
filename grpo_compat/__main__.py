import sys

from grpo_compat.tools.cli import main

sys.exit(main())
