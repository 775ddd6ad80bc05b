import sys

from grpo_compat.catalogue import main

sys.exit(main())
