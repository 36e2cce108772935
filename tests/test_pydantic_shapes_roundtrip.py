"""Real-world Pydantic v2 models as ``output=``: one correct answer, one request, the
instance back.

Each case compiles the model, writes the instance with the plan's own frame writer
(:func:`slotflight.render_frames`, default syntax), serves that text from a
:class:`ScriptedServer` to the real ``openai`` client, and checks that
:func:`slotflight.complete` returns an instance equal to the one written, of the same
class, after exactly one request (one reply is queued: a retry would find none).
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any, Generic, Literal, Optional, TypeVar

import pytest
from pydantic import (
    AliasChoices,
    AliasPath,
    AnyUrl,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    NameEmail,
    RootModel,
    SecretStr,
    computed_field,
    conlist,
)
from pydantic.alias_generators import to_camel

import slotflight
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import render_frames
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import MESSAGES, sync_client

# -- aliases -------------------------------------------------------------------------------


class Aliased(BaseModel):
    sender: str = Field(alias="from")
    to: str = Field(validation_alias="dest")
    size: int = Field(serialization_alias="sz")
    both: int = Field(validation_alias="b_in", serialization_alias="b_out")


class Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    first_name: str
    last_seen_days: int
    home_city: CamelCity | None = None


class CamelCity(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    city_name: str = Field(serialization_alias="CITY")


Camel.model_rebuild()


class Choices(BaseModel):
    x: int = Field(validation_alias=AliasChoices("xx", "x_"))
    y: int = Field(validation_alias=AliasChoices(AliasPath("a", 0), AliasPath("yy")))


class ByName(BaseModel):
    """Validation reads field names only: the schema asks for names."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)
    first: int = Field(alias="First")


class PathByName(BaseModel):
    """A nested-path alias, but validation reads the field name too."""

    model_config = ConfigDict(populate_by_name=True)
    x: int = Field(validation_alias=AliasPath("a", "b"))


class Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    sender: str = Field(alias="from")


# -- optional, unions, enums -----------------------------------------------------------------


class Address(BaseModel):
    city: str
    zip: int = 0


class Optionals(BaseModel):
    a: Optional[Address]  # noqa: UP045 (the spelling is the shape under test)
    b: Address | None = None
    c: Address | None = None
    many: list[Address | None] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    meows: int


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: bool


class Pets(BaseModel):
    pet: Cat | Dog = Field(discriminator="kind")
    pets: list[Annotated[Cat | Dog, Field(discriminator="kind")]]


class Scalars(BaseModel):
    a: int | str
    b: float | bool
    c: int | str | None = None


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mood(enum.StrEnum):
    HAPPY = "happy"
    SAD = "sad"


class Enums(BaseModel):
    color: Color
    level: Level
    mood: Mood
    colors: list[Color]
    levels: list[Level]
    moods: list[Mood]


# -- formats, constraints, containers --------------------------------------------------------


class Formats(BaseModel):
    at: dt.datetime
    at_utc: dt.datetime
    day: dt.date
    clock: dt.time
    span: dt.timedelta
    id: uuid.UUID
    amount: Decimal
    site: AnyUrl


class Constrained(BaseModel):
    n: Annotated[int, Field(ge=1)]
    few: conlist(int, min_length=2, max_length=4)  # type: ignore[valid-type]
    some: list[str] = Field(min_length=1)


class Containers(BaseModel):
    counts: dict[str, int]
    pair: tuple[int, str]
    names: set[str]
    frozen: frozenset[int]
    row: tuple[int, ...]


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Tree(BaseModel):
    root: Node


class Item(BaseModel):
    name: str
    qty: int


Items = RootModel[list[Item]]
T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int


# -- fields the schema leaves out or adds ----------------------------------------------------


class Computed(BaseModel):
    w: int
    h: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def area(self) -> int:
        return self.w * self.h


class Factories(BaseModel):
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, int] = Field(default_factory=dict)
    home: Address = Field(default_factory=lambda: Address(city="Lyon"))


class Excluded(BaseModel):
    a: int
    secret: str = Field(exclude=True)
    nested: list[ExcludedItem] = []


