"""``python -m slotflight.cli``."""

from . import main

raise SystemExit(main())
