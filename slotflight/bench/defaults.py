"""The benchmark's defaults, the same for every mode (``docs/bench.md``).

Kept apart from the runner so that the command line can show them without importing
the runner's dependencies.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_RUNS",
    "DEFAULT_SEED",
    "DEFAULT_TEMPERATURE",
    "MODES",
    "RESULTS_FORMAT",
    "Mode",
]

Mode: TypeAlias = Literal["slots", "json_schema", "json_prompt"]

#: Format tag of the results documents (``NAME.jsonl``'s header, ``NAME.json``).
RESULTS_FORMAT: Final = "slotflight-bench/2"

#: The modes, in the order they run for each task and the reports show them.
MODES: Final[tuple[Mode, ...]] = ("slots", "json_schema", "json_prompt")

#: Above 0 so that seeds give different samples, low enough that a small model stays
#: on task.
DEFAULT_TEMPERATURE: Final = 0.3
#: Room for the longest gold answer written as JSON (an outline) with some margin.
DEFAULT_MAX_TOKENS: Final = 400
#: Repetitions, with seeds ``DEFAULT_SEED``, ``DEFAULT_SEED + 1``, ...
DEFAULT_RUNS: Final = 3
DEFAULT_SEED: Final = 1
