"""Gate for tests that need the embedded model: skip without it, fail under CI."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel


def _unavailable() -> str | None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        return f"llama-cpp-python is not importable ({exc}); install the 'local' extra"
    from slotflight import SlotflightError
    from slotflight.local import default_model_path

    try:
        default_model_path()
    except SlotflightError as exc:
        return f"no GGUF model: {exc.message}"
    return None


def require_local_model() -> None:
    """Call at module level: skips the module, or fails it when ``CI=true``."""
    reason = _unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the local model cannot run: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def assert_sensible(model: type[BaseModel], obj: Mapping[str, Any], input_text: str = "") -> None:
    """``obj`` validates against ``model`` and no detector of the benchmark flags one of
    its values (slot ids, placeholders or example values written as values, one value
    repeated across fields or list items). ``input_text``: the input the model was given,
    so a number or a schema word it states is excused as the benchmark excuses it
    (without it, none is)."""
    from slotflight.bench.accuracy import detect_degenerate, schema_examples
    from slotflight.bench.runner import slot_identifiers
    from slotflight.plan.compiler import compile as compile_schema

    model.model_validate(obj)
    schema = model.model_json_schema()
    found = detect_degenerate(
        schema,
        obj,
        identifiers=slot_identifiers(compile_schema(model)),
        examples=schema_examples(schema),
        input_text=input_text,
    )
    assert not found.any, (found.to_json(), obj)
