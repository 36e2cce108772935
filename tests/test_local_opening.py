"""The opening of a grammar (``slotflight/local/_opening.py``): the text every answer it
admits begins with, read with the prompt instead of sampled. No model needed."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("llama_cpp")

from slotflight.bench.models import SCHEMAS, load_tasks
from slotflight.local._grammar import JSON_OBJECT_GRAMMAR, schema_to_grammar
from slotflight.local._opening import (
    MAX_OPENING_CHARS,
    grammar_opening,
    opening_kept,
    opening_tokens,
)
from slotflight.plan.compiler import compile as compile_plan
from slotflight.syntax import SYNTAXES, grammar, render_frames

# -- what the grammars the SDK writes open with -------------------------------------------

FIRST_FIELD = {
    "triage": "summary",
    "product": "name",
    "outline": "title",
    "meeting": "title",
    "ticket": "customer_name",
}


@pytest.mark.parametrize("syntax", ["v3", "v3-quoted", "v4", "v4-quoted"])
@pytest.mark.parametrize("schema", sorted(FIRST_FIELD))
def test_a_named_line_grammar_opens_with_its_first_field_name(schema: str, syntax: str) -> None:
    plan = compile_plan(SCHEMAS[schema])
    for chars in (None, 120):
        text = grammar(plan, syntax, max_string_chars=chars)
        # the name, its colon and the space before the value (and v3-quoted's quote:
        # its text values are JSON strings); the value is the model's
        quote = '"' if syntax == "v3-quoted" else ""
        assert grammar_opening(text) == f"{FIRST_FIELD[schema]}: {quote}"


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_every_syntax_opening_starts_the_gold_answers_frames(syntax: str) -> None:
    for task in load_tasks():
        assert task.gold is not None
        plan = compile_plan(SCHEMAS[task.schema])
        frames = render_frames(plan, task.gold, syntax)
        assert frames.startswith(grammar_opening(grammar(plan, syntax)))


def test_json_grammars_fix_only_their_brace() -> None:
    schema = SCHEMAS["triage"].model_json_schema()
    assert grammar_opening(schema_to_grammar(schema, param="/response_format")) == "{"
    assert grammar_opening(JSON_OBJECT_GRAMMAR) == "{"


# -- reading GBNF ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "opening"),
    [
        ('root ::= "a" "b" c\nc ::= "d"', "abd"),
        ('root ::= "a" ("b" "c") "d"', "abcd"),
        ('root ::= "a" ("b" | "c")', "a"),
        ('root ::= "a" | "ab"', ""),
        ('root ::= "a" c "x"\nc ::= "b" | "c"', "a"),
        ('root ::= "a" "b"? "c"', "a"),
        ('root ::= "a" "b"* "c"', "a"),
        ('root ::= "a" "b"+', "a"),
        ('root ::= "a" "b"{2} "c"', "a"),
        ('root ::= "a" ("b" "c")* "d"', "a"),
        ('root ::= "a" [b] "c"', "a"),
        ('root ::= "a" . "c"', "a"),
        ('root ::= "a" <[1000]> "c"', "a"),
        ('root ::= "a" missing "c"', "a"),
        ('root ::= "\\x41\\u00e9\\U0001F600\\n\\t\\"\\\\\\[\\]"', 'Aé😀\n\t"\\[]'),
        ('# a comment "x"\nroot ::= "a" c # "b"\nc ::= "d"', "ad"),
        ('root ::= (\n  "a"\n  "b"\n)\n', "ab"),
        ('root   ::=   "a"   c\nc::="b"', "ab"),
        # llama.cpp reads a name defined twice its own way: not followed
        ('root ::= c\nc ::= "x"\nc ::= "y"', ""),
        ('root ::= "x"\nroot ::= "y"', ""),
        # unreadable text opens with nothing
        ('root ::= "unterminated', ""),
        ('root ::= "a" [unclosed', ""),
        ('root ::= ("a"', ""),
        ('root ::= "a")', ""),
        ('root ::= "\\q"', ""),
        ('root ::= "\\uD800"', ""),
        ('root ::= "\\U00110000"', ""),
        ('rot ::= "a"', ""),
        ("", ""),
    ],
)
def test_grammar_opening(text: str, opening: str) -> None:
    assert grammar_opening(text) == opening


def test_a_recursive_or_long_opening_is_cut() -> None:
    assert grammar_opening('root ::= a\na ::= "x" a') == "x" * 32  # 32 rules deep
    assert grammar_opening('root ::= "' + "y" * 1000 + '"') == "y" * MAX_OPENING_CHARS
    nested = "root ::= " + "(" * 40 + '"z"' + ")" * 40
    assert grammar_opening(nested) == ""  # groups deeper than 32 are not followed


def test_the_walk_is_bounded_on_rules_referred_to_again_and_again() -> None:
    empty = " ".join(['""'] * 2_000)
    text = "root ::= " + " ".join(["e"] * 2_000) + ' "tail"\ne ::= ' + empty
    # 4,000,000 items to step over: the walk stops at 100,000 with nothing written
    assert grammar_opening(text) == ""


# -- every string a grammar admits starts with its opening -----------------------------------


@dataclass(frozen=True)
class _Node:
    kind: str  # "lit", "ref", "seq", "alt", "rep", "class"
    text: str = ""
    parts: tuple[_Node, ...] = ()
    rule: int = 0


def _nodes(rules: int) -> st.SearchStrategy[_Node]:
    leaves = st.one_of(
        st.text(alphabet="ab:\n é", max_size=3).map(lambda s: _Node("lit", text=s)),
        st.just(_Node("class")),
        st.integers(0, max(rules - 1, 0)).map(lambda r: _Node("ref", rule=r))
        if rules
        else st.nothing(),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=4).map(lambda p: _Node("seq", parts=tuple(p))),
            st.lists(inner, min_size=2, max_size=3).map(lambda p: _Node("alt", parts=tuple(p))),
            st.tuples(inner, st.sampled_from("*+?")).map(
                lambda p: _Node("rep", text=p[1], parts=(p[0],))
            ),
        ),
        max_leaves=8,
    )


@st.composite
def _grammars(draw: st.DrawFn) -> list[_Node]:
    """Rules r0 (no references), r1 (may refer to r0), ...; the last is ``root``."""
    count = draw(st.integers(1, 4))
    return [draw(_nodes(i)) for i in range(count)]


def _gbnf(node: _Node) -> str:
    if node.kind == "lit":
        escaped = node.text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if node.kind == "class":
        return "[xy]"
    if node.kind == "ref":
        return f"r{node.rule}"
    if node.kind == "seq":
        return "(" + " ".join(_gbnf(p) for p in node.parts) + ")"
    if node.kind == "alt":
        return "(" + " | ".join(_gbnf(p) for p in node.parts) + ")"
    return _gbnf(node.parts[0]) + node.text


def _sample(node: _Node, rules: list[_Node], rng: random.Random) -> str:
    if node.kind == "lit":
        return node.text
    if node.kind == "class":
        return rng.choice("xy")
    if node.kind == "ref":
        return _sample(rules[node.rule], rules, rng)
    if node.kind == "seq":
        return "".join(_sample(p, rules, rng) for p in node.parts)
    if node.kind == "alt":
        return _sample(rng.choice(node.parts), rules, rng)
    low = 1 if node.text == "+" else 0
    high = 1 if node.text == "?" else 3
    return "".join(_sample(node.parts[0], rules, rng) for _ in range(rng.randint(low, high)))


@settings(max_examples=300, deadline=None)
@given(_grammars(), st.integers(0, 2**32))
def test_every_string_a_grammar_admits_starts_with_its_opening(
    rules: list[_Node], seed: int
) -> None:
    lines = [f"r{i} ::= {_gbnf(node)}" for i, node in enumerate(rules[:-1])]
    lines.append(f"root ::= {_gbnf(rules[-1])}")
    opening = grammar_opening("\n".join(lines))
    rng = random.Random(seed)
    for _ in range(20):
        assert _sample(rules[-1], rules, rng).startswith(opening)


# -- the tokens read, and when -----------------------------------------------------------------


def _pieces(*pieces: bytes):  # type: ignore[no-untyped-def]
    """A tokenizer of fixed pieces (greedy longest match) and its detokenizer."""
    vocab = list(pieces)

    def tokenize(data: bytes) -> list[int]:
        out, i = [], 0
        while i < len(data):
            best = max(
                (t for t, p in enumerate(vocab) if data.startswith(p, i)),
                key=lambda t: len(vocab[t]),
            )
            out.append(best)
            i += len(vocab[best])
        return out

    def detokenize(tokens: list[int]) -> bytes:
        return b"".join(vocab[t] for t in tokens)

    return tokenize, detokenize


def test_the_last_token_of_an_opening_is_left_to_the_model() -> None:
    tokenize, detokenize = _pieces(b"summary", b":", b" ", b"s", b"u", b"m", b"a", b"r", b"y")
    # "summary" ":" " " -> the space may join the value's first word: not read
    assert opening_tokens("summary: ", tokenize, detokenize) == [0, 1]
    assert opening_tokens("summary", tokenize, detokenize) == []
    assert opening_tokens("", tokenize, detokenize) == []


def test_tokens_that_do_not_write_the_opening_are_not_read() -> None:
    def tokenize(data: bytes) -> list[int]:
        return [7, 8, 9]

    def detokenize(tokens: list[int]) -> bytes:
        return b"other"

    assert opening_tokens("summary: ", tokenize, detokenize) == []


@pytest.mark.parametrize(
    ("stops", "kept"),
    [
        ([], True),
        (["<|im_end|>"], True),
        (["\n\n"], True),
        ([""], True),
        (["mar"], False),  # inside the opening
        (["y: x"], False),  # begins at its end: would be found only across the two
        (["summary: "], False),
        ([": and"], False),
        (["ummary: ", "<|im_end|>"], False),
    ],
)
def test_an_opening_a_stop_sequence_could_meet_is_sampled(stops: list[str], kept: bool) -> None:
    assert opening_kept("summary:", stops) is kept