class ExcludedItem(BaseModel):
    note: str = Field(exclude=True)


Excluded.model_rebuild()


def _examples(schema: dict[str, Any]) -> None:
    schema["examples"] = ["sample"]


class Extras(BaseModel):
    model_config = ConfigDict(
        json_schema_extra=lambda schema, cls: schema.setdefault("description", "Extras")
    )
    a: str = Field(json_schema_extra=_examples)


class SerializationSchema(BaseModel):
    """Its JSON Schema is the serialization one; the plan asks what validation reads."""

    model_config = ConfigDict(json_schema_mode_override="serialization")
    x: int = Field(serialization_alias="X")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def doubled(self) -> int:
        return 2 * self.x


class Secrets(BaseModel):
    token: SecretStr


# -- strict models: the final check reads JSON, so dates and UUIDs come as text --------------


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)
    n: int
    f: float
    day: dt.date
    at: dt.datetime
    id: uuid.UUID
    amount: Decimal
    color: Color
    pair: tuple[int, str]
    names: set[str]
    home: Address
    tags: list[str]


def _tree(depth: int) -> Node:
    node = Node(name="leaf")
    for i in range(depth):
        node = Node(name=f"n{i}", children=[node, Node(name=f"s{i}")])
    return node


class Contact(BaseModel):
    email: EmailStr
    cc: list[EmailStr] = []
    named: NameEmail | None = None


CASES: list[Any] = [
    pytest.param(
        Aliased.model_validate({"from": "a", "dest": "b", "size": 3, "b_in": 4}), id="aliases"
    ),
    pytest.param(
        Camel(first_name="Ada", last_seen_days=4, home_city=CamelCity(city_name="Lyon")),
        id="alias-generator",
    ),
    pytest.param(Choices.model_validate({"xx": 5, "yy": 6}), id="alias-choices"),
    pytest.param(ByName(first=1), id="validate-by-name-only"),
    pytest.param(PathByName(x=2), id="alias-path-read-by-name"),
    pytest.param(Forbid.model_validate({"a": 1, "from": "x"}), id="extra-forbid"),
    pytest.param(
        Optionals(a=Address(city="L", zip=1), b=Address(city="M"), many=[None, Address(city="N")]),
        id="optional-nested",
    ),
    pytest.param(Optionals(a=None), id="optional-nested-null"),
    pytest.param(
        Pets(pet=Cat(kind="cat", meows=3), pets=[Dog(kind="dog", barks=True)]),
        id="discriminated-union",
    ),
    pytest.param(Scalars(a=1, b=2.5, c="x"), id="scalar-union"),
    pytest.param(Scalars(a="one", b=True), id="scalar-union-other-branches"),
    pytest.param(
        Enums(
            color=Color.RED,
            level=Level.HIGH,
            mood=Mood.SAD,
            colors=[Color.GREEN, Color.RED],
            levels=[Level.LOW],
            moods=[Mood.HAPPY],
        ),
        id="enums",
    ),
    pytest.param(
        Formats(
            at=dt.datetime(2025, 1, 2, 3, 4, 5),
            at_utc=dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            day=dt.date(2025, 1, 31),
            clock=dt.time(9, 30),
            span=dt.timedelta(hours=2, seconds=3),
            id=uuid.UUID(int=5),
            amount=Decimal("1.50"),
            site=AnyUrl("https://example.com/x"),
        ),
        id="formats",
    ),
    pytest.param(Constrained(n=2, few=[1, 2, 3], some=["a"]), id="constrained"),
    pytest.param(
        Containers(
            counts={"a": 1, "b": 2},
            pair=(1, "a"),
            names={"x", "y"},
            frozen=frozenset({1, 2}),
            row=(1, 2, 3),
        ),
        id="containers",
    ),
    pytest.param(Tree(root=_tree(3)), id="recursive-tree"),
    pytest.param(_tree(4), id="recursive-root"),
    pytest.param(Items([Item(name="a", qty=1), Item(name="b", qty=2)]), id="root-model"),
    pytest.param(Page[Item](items=[Item(name="a", qty=1)], total=1), id="generic"),
    pytest.param(Computed(w=2, h=3), id="computed-field"),
    pytest.param(Factories(), id="default-factory-defaults"),
    pytest.param(
        Factories(tags=["a"], meta={"k": 1}, home=Address(city="Oslo", zip=2)),
        id="default-factory-values",
    ),
    pytest.param(Excluded(a=1, secret="s", nested=[ExcludedItem(note="n")]), id="excluded-fields"),
    pytest.param(Extras(a="v"), id="json-schema-extra"),
    pytest.param(SerializationSchema(x=4), id="json-schema-mode-override"),
    pytest.param(Secrets(token=SecretStr("tok-1")), id="secret"),
    pytest.param(
        Contact(
            email="ada@example.com",
            cc=["bob@example.org", "chloé@exämple.fr"],
            named=NameEmail("Ada Lovelace", "ada@example.com"),
        ),
        id="email",
    ),
    pytest.param(
        Strict(
            n=1,
            f=1.5,
            day=dt.date(2025, 1, 31),
            at=dt.datetime(2025, 1, 2, 3, 4, 5),
            id=uuid.UUID(int=7),
            amount=Decimal("2.5"),
            color=Color.RED,
            pair=(1, "a"),
            names={"q"},
            home=Address(city="c", zip=3),
            tags=["a"],
        ),
        id="strict",
    ),
]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted


