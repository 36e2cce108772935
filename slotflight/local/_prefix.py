"""Prompt prefixes kept across requests: saved KV states, least recently used first out.

llama.cpp's context holds one token sequence (the *live* one); llama-cpp-python already
reuses the longest prefix it shares with the next prompt. :class:`PrefixCache` keeps
more: when a request would throw away most of the live sequence (another system prompt
came in), the sequence's KV state is saved here first, and a later prompt that shares a
longer prefix with a saved state than with the live sequence loads it back.

Keys are token sequences, values the state bytes of llama.cpp's sequence 0
(``llama_state_seq_get_data``: the KV cells only, about 23 KB per token for
SmolLM2-135M). llama-cpp-python's ``LlamaRAMCache`` is not used: its states also copy
the context's logits array (``n_batch × n_vocab`` floats, 100 MB for this model) and
its capacity does not count them.

Costs: a lookup compares the prompt with every key, O(entries × prompt length) on NumPy
arrays; entries are few because each holds a long prefix and memory is bounded by
``capacity_bytes``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["PrefixCache", "Span", "shared_prefix", "special_spans", "with_written_tokens"]

Tokens = npt.NDArray[np.intc]


def shared_prefix(a: Tokens, b: Tokens) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    size = min(len(a), len(b))
    differ = np.flatnonzero(a[:size] != b[:size])
    return int(differ[0]) if len(differ) else size


def with_written_tokens(
    live: Tokens,
    prompt: Tokens,
    piece: Callable[[int], bytes],
    tokenize: Callable[[bytes], Sequence[int]],
    written_from: int,
    special: Mapping[int, bytes] | None = None,
    tokenize_text: Callable[[bytes], Sequence[int]] | None = None,
) -> Tokens:
    """``prompt`` with the text the model wrote last in the tokens it wrote it in.

    ``live[written_from:]`` are the tokens the model wrote after its prompt. A model
    under a grammar often writes text in other tokens than the tokenizer would cut it
    into (``t`` ``it`` ``le`` where the tokenizer reads ``title``), so a next prompt
    that repeats the prompt and then the answer (a chat's next turn) shares no tokens
    with the answer, and its KV would be computed again. When the prompt shares the
    whole earlier prompt and its text goes on with the answer's bytes, the written
    tokens are used instead, up to the last whole token (and whole character) the two
    agree on; the rest of the prompt is tokenized again from there. The text the model
    reads is the same; only how the answer is cut differs. A prompt that differs
    earlier is returned as it is: the tokenizer's own cut of other text is never
    changed.

    Special tokens (``special``: control tokens such as ``<|im_end|>``, with their
    text) stay what the prompt made them: a written special token stands only for the same special token
    of the prompt, written text only for the prompt's text, and the rest keeps the
    prompt's special tokens and reads the text between them as text (a message's
    ``<|im_end|>`` stays text).

    ``piece`` gives a token's bytes (special tokens as their text), ``tokenize`` the
    tokens of bytes (special tokens recognised, no BOS), ``tokenize_text`` the same
    with special tokens not recognised (``tokenize`` when not given). O(live + prompt)
    after the shared prefix.
    """
    special = special or {}
    kept = shared_prefix(live, prompt)
    if kept < written_from or kept == len(live) or kept == len(prompt):
        return prompt
    pieces = [piece(int(t)) for t in prompt[kept:]]
    wanted = b"".join(pieces)
    # Where the prompt's special tokens lie in ``wanted``.
    marked = bytearray(len(wanted))
    starts: dict[int, tuple[int, int]] = {}
    position = 0
    for token, data in zip(prompt[kept:], pieces, strict=True):
        if int(token) in special:
            starts[position] = (position + len(data), int(token))
            marked[position : position + len(data)] = b"\x01" * len(data)
        position += len(data)
    size = 0  # bytes of the live tokens taken
    taken = 0
    for token in live[kept:]:
        data = piece(int(token))
        end = size + len(data)
        if not data or wanted[size:end] != data:
            break
        if int(token) in special:
            if starts.get(size) != (end, int(token)):
                break
        elif any(marked[size:end]):
            break
        size = end
        taken += 1
    # Back off to a whole character: the rest is tokenized on its own.
    while taken and size < len(wanted) and (wanted[size] & 0xC0) == 0x80:
        taken -= 1
        size -= len(piece(int(live[kept + taken])))
    if not taken:
        return prompt
    kept_special = [(a - size, b - size, t) for a, (b, t) in sorted(starts.items()) if a >= size]
    rest = _rest_tokens(
        wanted[size:], kept_special, piece, (tokenize, tokenize_text or tokenize), special
    )
    return np.concatenate([prompt[:kept], live[kept : kept + taken], rest]).astype(np.intc)


Span = tuple[int, int, int]
"""``(start, end, token)``: a token's bytes in a text."""


