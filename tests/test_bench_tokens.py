"""The token benchmark: every format renders every instance; v2 costs less than JSON."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks.tokens import FORMATS, load_instances, measure, table


def test_every_format_writes_every_instance_and_the_table_has_every_task() -> None:
    rows = load_instances()
    assert len(rows) >= 12 and {r["schema"] for r in rows} == {
        "triage",
        "product",
        "outline",
        "meeting",
    }
    result = measure(rows, len)  # characters stand in for tokens here
    assert set(result["totals"]) == set(FORMATS)
    assert result["ratio"]["json"] == 1.0
    text = table(result)
    assert all(r["task"] in text for r in rows)


def test_v2_costs_at_most_nine_tenths_of_compact_json_tokens() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    import llama_cpp

    from slotflight._errors import SlotflightError
    from slotflight.local._model import default_model_path

    try:
        path = default_model_path()
    except SlotflightError:
        pytest.skip("no GGUF model installed")
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    result = measure(
        load_instances(),
        lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)),
    )
    assert result["ratio"]["v2"] <= 0.9, result["ratio"]
    assert result["ratio"]["v2"] < result["ratio"]["v1"]