@pytest.mark.parametrize("instance", CASES)
def test_a_model_instance_comes_back_from_one_request(
    server: ScriptedServer, instance: BaseModel
) -> None:
    model = type(instance)
    text = render_frames(compile_schema(model), instance)
    sent = len(server.requests)
    server.add(Reply(text))
    result = slotflight.complete(sync_client(server), model="m", messages=MESSAGES, output=model)
    assert len(server.requests) == sent + 1
    assert server.remaining == 0
    assert type(result) is model
    assert result == instance


def _chain(depth: int) -> Node:
    node = Node(name="leaf")
    for i in range(depth):
        node = Node(name=f"n{i}", children=[node])
    return node


def test_a_recursive_model_comes_back_up_to_the_json_depth_bound(server: ScriptedServer) -> None:
    """The recursion point is one ``json`` slot: two levels of JSON per tree level, at
    most ``Limits.max_json_depth`` (64) levels in all."""
    deepest = _chain(31)
    server.add(Reply(render_frames(compile_schema(Node), deepest)))
    result = slotflight.complete(sync_client(server), model="m", messages=MESSAGES, output=Node)
    assert result == deepest

    server.add(Reply(render_frames(compile_schema(Node), _chain(32))))
    with slotflight.stream(
        sync_client(server), model="m", messages=MESSAGES, output=Node, max_attempts=1
    ) as s:
        failed = [e.to_json()["error"]["code"] for e in s if e.type == "slot-failed"]
    assert failed == ["json_too_deep"]


def test_an_address_email_validator_refuses_is_asked_for_again_alone(
    server: ScriptedServer,
) -> None:
    """The slot checks the schema's ``format: email``; what only ``email-validator``
    refuses (a ``NameEmail`` without an address) fails the model's check at the end,
    and that field alone is asked for again."""
    server.add(
        Reply("email: ada at example dot com\ncc:\n- bob@example.org\nnamed: Ada <nope>\nend\n")
    )
    server.add(Reply("email: ada@example.com\nend\n"))
    server.add(Reply("named: Ada Lovelace <ada@example.com>\nend\n"))
    sent = len(server.requests)
    with slotflight.stream(sync_client(server), model="m", messages=MESSAGES, output=Contact) as s:
        asked = [e.slots for e in s if e.type == "retry"]
        result = s.final()
    assert asked == [("email",), ("named",)]
    assert len(server.requests) == sent + 3
    assert result == Contact(
        email="ada@example.com",
        cc=["bob@example.org"],
        named=NameEmail("Ada Lovelace", "ada@example.com"),
    )
