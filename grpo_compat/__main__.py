import sys

from grpo_compat.cli import main

sys.exit(main())
