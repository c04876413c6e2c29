"""`python -m lmforge.pipeline.cli ...`: the `lmforge` command, as before the CLI became a
folder."""

import sys

from lmforge.pipeline.cli.main import main

sys.exit(main())
