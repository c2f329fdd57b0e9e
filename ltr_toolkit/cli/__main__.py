"""``python -m ltr_toolkit.cli``."""

import sys

from . import main

sys.exit(main())