def special_spans(
    tokens: Iterable[int], size: Callable[[int], int], special: Container[int]
) -> tuple[list[Span], int]:
    """Where the ``special`` tokens of ``tokens`` lie in their text (``size``: a token's
    bytes), and that text's length. O(tokens)."""
    found: list[Span] = []
    position = 0
    for item in tokens:
        token = int(item)
        length = size(token)
        if token in special:
            found.append((position, position + length, token))
        position += length
    return found, position


def _rest_tokens(
    data: bytes,
    kept: list[tuple[int, int, int]],
    piece: Callable[[int], bytes],
    tokenize: tuple[Callable[[bytes], Sequence[int]], Callable[[bytes], Sequence[int]]],
    special: Mapping[int, bytes],
) -> Tokens:
    """The tokens of ``data``, whose special tokens are ``kept`` (``(start, end,
    token)`` in ``data``, in order): ``data`` tokenized with special tokens recognised
    when that finds exactly those, else those tokens with the text between them read
    as text. ``data`` is tokenized whole only when it holds no more special tokens'
    text than ``kept``: llama.cpp's search for special tokens takes quadratic time in
    how many it finds."""
    recognised, text = tokenize
    if sum(data.count(t) for t in set(special.values()) if t) <= len(kept):
        whole = np.array(recognised(data) if data else [], dtype=np.intc)
        found, _ = special_spans(whole, lambda token: len(piece(token)), special)
        if found == kept:
            return whole
    tokens: list[int] = []
    position = 0
    for start, end, token in kept:
        tokens.extend(text(data[position:start]) if start > position else ())
        tokens.append(token)
        position = end
    tokens.extend(text(data[position:]) if position < len(data) else ())
    return np.array(tokens, dtype=np.intc)


class PrefixCache:
    """Saved KV states keyed by their token sequence, LRU, at most ``capacity_bytes``.

    :meth:`put` drops the entries the new one makes useless (those whose tokens are a
    prefix of its tokens) and then the least recently used ones until the states fit;
    a state larger than the whole capacity is not kept. :meth:`take` removes the entry
    it returns: the caller loads it into the context, where it lives on as the live
    sequence (and is saved again when a request displaces it).
    """

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[bytes, tuple[Tokens, bytes]] = OrderedDict()
        self._size = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """Bytes of state held now."""
        return self._size

    def best(self, tokens: Tokens) -> tuple[bytes, int] | None:
        """The key of the entry sharing the longest prefix with ``tokens``, and its length."""
        found: tuple[bytes, int] | None = None
        for key, (saved, _state) in self._entries.items():
            length = shared_prefix(saved, tokens)
            if length and (found is None or length > found[1]):
                found = (key, length)
        return found

    def take(self, key: bytes) -> tuple[Tokens, bytes]:
        """Remove the entry ``key`` and return its tokens and state."""
        tokens, state = self._entries.pop(key)
        self._size -= len(state)
        return tokens, state

    def put(self, tokens: Sequence[int] | Tokens, state: bytes) -> None:
        """Keep ``state`` (the KV of ``tokens``) as the most recently used entry."""
        saved = np.array(tokens, dtype=np.intc)
        if len(state) > self.capacity_bytes or not len(saved):
            return
        for key, (other, _state) in list(self._entries.items()):
            if len(other) <= len(saved) and shared_prefix(other, saved) == len(other):
                self.take(key)
        key = saved.tobytes()
        self._entries[key] = (saved, state)
        self._size += len(state)
        while self._size > self.capacity_bytes:
            _key, (_tokens, dropped) = self._entries.popitem(last=False)
            self._size -= len(dropped)
