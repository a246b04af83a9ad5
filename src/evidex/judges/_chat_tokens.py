"""The tokens of a chat prompt in which only the chat template may write special tokens.

A GGUF model's chat template turns messages into text such as
``<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n``, and that text is tokenized
with its special tokens parsed (``special=True``), since the template's own role markers must
become the model's control tokens. Tokenizing the whole formatted text that way also parses any
``<|im_end|>`` or ``<|im_start|>assistant`` that a passage carries inside a message: evidence
could then end the user's turn and open the model's own, and in score mode write the very
reply (``Yes``) that is read from the model's next token.

:func:`chat_tokens` formats the messages with a placeholder in place of each message's content,
tokenizes the template's text with special tokens parsed and each content as plain text
(``special=False``), and joins them in order. A content without special-token text gets the
tokens it had before (the splits fall where the template's special tokens and newlines already
split the text), so the prompts and the cut points fitted on them do not move.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["chat_tokens"]

Tokenize = Callable[[bytes, bool, bool], list[int]]
"""``llama.tokenize(text, add_bos, special)``."""


def chat_tokens(
    chat: Callable[..., Any], tokenize: Tokenize, messages: Sequence[Mapping[str, str]]
) -> list[int]:
    """The tokens of ``messages`` formatted by ``chat`` (llama-cpp-python's chat formatter:
    ``chat(messages=...)`` returns an object with ``prompt`` and ``added_special``), the
    template's text with special tokens parsed and every message's content without."""
    nonce = secrets.token_hex(8)
    slots = [f"\x1fevidex-content-{nonce}-{i}\x1f" for i in range(len(messages))]
    shaped = [{**dict(m), "content": slot} for m, slot in zip(messages, slots, strict=True)]
    formatted = chat(messages=shaped)
    prompt: str = formatted.prompt
    tokens: list[int] = []
    at = 0
    first = True
    for message, slot in zip(messages, slots, strict=True):
        where = prompt.find(slot, at)
        if where < 0:  # the template dropped this message (none of ours do): nothing to add
            continue
        tokens += _tokens(tokenize, prompt[at:where], special=True, bos=first, formatted=formatted)
        first = first and not prompt[at:where]
        tokens += _tokens(
            tokenize, message["content"], special=False, bos=first, formatted=formatted
        )
        first = first and not message["content"]
        at = where + len(slot)
    tokens += _tokens(tokenize, prompt[at:], special=True, bos=first, formatted=formatted)
    return tokens


def _tokens(
    tokenize: Tokenize, text: str, *, special: bool, bos: bool, formatted: Any
) -> list[int]:
    if not text:
        return []
    return tokenize(text.encode("utf-8"), bos and not formatted.added_special, special)
