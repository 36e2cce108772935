"""The benchmark schemas and the tasks that exercise them.

Five realistic output models, one per task family, registered in :data:`SCHEMAS` under a
short name. Every array is one level deep (no list inside list items), so each array
path expands into repeatable slots. Optional fields default to ``None`` and may be left
out in either mode; every other field is required. ``ticket`` is the extraction schema:
every answer is stated in the input.

Tasks live in ``slotflight/bench/tasks/<schema>.jsonl`` (shipped in the wheel), one JSON
object per line::

    {"id": "triage-001", "schema": "triage", "input": "...", "instructions": "...",
     "gold": {...}}

``gold`` is the hand-written right answer (valid against the schema; free-text fields
hold a reference text). It may be left out of tasks read with ``--tasks``; their runs
then have no accuracy. Tasks are read with :func:`load_tasks`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

__all__ = [
    "SCHEMAS",
    "TASKS_DIR",
    "Action",
    "ActionItem",
    "ArticleOutline",
    "Dimensions",
    "MeetingNotes",
    "OrderTicket",
    "ProductExtraction",
    "Section",
    "SupportTriage",
    "Task",
    "load_tasks",
]

#: Where the task files live.
TASKS_DIR: Final = Path(__file__).resolve().parent / "tasks"

_STRICT = ConfigDict(extra="forbid")

ShortText = Annotated[str, StringConstraints(min_length=1, max_length=120)]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=30)]
PersonName = Annotated[str, StringConstraints(min_length=1, max_length=60)]


# --------------------------------------------------------------------------- triage


class ActionItem(BaseModel):
    """A follow-up the support team owes the customer or itself."""

    model_config = _STRICT

    description: ShortText = Field(description="What has to be done, as an imperative sentence.")
    owner: PersonName = Field(
        description="Team or person responsible, e.g. 'billing team' or 'Léa Martin'."
    )
    due: dt.date | None = Field(
        default=None, description="Deadline as YYYY-MM-DD if the ticket implies one."
    )


class SupportTriage(BaseModel):
    """Triage of one inbound customer support ticket."""

    model_config = _STRICT

    summary: str = Field(
        min_length=1,
        max_length=200,
        description="One or two neutral sentences stating the customer's problem.",
    )
    sentiment: Literal["positive", "neutral", "negative", "mixed"] = Field(
        description="Overall tone of the customer."
    )
    priority: int = Field(
        ge=1, le=5, description="1 = lowest, 5 = outage or data loss affecting the customer."
    )
    needs_human: bool = Field(
        description="True when an agent must reply personally (refunds, legal, anger, outages)."
    )
    product_area: Literal[
        "billing", "authentication", "performance", "integrations", "mobile_app", "data_export"
    ] = Field(description="The part of the product the ticket is about.")
    tags: list[Tag] = Field(
        min_length=1, max_length=5, description="Short lowercase labels, e.g. 'refund'."
    )
    action_items: list[ActionItem] = Field(
        default_factory=list, max_length=4, description="Concrete follow-ups, at most four."
    )


# --------------------------------------------------------------------------- product


class Dimensions(BaseModel):
    """Outer dimensions of the product in centimetres."""

    model_config = _STRICT

    width_cm: float = Field(gt=0, description="Width in centimetres.")
    height_cm: float = Field(gt=0, description="Height in centimetres.")
    depth_cm: float = Field(gt=0, description="Depth in centimetres.")


class ProductExtraction(BaseModel):
    """Structured facts extracted from one product page."""

    model_config = _STRICT

    name: ShortText = Field(description="Product name without the brand.")
    brand: str | None = Field(
        default=None, max_length=60, description="Brand or maker, if the page names one."
    )
    price: float = Field(ge=0, description="Current selling price as a plain number.")
    currency: Literal["USD", "EUR", "GBP", "JPY", "KRW"] = Field(
        description="ISO 4217 code of the price's currency."
    )
    in_stock: bool = Field(description="True if the page says it can be ordered now.")
    rating: float | None = Field(
        default=None, ge=0, le=5, description="Average customer rating out of 5, if shown."
    )
    dimensions: Dimensions | None = Field(
        default=None, description="Outer dimensions, converted to centimetres, if given."
    )
    features: list[ShortText] = Field(
        max_length=8, description="Distinct selling points, one short phrase each."
    )


# --------------------------------------------------------------------------- outline


class Section(BaseModel):
    """One section of the planned article."""

    model_config = _STRICT

    heading: ShortText = Field(description="Section heading in title case.")
    summary: str = Field(
        min_length=1, max_length=300, description="Two sentences on what the section covers."
    )
    est_words: int = Field(ge=50, le=3000, description="Estimated length of the section in words.")


class ArticleOutline(BaseModel):
    """An outline for an article written from a brief."""

    model_config = _STRICT

    title: ShortText = Field(description="Working title of the article.")
    audience: Literal["general", "beginner", "practitioner", "expert", "executive"] = Field(
        description="Who the article is written for."
    )
    sections: list[Section] = Field(
        min_length=2, max_length=6, description="The article's sections, in order."
    )
    reading_time_min: int = Field(ge=1, le=60, description="Estimated reading time in minutes.")


# --------------------------------------------------------------------------- meeting


class Action(BaseModel):
    """A task agreed in the meeting."""

    model_config = _STRICT

    task: ShortText = Field(description="What will be done.")
    owner: PersonName = Field(description="The attendee who took the task.")
    due: dt.date = Field(description="Deadline as YYYY-MM-DD.")


class MeetingNotes(BaseModel):
    """Minutes of one meeting, taken from its transcript."""

    model_config = _STRICT

    title: ShortText = Field(description="Short name of the meeting.")
    date: dt.date = Field(description="Day the meeting took place, YYYY-MM-DD.")
    attendees: list[PersonName] = Field(
        min_length=1, max_length=12, description="Names of the people present."
    )
    decisions: list[ShortText] = Field(
        max_length=8, description="Decisions taken, one sentence each."
    )
    action_items: list[Action] = Field(
        max_length=8, description="Tasks with an owner and a deadline."
    )
    next_meeting: dt.date | None = Field(
        default=None, description="Date of the next meeting, if one was set."
    )


# --------------------------------------------------------------------------- ticket


class OrderTicket(BaseModel):
    """The facts of one order-support message sent to the Lumen Home online shop."""

    model_config = _STRICT

    customer_name: PersonName = Field(description="Full name of the customer who wrote.")
    order_id: str = Field(
        min_length=4,
        max_length=20,
        description="The shop's order number the message is about (LH- and six digits).",
    )
    product: Literal[
        "desk_lamp",
        "air_purifier",
        "robot_vacuum",
        "coffee_grinder",
        "smart_plug",
        "electric_kettle",
        "space_heater",
        "blender",
    ] = Field(description="The product the customer ordered.")
    issue_type: Literal[
        "not_delivered",
        "damaged_in_transit",
        "wrong_item",
        "stopped_working",
        "charged_incorrectly",
        "missing_parts",
    ] = Field(description="What went wrong with the order.")
    sentiment: Literal["positive", "neutral", "negative"] = Field(
        description="Overall tone of the message."
    )
    refund_requested: bool = Field(
        description="True if the customer asks for money back, in full or in part."
    )
    amount: float | None = Field(
        default=None,
        ge=0,
        multiple_of=0.01,
        description="The sum the customer asks back or says was wrongly charged, if stated.",
    )
    order_date: dt.date | None = Field(
        default=None, description="Day the order was placed, YYYY-MM-DD, if stated."
    )


#: The benchmark schemas by short name.
SCHEMAS: Final[Mapping[str, type[BaseModel]]] = {
    "triage": SupportTriage,
    "product": ProductExtraction,
    "outline": ArticleOutline,
    "meeting": MeetingNotes,
    "ticket": OrderTicket,
}


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Task:
    """One benchmark input: the raw text, what to do with it, the schema to fill and,
    when known, the right answer (``gold``, JSON-mode data valid against the schema)."""

    id: str
    schema: str
    input: str
    instructions: str
    gold: Mapping[str, Any] | None = None

    @property
    def model(self) -> type[BaseModel]:
        """The Pydantic model this task's output must validate against."""
        return SCHEMAS[self.schema]


