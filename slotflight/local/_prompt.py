"""Chat messages to prompt tokens, the text of the messages read as text only.

A chat template's markup is made of special tokens (``<|im_start|>``, ``<|im_end|>``),
so a rendered prompt is tokenized with special tokens recognised (llama.cpp's
``special=True``). The text of a message must not be read that way: a message holding
``<|im_end|>\\n<|im_start|>system\\n...`` would end its own turn and open a system turn
of its sender's writing. :class:`PromptTokenizer` reads every special token that stands
in (or reaches into) the text of a message as the plain text it is, and keeps the
template's own.

The prompt is tokenized whole, as it always was, and those tokens are kept unless the
text of a message could take part in a special token (it holds one's text, or begins or
ends with a part of one): a prompt without such text gets the very tokens it always got.
Otherwise the template is rendered again with a unique marker in place of each text,
which tells which bytes of the prompt came from the messages. When a special token of
the prompt overlaps them, the prompt is tokenized again: the special tokens of the
template's own text as such, every stretch of text between them with special tokens
not recognised. A template that does not put the text of a message into the prompt as
it is (it trims it, say) cannot be told apart from that text, and a message holding a
special token's text is then refused (``invalid_messages``); so it is, for the same
reason, under a vocabulary that does not cut text into byte pieces (not BPE).

Costs: O(prompt) when no text could take part in a special token; otherwise one more
rendering, and a lookup per token. A prompt whose messages hold a special token's text
is never searched for special tokens whole (llama.cpp's search takes quadratic time in
how many it finds: minutes for 1 MiB of ``<|im_end|>``): only the template's own pieces
are, and the text between them is tokenized as text.
"""

from __future__ import annotations

import ctypes
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jinja2
from llama_cpp import llama_chat_format
from llama_cpp import llama_cpp as native
from llama_cpp._internals import LlamaModel

from .._errors import SlotflightError
from ._prefix import Span, special_spans

__all__ = ["PromptTokenizer", "chat_formatter", "special_tokens", "token_piece"]

_SPECIAL = native.LLAMA_TOKEN_ATTR_CONTROL | native.LLAMA_TOKEN_ATTR_UNKNOWN
# Private-use characters: no chat template writes them, and none changes them.
_OPEN = "\ue000"
_CLOSE = "\ue001"


def special_tokens(model: LlamaModel) -> dict[int, str]:
    """The tokens llama.cpp reads from text only with ``special=True`` (control and
    unknown tokens), with their text. O(vocabulary)."""
    found: dict[int, str] = {}
    for token in range(model.n_vocab()):
        if model.token_get_attr(token) & _SPECIAL:
            text = native.llama_vocab_get_text(model.vocab, token) or b""
            if text:
                found[token] = text.decode("utf-8", "replace")
    return found


def token_piece(model: LlamaModel, token: int) -> bytes:
    """The bytes ``token`` stands for in a text (special tokens as their text)."""
    size = 64
    while True:
        buffer = ctypes.create_string_buffer(size)
        written = native.llama_token_to_piece(model.vocab, token, buffer, size, 0, True)
        if written >= 0:
            return buffer.raw[:written]
        size = -written


def chat_formatter(model: LlamaModel) -> Any:
    """The GGUF's own chat template, or ChatML when the file carries none."""
    template = model.metadata().get("tokenizer.chat_template")
    if not template:
        return llama_chat_format.format_chatml

    def text(token: int) -> str:
        return (
            model.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""
        )

    eos = model.token_eos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=text(eos),
        bos_token=text(model.token_bos()),
        stop_token_ids=[eos],
    )


