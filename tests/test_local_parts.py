"""Parts of the local server that need no model: grammar bounds, the prefix cache, frames."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("llama_cpp")

from slotflight import SlotflightError
from slotflight.local._grammar import GrammarLimits, precheck_grammar, schema_to_grammar
from slotflight.local._prefix import PrefixCache, shared_prefix, with_written_tokens
from slotflight.local._wire import WireError, read_frame, write_frame

SMALL = GrammarLimits(
    max_bytes=200, max_rules=3, max_nesting=3, max_repetition=50, max_expansion=100
)


def _refusal(grammar: str, limits: GrammarLimits = SMALL) -> str:
    with pytest.raises(SlotflightError) as caught:
        precheck_grammar(grammar, param="/grammar", limits=limits)
    assert caught.value.code == "invalid_grammar"
    assert caught.value.location == "/grammar"
    return caught.value.message


# -- grammar bounds ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("grammar", "reason"),
    [
        ('root ::= "' + "a" * 200 + '"', "is 211 bytes; at most 200"),
        ('root ::= a\na ::= b\nb ::= c\nc ::= "x"', "more than 3 rules"),
        ('root ::= (((("a"))))', "nests groups more than 3 levels deep"),
        ('root ::= "a"{51}', "repetition count above 50"),
        ('root ::= "a"{3,1}', "with its upper bound below its lower bound"),
        ('root ::= "abcde"{0,30}', "unrolls to more than 100 symbols"),
        ("root ::= x\nx ::= [a]{0,40} [b]{0,40} [c]{0,40}", "unrolls to more than 100 symbols"),
        # inside a group llama.cpp skips line breaks and comments within the braces
        ('root ::= ("a"{0,\n51})', "repetition count above 50"),
        ('root ::= ("a"{ # low\n 0 , # high\n 51 })', "repetition count above 50"),
        ('root ::= ("a"{0,\n40} "b"{0,\n40} "c"{0,\n40})', "unrolls to more than 100 symbols"),
        ('root ::= "a"{x}', "a repetition {m,n} that cannot be read"),
    ],
)
def test_each_bound_refuses_what_crosses_it(grammar: str, reason: str) -> None:
    assert reason in _refusal(grammar)


@pytest.mark.parametrize(
    "grammar",
    [
        'root ::= "{3,1}" [((((] "a"{1,3}  # {9,2} ((((((\n',
        'root ::= ((("a")))',
        'root ::= ("abcde"){0,30}',  # a repeated group is one rule reference
        "root ::= x\nx ::= [a]{0,30} [b]{0,30} [c]{0,30}",
    ],
)
def test_literals_classes_comments_and_group_references_are_measured_as_llama_cpp_builds_them(
    grammar: str,
) -> None:
    precheck_grammar(grammar, param="/grammar", limits=SMALL)


def test_a_schema_is_bounded_before_the_converter_unrolls_it() -> None:
    for schema in (
        {"type": "string", "maxLength": 10**12},
        {"type": "string", "pattern": "^a{0,99999}$"},
        {"type": "array", "items": {"type": "string", "maxLength": 90}, "maxItems": 20},
    ):
        with pytest.raises(SlotflightError) as caught:
            schema_to_grammar(schema, param="/s", limits=SMALL)
        assert caught.value.code == "invalid_schema"
        assert caught.value.location == "/s"
        assert "add up to more than 100" in caught.value.message


@pytest.mark.parametrize("pattern", ["^a{,99999}$", "^a{ 99999 }$", "^a{99_999}$"])
def test_every_count_the_converter_reads_in_a_pattern_is_bounded(pattern: str) -> None:
    with pytest.raises(SlotflightError) as caught:
        schema_to_grammar({"type": "string", "pattern": pattern}, param="/s", limits=SMALL)
    assert "add up to more than 100" in caught.value.message


def test_text_with_a_lone_surrogate_is_refused_with_its_place() -> None:
    import json

    from slotflight.local._request import parse_chat_request

    user = {"role": "user", "content": "hi"}
    for body, where in (
        ({"messages": [user], "stop": ["\ud800"]}, "/stop/0"),
        ({"messages": [{"role": "user", "content": "a\udc00"}]}, "/messages/0/content"),
        ({"messages": [user], "grammar": 'root ::= "\ud800"'}, "/grammar"),
    ):
        with pytest.raises(SlotflightError) as caught:
            parse_chat_request(json.dumps(body).encode())  # the surrogate as a JSON escape
        assert (caught.value.code, caught.value.location) == ("invalid_value", where)
    assert parse_chat_request(json.dumps({"messages": [user], "n": None}).encode()).messages


def test_a_pattern_python_cannot_compile_is_a_schema_error() -> None:
    with pytest.raises(SlotflightError) as caught:
        schema_to_grammar({"type": "string", "pattern": "^a{0,99999999999}$"}, param="/s")
    assert caught.value.code == "invalid_schema"
    assert "OverflowError" in caught.value.message


def test_a_grammar_made_from_a_schema_is_prechecked_as_a_schema_error() -> None:
    limits = GrammarLimits(max_nesting=50)
    with pytest.raises(SlotflightError) as caught:
        schema_to_grammar({"type": "string", "maxLength": 60}, param="/s", limits=limits)
    assert caught.value.code == "invalid_schema"
    assert "the grammar made from the JSON schema nests groups" in caught.value.message
    assert schema_to_grammar({"type": "string", "maxLength": 40}, param="/s", limits=limits)


# -- the prefix cache -------------------------------------------------------------------


def _tokens(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.intc)


def test_the_entry_sharing_the_longest_prefix_is_found_and_taken() -> None:
    cache = PrefixCache(1000)
    cache.put([1, 2, 3, 4], b"s" * 10)
    cache.put([1, 2, 9], b"t" * 10)
    cache.put([7, 8], b"u" * 10)
    found = cache.best(_tokens(1, 2, 3, 5))
    assert found is not None and found[1] == 3
    tokens, state = cache.take(found[0])
    assert tokens.tolist() == [1, 2, 3, 4] and state == b"s" * 10
    assert len(cache) == 2 and cache.size_bytes == 20
    assert cache.best(_tokens(5, 6)) is None


def test_an_entry_that_extends_others_replaces_them() -> None:
    cache = PrefixCache(1000)
    cache.put([1, 2], b"a")
    cache.put([1, 2, 3], b"b")
    cache.put([1, 5], b"c")
    assert len(cache) == 2
    assert cache.size_bytes == 2


def test_the_least_recently_used_entries_go_first_and_oversized_states_are_not_kept() -> None:
    cache = PrefixCache(25)
    cache.put([1], b"x" * 10)
    cache.put([2], b"y" * 10)
    cache.put([3], b"z" * 10)  # over 25 bytes: [1] goes
    assert cache.best(_tokens(1)) is None
    assert cache.best(_tokens(2)) is not None
    cache.put([4], b"w" * 26)
    assert cache.best(_tokens(4)) is None
    assert cache.size_bytes == 20


token_lists = st.lists(st.integers(0, 3), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    puts=st.lists(st.tuples(token_lists, st.integers(0, 40)), max_size=12),
    query=token_lists,
    capacity=st.integers(0, 100),
)
def test_memory_stays_bounded_and_lookups_find_the_longest_shared_prefix(
    puts: list[tuple[list[int], int]], query: list[int], capacity: int
) -> None:
    cache = PrefixCache(capacity)
    for tokens, size in puts:
        cache.put(tokens, b"s" * size)
        assert cache.size_bytes <= capacity
    kept = [saved for saved, _state in cache._entries.values()]
    assert cache.size_bytes == sum(len(state) for _tokens, state in cache._entries.values())
    best = max((shared_prefix(saved, _tokens(*query)) for saved in kept), default=0)
    found = cache.best(_tokens(*query))
    assert (found[1] if found else 0) == best


# -- the tokens a model wrote, reused when a prompt repeats their text -------------------

#: A toy vocabulary: every byte the tests write alone, some merges, and a special token.
VOCAB: list[bytes] = sorted(
    {bytes([b]) for b in "tile: aéè\n<>".encode()}
    | {b"ti", b"it", b"le", b"title", b"title:", b": ", b" a", b"\xc3\xa9", b"<e>"}
)
PIECES = {piece: token for token, piece in enumerate(VOCAB)}


def _piece(token: int) -> bytes:
    return VOCAB[token]


def _tokenize(data: bytes) -> list[int]:
    """Greedy longest match: the 'canonical' cut of the toy tokenizer."""
    tokens, at = [], 0
    while at < len(data):
        size = max(n for n in range(1, 7) if data[at : at + n] in PIECES)
        tokens.append(PIECES[data[at : at + size]])
        at += size
    return tokens


def _text(tokens: np.ndarray | list[int]) -> bytes:
    return b"".join(_piece(int(t)) for t in tokens)


answers = st.text(alphabet="tile: aéè\n", max_size=24)


@st.composite
def _written(draw: st.DrawFn, text: str) -> list[int]:
    """``text`` cut into tokens any way the vocabulary allows (as a model may write it)."""
    data, tokens, at = text.encode(), [], 0
    while at < len(data):
        sizes = [n for n in range(1, 7) if data[at : at + n] in PIECES]
        size = draw(st.sampled_from(sizes))
        tokens.append(PIECES[data[at : at + size]])
        at += size
    return tokens


@settings(max_examples=300, deadline=None)
@given(data=st.data(), head=answers, answer=answers, tail=answers)
def test_a_repeated_answer_keeps_the_tokens_it_was_written_in(
    data: st.DataObject, head: str, answer: str, tail: str
) -> None:
    """A chat's next prompt repeats the answer just written: the live tokens are kept
    for all of it (the answer ends where a special token begins), the text is the same."""
    prefix = _tokenize(head.encode() + b"<e>")
    live = _tokens(*prefix, *data.draw(_written(answer)))
    prompt = _tokens(*_tokenize(head.encode() + b"<e>" + answer.encode() + b"<e>" + tail.encode()))
    result = with_written_tokens(live, prompt, _piece, _tokenize, len(prefix))
    assert _text(result) == _text(prompt)
    assert shared_prefix(live, result) == len(live)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), head=answers, live_text=answers, prompt_text=answers)
def test_the_text_read_is_always_the_prompts(
    data: st.DataObject, head: str, live_text: str, prompt_text: str
) -> None:
    prefix = _tokenize(head.encode())
    live = _tokens(*prefix, *data.draw(_written(live_text)))
    prompt = _tokens(*_tokenize(head.encode() + prompt_text.encode()))
    result = with_written_tokens(live, prompt, _piece, _tokenize, len(prefix))
    assert _text(result) == _text(prompt)
    kept = shared_prefix(live, result)
    assert kept >= shared_prefix(live, prompt)
    if kept > shared_prefix(live, prompt):  # only written tokens were taken, after the prompt
        assert shared_prefix(live, prompt) >= len(prefix)
        assert result.tolist()[: len(prefix)] == prefix
        # Whole characters only: what follows the written tokens taken starts a
        # character (the prompt's own cut may share a character's first byte token
        # with the live tokens: that is the tokenizer's, left as it is).
        rest = _text(result)[len(_text(result[:kept])) :]
        assert not rest or (rest[0] & 0xC0) != 0x80


def test_a_prompt_sharing_a_characters_first_byte_token_is_left_as_it_is() -> None:
    """The model wrote ``é`` in two byte tokens; the next prompt is ``è``, whose first
    byte token is the same: no written token is taken, and the prompt keeps its own cut
    even though the part shared with the live tokens ends inside a character."""
    live = _tokens(PIECES["é".encode()[:1]], PIECES["é".encode()[1:]])
    prompt = _tokens(*_tokenize("è".encode()))
    assert shared_prefix(live, prompt) == 1
    result = with_written_tokens(live, prompt, _piece, _tokenize, 0)
    assert result.tolist() == prompt.tolist()


def test_a_prompt_that_differs_before_the_answer_or_holds_it_is_left_alone() -> None:
    written_from = len(_tokenize(b"<e>"))
    live = _tokens(*_tokenize(b"<e>"), PIECES[b"t"], PIECES[b"it"], PIECES[b"le"])
    other = _tokens(*_tokenize(b"<e>aaa"))
    assert with_written_tokens(live, other, _piece, _tokenize, written_from) is other
    longer = _tokens(*live.tolist(), PIECES[b"<e>"])
    assert with_written_tokens(live, longer, _piece, _tokenize, written_from) is longer
    assert with_written_tokens(_tokens(), longer, _piece, _tokenize, 0) is longer
    # The same text after a prompt that is not the earlier one: the tokenizer's cut stays.
    repeat = _tokens(*_tokenize(b"<e>title<e>"))
    assert with_written_tokens(live, repeat, _piece, _tokenize, written_from).tolist() == [
        *live.tolist(),
        PIECES[b"<e>"],
    ]
    assert with_written_tokens(live, repeat, _piece, _tokenize, written_from + 1) is repeat


def test_a_character_cut_between_two_tokens_is_read_again_whole() -> None:
    """The model wrote é as two byte tokens and the prompt goes on differently after
    the first byte's character: the live tokens are kept only up to the character."""
    e1, e2 = PIECES[b"\xc3"], PIECES[b"\xa9"]
    live = _tokens(PIECES[b"<e>"], PIECES[b"a"], e1, e2)
    prompt = _tokens(*_tokenize(b"<e>a\xc3\xa9<e>"))
    result = with_written_tokens(live, prompt, _piece, _tokenize, 1)
    assert result.tolist()[:4] == live.tolist() and _text(result) == _text(prompt)
    # The model wrote è (its first byte as é's) where the prompt has é: "<e>a" is kept,
    # and é is read again whole instead of from its second byte.
    live = _tokens(PIECES[b"<e>"], PIECES[b"a"], e1, PIECES[b"\xa8"])
    prompt = _tokens(*_tokenize(b"<e>a\xc3\xa9"))
    result = with_written_tokens(live, prompt, _piece, _tokenize, 1)
    assert result.tolist() == [PIECES[b"<e>"], PIECES[b"a"], PIECES[b"\xc3\xa9"]]


# -- frames between the server and its processes ---------------------------------------


def test_frames_round_trip_and_oversized_or_cut_frames_are_refused() -> None:
    buffer = io.BytesIO()
    write_frame(buffer, {"event": "piece", "text": "é\n"})
    write_frame(buffer, {"event": "done"})
    buffer.seek(0)
    assert read_frame(buffer) == {"event": "piece", "text": "é\n"}
    assert read_frame(buffer) == {"event": "done"}
    assert read_frame(buffer) is None
    with pytest.raises(WireError):
        read_frame(io.BytesIO((100).to_bytes(4, "big") + b"{}"), limit=50)
    with pytest.raises(WireError):
        read_frame(io.BytesIO((10).to_bytes(4, "big") + b"{}"))
    with pytest.raises(WireError):
        read_frame(io.BytesIO((2).to_bytes(4, "big") + b"[]"))
