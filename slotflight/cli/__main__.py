"""``python -m slotflight.cli``: the ``slotflight`` command."""

import sys

from . import main

sys.exit(main())