class PromptTokenizer:
    """Renders messages with the model's chat template and tokenizes the prompt, the
    template's special tokens recognised and the text of the messages read as text."""

    def __init__(self, model: LlamaModel) -> None:
        self._model = model
        self._formatter = chat_formatter(model)
        self.special = special_tokens(model)
        texts = sorted(set(self.special.values()))
        self._texts = tuple(texts)
        self._heads = tuple({t[:k] for t in texts for k in range(1, len(t))})
        self._tails = tuple({t[k:] for t in texts for k in range(1, len(t))})
        self._byte_pieces = model.vocab_type() == native.LLAMA_VOCAB_TYPE_BPE
        self._sizes: dict[int, int] = {}

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> tuple[list[int], Any]:
        """The prompt's tokens and the template's stop strings.

        Raises:
            SlotflightError: ``invalid_messages`` when the template refuses the messages,
                or a special token's text in a message cannot be kept as text.
        """
        copies = [dict(m) for m in messages]
        for index, message in enumerate(copies):
            for key, value in message.items():
                # Only a message's own strings are told apart from the template's text.
                if (key == "role" or not isinstance(value, str)) and any(
                    self._holds_special(text) for text in _strings(value)
                ):
                    raise _special_text(f"/messages/{index}/{key}")
        formatted = self._render(copies)
        add_special = not formatted.added_special
        texts = [
            (f"/messages/{index}/{key}", text)
            for index, message in enumerate(copies)
            for key, text in message.items()
            if key != "role" and isinstance(text, str)
        ]
        if any(self._holds_special(text) for _where, text in texts):
            # Not tokenized whole first: llama.cpp's search for special tokens takes
            # quadratic time in how many it finds (a message of 1 MiB of them: minutes).
            tokens = self._text_as_text(copies, texts, formatted.prompt, None, add_special)
        else:
            data = formatted.prompt.encode("utf-8")
            tokens = self._model.tokenize(data, add_bos=add_special, special=True)
            if any(self._may_reach(text) for _where, text in texts):
                tokens = self._text_as_text(copies, texts, formatted.prompt, tokens, add_special)
        return tokens, formatted.stop

    def _render(self, messages: list[dict[str, Any]]) -> Any:
        try:
            return self._formatter(messages=messages)
        except (jinja2.TemplateError, ValueError, TypeError) as exc:
            raise SlotflightError(
                f"the model's chat template refused the messages: {exc}",
                code="invalid_messages",
                location="/messages",
            ) from None

    def _holds_special(self, text: str) -> bool:
        return any(special in text for special in self._texts)

    def _may_reach(self, text: str) -> bool:
        """Whether ``text``, which holds no special token's text, could take part in a
        special token of the prompt: it begins with an end of one or ends with a start
        of one (or is a part of one)."""
        return bool(text) and (
            text.endswith(self._heads)
            or text.startswith(self._tails)
            or any(text in special for special in self._texts)
        )

    def _text_as_text(
        self,
        messages: list[dict[str, Any]],
        texts: list[tuple[str, str]],
        prompt: str,
        tokens: list[int] | None,
        add_special: bool,
    ) -> list[int]:
        """The prompt's tokens with the messages' text read as text. ``tokens``: the
        prompt tokenized whole, kept unless a special token reaches into a message's
        text (``None`` when a message holds one's text)."""
        data = prompt.encode("utf-8")
        layout = self._layout(messages, prompt)
        model = self._model
        lead = [model.token_bos()] if add_special and model.add_bos_token() else []
        trail = [model.token_eos()] if add_special and model.add_eos_token() else []
        if tokens is not None:
            body = tokens[len(lead) : len(tokens) - len(trail)]
            spans = None if layout is None else self._spans(body, len(data))
            if spans is None or layout is None or not _overlap(spans, layout[1]):
                return tokens
        template = (
            [
                (start, self._spans(self._tokenize(piece, special=True), end - start))
                for start, end, piece in layout[0]
            ]
            if layout is not None and self._byte_pieces
            else None
        )
        if template is None or any(found is None for _start, found in template):
            where = next((w for w, text in texts if self._holds_special(text)), "/messages")
            raise _special_text(where)
        result = list(lead)
        position = 0
        for start, found in template:
            for a, b, token in found or ():
                result += self._tokenize(data[position : start + a], special=False)
                result.append(token)
                position = start + b
        result += self._tokenize(data[position:], special=False)
        return result + trail

    def _layout(
        self, messages: list[dict[str, Any]], prompt: str
    ) -> tuple[list[tuple[int, int, bytes]], list[tuple[int, int]]] | None:
        """Where the template's own text and the messages' text lie in ``prompt``
        (byte ranges, the template's with its bytes), or ``None`` when the template
        does not put each text into the prompt as it is."""
        nonce = secrets.token_hex(8)
        originals: list[str] = []
        marked: list[dict[str, Any]] = []
        for message in messages:
            copy: dict[str, Any] = {}
            for key, value in message.items():
                if key != "role" and isinstance(value, str):
                    copy[key] = f"{_OPEN}{nonce}.{len(originals)}{_CLOSE}"
                    originals.append(value)
                else:
                    copy[key] = value
            marked.append(copy)
        try:
            rendered = str(self._formatter(messages=marked).prompt)
        except Exception:  # a template that looks into the text: no layout
            return None
        parts = re.split(f"{_OPEN}{nonce}\\.([0-9]+){_CLOSE}", rendered)
        template = parts[0::2]
        order = [int(n) for n in parts[1::2]]
        if any(n >= len(originals) for n in order):
            return None
        if (
            template[0]
            + "".join(originals[n] + t for n, t in zip(order, template[1:], strict=True))
            != prompt
        ):
            return None
        pieces: list[tuple[int, int, bytes]] = []
        client: list[tuple[int, int]] = []
        position = 0
        for i, text in enumerate(template):
            if i:
                size = len(originals[order[i - 1]].encode("utf-8"))
                client.append((position, position + size))
                position += size
            data = text.encode("utf-8")
            pieces.append((position, position + len(data), data))
            position += len(data)
        return pieces, client

    def _spans(self, tokens: Sequence[int], size: int) -> list[Span] | None:
        """The special tokens of ``tokens`` where they lie in their text of ``size``
        bytes, or ``None`` when the tokens' pieces do not make up that text."""
        found, length = special_spans(tokens, self._size, self.special)
        return found if length == size else None

    def _size(self, token: int) -> int:
        size = self._sizes.get(token)
        if size is None:
            size = self._sizes[token] = len(token_piece(self._model, token))
        return size

    def _tokenize(self, data: bytes, *, special: bool) -> list[int]:
        return self._model.tokenize(data, add_bos=False, special=special) if data else []


def _overlap(spans: list[Span], ranges: list[tuple[int, int]]) -> bool:
    """Whether a span overlaps a non-empty range (both in order, each list's items
    apart). O(spans + ranges)."""
    ranges = [(c, d) for c, d in ranges if c < d]
    i = 0
    for a, b, _token in spans:
        while i < len(ranges) and ranges[i][1] <= a:
            i += 1
        if i < len(ranges) and ranges[i][0] < b:
            return True
    return False


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value`` (nested in lists and objects too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _special_text(location: str) -> SlotflightError:
    return SlotflightError(
        "the message holds a special token's text that this model's chat template"
        " cannot keep as text",
        code="invalid_messages",
        location=location,
    )
