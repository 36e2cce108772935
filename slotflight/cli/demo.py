"""``slotflight demo``: a support ticket triaged live on the embedded model.

With no endpoint configured it starts the local llama.cpp server on a free port and
streams with the plan's grammar on: SmolLM2-135M by default, or with ``--model`` one of
the benchmark's larger models (``qwen2.5-coder-1.5b``, once its parts are installed:
``make bench-models``). With ``OPENAI_BASE_URL`` (and ``--model``) it runs against that
server instead. The object fills in live in the terminal, then the final
validated object and the timings are printed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from openai import OpenAI
from pydantic import BaseModel, Field
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.pretty import Pretty
from rich.table import Table

from .._advice import CommandError
from .._jsonable import dumps
from ..client import sync_stream
from ..syntax import DEFAULT_SYNTAX

if TYPE_CHECKING:
    from ..bench.split_models import SplitModel

TICKET = (
    "Hi, this is Dana Whitfield from Harbor Freight Logistics. Since Monday the nightly "
    "CSV export fails for every file over 2 GB with 'worker killed'. Finance needs the "
    "numbers by Friday. Very frustrating!"
)


class Triage(BaseModel):
    """A ticket's facts as stated in it. Strings are bounded: with a grammar each is one
    line of at most that many characters, which keeps a small model from running on."""

    customer: str = Field(max_length=80, description="Full name of the person writing")
    company: str = Field(max_length=80, description="The customer's company")
    summary: str = Field(max_length=160, description="What fails, in one sentence")
    area: Literal["export", "billing", "login", "api"] = Field(description="Where the problem is")
    sentiment: Literal["negative", "neutral", "positive"] = Field(
        description="How the customer feels"
    )
    deadline: str | None = Field(
        default=None, max_length=40, description="When the customer needs a fix, as written"
    )


def _render(
    state: dict[str, Any], done: set[str], title: str, flagged: frozenset[str] = frozenset()
) -> Table:
    table = Table(title=title, show_lines=False, expand=True)
    table.add_column("field", style="cyan", no_wrap=True)
    table.add_column("value")
    table.add_column("", width=2)

    def rows(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                rows(f"{prefix}/{key}", sub)
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                rows(f"{prefix}/{i}", sub)
        else:
            if prefix in flagged:
                mark = "[red]?[/]"  # kept although a slot check failed on it again
            else:
                mark = "[green]✓[/]" if prefix in done else "[yellow]…[/]"
            table.add_row(prefix, str(value), mark)

    rows("", state)
    return table


def _split_model(name: str | None) -> SplitModel | None:
    """The benchmark's split model ``--model`` names for the embedded server (``None``:
    the packaged SmolLM2); :class:`CommandError` for a name it does not know."""
    if name is None:
        return None
    from ..bench.split_models import KNOWN_MODELS

    model = KNOWN_MODELS.get(name)
    if model is None:
        raise CommandError(
            f"unknown model {name!r}",
            f"without a server, --model is one of {', '.join(KNOWN_MODELS)}; with --base-url"
            " or OPENAI_BASE_URL it names a model that server serves",
        )
    return model


def _embedded_model(model: SplitModel | None) -> tuple[Path | None, str, str]:
    """The file the embedded server loads for ``model`` (``None``: the packaged
    SmolLM2), what it is, and the frame syntax it answers best in; a split model is
    joined from its installed parts on first use."""
    if model is None:
        return None, "SmolLM2-135M-Instruct", DEFAULT_SYNTAX
    from ..bench.split_models import assembled_model

    return assembled_model(model), model.title, model.syntax or DEFAULT_SYNTAX


def run_demo(
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    ticket: str = TICKET,
    max_tokens: int = 400,
    syntax: str | None = None,
    console: Console | None = None,
) -> int:
    console = console or Console()
    base_url = base_url or os.environ.get("OPENAI_BASE_URL")
    server = None
    grammar: Literal["llama.cpp"] | Literal[False] = False
    if base_url is None:
        split = _split_model(model)  # an unknown name fails before anything starts
        from ..local import start_local_server

        path, title, best = _embedded_model(split)
        syntax = syntax or best
        console.print(f"[bold]Starting the embedded model[/] ({title}, llama.cpp)…")
        server = start_local_server(path)
        base_url, model, grammar = server.base_url, server.model, "llama.cpp"
    elif model is None:
        raise CommandError(
            "--model is required with a server (--base-url or OPENAI_BASE_URL)",
            "name the model the server serves, e.g. --model NAME (its /v1/models lists them)",
        )
    client = OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY", "local"))
    messages = [
        {"role": "user", "content": f"Triage this support ticket:\n{ticket}"},
    ]
    start = time.perf_counter()
    first: float | None = None
    field_times: dict[str, float] = {}
    try:
        with (
            sync_stream.stream(
                client,
                model=model,
                messages=messages,
                output=Triage,
                grammar=grammar,
                syntax=syntax or DEFAULT_SYNTAX,
                temperature=0,
                max_tokens=max_tokens,
            ) as s,
            Live(console=console, refresh_per_second=12) as live,
        ):
            for event in s:
                if event.type == "slot-complete":
                    now = time.perf_counter() - start
                    first = now if first is None else first
                    field_times[getattr(event, "slot", "?")] = now
                done = set(s.completed())
                marked = frozenset(s.flagged())
                live.update(_render(s.state, done, f"Triage (attempt {s.attempt})", marked))
            result = s.final()
            usage = s.usage.total
            flagged = s.flagged()
        elapsed = time.perf_counter() - start
    finally:
        if server is not None:
            server.close()
    console.print(Pretty(result.model_dump(mode="json")))
    for pointer, detail in flagged.items():
        console.print(f"[red]?[/] {escape(pointer)}: {escape(detail.message)} ({detail.code})")
    timing = Table(title="Timings", expand=False)
    timing.add_column("what")
    timing.add_column("seconds", justify="right")
    timing.add_row("time to first field", f"{first or 0:.2f}")
    for slot, t in field_times.items():
        timing.add_row(f"  {slot}", f"{t:.2f}")
    timing.add_row("all fields", f"{elapsed:.2f}")
    if usage.completion_tokens:
        timing.add_row("completion tokens", str(usage.completion_tokens))
        timing.add_row("tokens / s", f"{usage.completion_tokens / elapsed:.1f}")
    console.print(Group(timing))
    console.print(f"[dim]{dumps(result)}[/]")
    return 0
