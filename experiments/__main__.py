"""`python -m experiments COMMAND ...`: the reproductions, workflows and benchmarks (see `experiments/cli.py`)."""

import sys

from experiments.cli import main

sys.exit(main())
