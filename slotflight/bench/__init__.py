"""``slotflight bench``: answer accuracy and streaming behaviour of slots against native
JSON modes, on the same tasks and server. Needs the ``bench`` extra."""