#: The longest task line read, in bytes (without its line break). A task is a few
#: kilobytes; a longer line is refused as soon as it is seen, not read whole.
MAX_TASK_LINE_BYTES: Final = 1024 * 1024

_TEXT_KEYS: Final = frozenset({"id", "schema", "input", "instructions"})
_TASK_KEYS: Final = _TEXT_KEYS | {"gold"}


def _parse_task(line: str, where: str) -> Task:
    try:
        data = json.loads(line)
    except RecursionError:
        raise ValueError(f"{where}: not a task: JSON nested too deeply") from None
    except ValueError as exc:  # malformed, or an integer too long to convert
        raise ValueError(f"{where}: not JSON: {exc}") from None
    if not isinstance(data, dict) or not _TEXT_KEYS <= set(data) <= _TASK_KEYS:
        raise ValueError(
            f"{where}: a task is an object with the keys {sorted(_TEXT_KEYS)} and an optional"
            " 'gold'"
        )
    if not all(isinstance(data[k], str) and data[k] for k in _TEXT_KEYS):
        raise ValueError(f"{where}: every task field is a non-empty string")
    if data["schema"] not in SCHEMAS:
        raise ValueError(f"{where}: unknown schema {data['schema']!r}")
    gold = data.get("gold")
    if gold is not None:
        try:
            SCHEMAS[data["schema"]].model_validate_json(json.dumps(gold), strict=True)
        except ValidationError as exc:
            raise ValueError(f"{where}: the gold answer does not validate: {exc}") from None
    return Task(
        id=data["id"],
        schema=data["schema"],
        input=data["input"],
        instructions=data["instructions"],
        gold=gold,
    )


