"""The models whose prompts are pinned by the golden files in ``tests/golden/``."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field, HttpUrl


class Sentiment(StrEnum):
    POSITIVE = "positive"
    NEUTRAL = "neutral"
    NEGATIVE = "negative"


class ActionItem(BaseModel):
    owner: str = Field(description="Who does it: a team or a person.")
    task: str = Field(description="What has to be done, one sentence.")
    due: dt.date | None = Field(default=None, description="Due date, if one was mentioned.")


class TicketTriage(BaseModel):
    """Triage of one customer support ticket."""

    summary: Annotated[
        str, Field(max_length=400, description="One-paragraph summary of the issue.")
    ]
    priority: Annotated[int, Field(ge=1, le=5, description="1 = lowest, 5 = drop everything.")]
    sentiment: Sentiment
    urgent: bool
    tags: Annotated[list[str], Field(max_length=6)] = []
    action_items: Annotated[list[ActionItem], Field(max_length=4)]


class Dimensions(BaseModel):
    width_cm: Annotated[float, Field(gt=0)]
    height_cm: Annotated[float, Field(gt=0)]
    weight_kg: float | None = None


class Product(BaseModel):
    """A product listing extracted from a supplier's page."""

    name: str
    sku: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d{4}$", examples=["ABC-1234"])]
    price: Annotated[float, Field(ge=0, description="Price in euros.")]
    stock: Annotated[int, Field(ge=0)] = 0
    currency: Literal["EUR", "USD"] = "EUR"
    dimensions: Dimensions | None = None
    homepage: HttpUrl | None = None
    released: dt.date | None = None


class Section(BaseModel):
    heading: str
    summary: str = Field(description="Two or three sentences.")
    words: Annotated[int, Field(ge=50, le=2000, description="Planned length of the section.")]


class ArticleOutline(BaseModel):
    """Outline of an article."""

    title: str
    audience: Literal["beginners", "practitioners", "experts"]
    sections: Annotated[list[Section], Field(min_length=2, max_length=8)]
    keywords: Annotated[list[str], Field(min_length=1, max_length=5)]


class Attendee(BaseModel):
    name: str = Field(examples=["Ada Lovelace"])
    role: Literal["host", "guest"] = Field(examples=["host"])


# Every field carries an example or a default: the prompt shows an example answer.
class MeetingNotes(BaseModel):
    """Notes of one meeting."""

    title: str = Field(examples=["Weekly sync"], description="A short title.")
    day: dt.date = Field(examples=["2025-03-04"])
    minutes: Annotated[int, Field(ge=1, le=600, examples=[45])]
    remote: bool = False
    topics: Annotated[list[Annotated[str, Field(examples=["budget"])]], Field(min_length=2)]
    attendees: Annotated[list[Attendee], Field(max_length=10)]
    follow_up: str | None = None


GOLDEN_MODELS: dict[str, type[BaseModel]] = {
    "triage": TicketTriage,
    "product": Product,
    "outline": ArticleOutline,
    "meeting": MeetingNotes,
}
