"""The sans-I/O assembler: frame text in, events and a valid JSON state out.

- :mod:`.events`: the events and their RFC 6902 patches.
- :mod:`.state`: the server-owned object under construction.
- :mod:`.validation`: per-slot validation of frame text.
- :mod:`.checks`: slot checks on values that validated (repeats, placeholders, copies);
  :mod:`.text_rules` and :mod:`.value_rules`: the rules they share with the benchmark's
  detectors.
- :mod:`.retry`: what a follow-up pass asks for.
- :mod:`.assembler`: the :class:`Assembler` that ties them together.
"""