def _lines(handle: BinaryIO, name: str) -> Iterator[str]:
    """The lines of the task file ``name``, decoded, each read within the bound."""
    number = 0
    while raw := handle.readline(MAX_TASK_LINE_BYTES + 2):
        number += 1
        if len(raw.removesuffix(b"\n")) > MAX_TASK_LINE_BYTES:
            raise ValueError(
                f"{name}:{number}: a task line is longer than {MAX_TASK_LINE_BYTES:,} bytes;"
                " a task file holds one task per line"
            )
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{name}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset"
                f" {exc.start}); save the file as UTF-8"
            ) from None
        yield line


def load_tasks(
    directory: Path | str | None = None, schemas: Iterable[str] | None = None
) -> list[Task]:
    """Read the tasks of ``directory`` (every ``*.jsonl`` file in it, default
    :data:`TASKS_DIR`), or of one ``*.jsonl`` file.

    Files are read in name order and lines in file order; blank lines are skipped.
    ``schemas`` keeps only tasks for those schema names. Raises :class:`ValueError` for
    a missing path, a line that is not UTF-8 or longer than
    :data:`MAX_TASK_LINE_BYTES`, a malformed line (JSON nested too deeply among them), an
    unknown schema name, a gold answer that does not validate, a duplicate task id or a
    file that cannot be read.
    """
    root = Path(directory) if directory is not None else TASKS_DIR
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(root.glob("*.jsonl"))
    else:
        raise ValueError(f"no task file or directory at {root}")
    wanted: frozenset[str] | None = None
    if schemas is not None:
        wanted = frozenset(schemas)
        unknown = wanted - SCHEMAS.keys()
        if unknown:
            raise ValueError(f"unknown schema names: {sorted(unknown)}")
    tasks: list[Task] = []
    seen: set[str] = set()
    for path in files:
        try:
            with path.open("rb") as handle:
                for number, line in enumerate(_lines(handle, path.name), start=1):
                    if not line.strip():
                        continue
                    task = _parse_task(line, f"{path.name}:{number}")
                    if task.id in seen:
                        raise ValueError(f"{path.name}:{number}: duplicate task id {task.id!r}")
                    seen.add(task.id)
                    if wanted is None or task.schema in wanted:
                        tasks.append(task)
        except OSError as exc:
            raise ValueError(f"cannot read the task file {path}: {exc.strerror or exc}") from None
    return tasks
