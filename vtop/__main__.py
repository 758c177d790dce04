"""`python -m vtop`."""

import sys

from vtop.cli import main

sys.exit(main())
