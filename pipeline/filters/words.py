"""A fast rule-based word split shared by the Gopher filters.

It follows the shape of spaCy's English tokenizer (which datatrove uses for the same rules) at
a fraction of the cost: text is cut on whitespace, then each piece loses its leading and
trailing punctuation (brackets, quotes, `,` `;` `:` `!` `?` `_` `#` `*`, currency, `%`, `...`, a
final `.`) as separate tokens; abbreviations such as `e.g.` and `U.S.` keep their dots, English
clitics split off (`don't` -> `do`, `n't`; `it's` -> `it`, `'s`), and a few infixes split
(`well-known` -> `well`, `-`, `known`; `read/write`; `1+2`). Other inner punctuation stays in the
token (`3.14`, `f(x`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

_QUOTES = "\"'`“”‘’«»„‚"
_PUNCT = "…,:;!?¿¡()[]{}<>_#*&~·"
_PREFIXES = frozenset(_PUNCT + _QUOTES + "$£€¥§%=—–+")
_SUFFIXES = frozenset(_PUNCT + _QUOTES + "%—–")
_ABBREVIATION_RE = re.compile(r"(?:[^\W\d_]\.)+")
_CLITIC_RE = re.compile(r"([^\W\d_]+?)(n['’]t|['’](?:s|re|ll|ve|d|m))", re.IGNORECASE)
# Punctuation split inside a piece: arithmetic between digits, a period between a lower- and an
# upper-case letter, a comma between letters, hyphens/dashes before a letter, : < > = / between
# a letter or digit and a letter.
_INFIX_RE = re.compile(
    r"((?<=[0-9])[+\-*^](?=[0-9-])"
    r"|(?<=[a-z])\.(?=[A-Z])"
    r"|(?<=[^\W\d_]),(?=[^\W\d_])"
    r"|(?<=[^\W_])(?:-+|–|—|~)(?=[^\W\d_])"
    r"|(?<=[^\W_])[:<>=/](?=[^\W\d_]))"
)
_SPECIAL = {"cannot": ("can", "not"), "Cannot": ("Can", "not")}


def _split_piece(piece: str, out: list[str]) -> None:
    """Tokens of one whitespace-free piece that is not plain alphanumeric, appended to `out`."""
    start, end = 0, len(piece)
    while end - start > 1 and piece[start] in _PREFIXES:
        out.append(piece[start])
        start += 1
    suffixes = []
    while end - start > 1:
        if end - start > 3 and piece.endswith("...", start, end):
            suffixes.append("...")
            end -= 3
        elif piece[end - 1] in _SUFFIXES:
            suffixes.append(piece[end - 1])
            end -= 1
        elif piece[end - 1] == "." and not _ABBREVIATION_RE.fullmatch(piece, start, end):
            suffixes.append(".")
            end -= 1
        else:
            break
    core = piece[start:end]
    clitic = _CLITIC_RE.fullmatch(core)
    if clitic:
        out.extend(clitic.groups())
    elif core.isalnum():
        out.append(core)
    else:
        out.extend(t for t in _INFIX_RE.split(core) if t)
    out.extend(reversed(suffixes))


def is_word(token: str) -> bool:
    """Whether a token from `split_tokens` holds a letter or digit (is not pure punctuation)."""
    return token[0].isalnum() or any(c.isalnum() for c in token)


def has_alpha(token: str) -> bool:
    """Whether a token contains at least one alphabetic character."""
    return token.isalpha() or any(c.isalpha() for c in token)


def _piece_tokens(piece: str) -> tuple[str, ...]:
    if piece.isalnum():
        return _SPECIAL.get(piece, (piece,))
    tokens: list[str] = []
    _split_piece(piece, tokens)
    return tuple(tokens)


PIECE_MEMO_SIZE = 200_000
"""Whitespace-free pieces whose split is remembered (a few tens of MB); past that it starts over."""


class _PieceMemo(dict):
    """piece -> (its tokens, those that are words, how many of those hold a letter): web text
    repeats its pieces (`the`, `it.`, `(see`), so each is split and classified once."""

    def __missing__(self, piece: str) -> tuple[tuple[str, ...], tuple[str, ...], int]:
        if len(self) >= PIECE_MEMO_SIZE:
            self.clear()
        tokens = _piece_tokens(piece)
        words = tuple(t for t in tokens if is_word(t))
        entry = self[piece] = (tokens, words, sum(map(has_alpha, words)))
        return entry


_PIECES = _PieceMemo()
_TOKENS, _WORDS, _ALPHA = itemgetter(0), itemgetter(1), itemgetter(2)


@dataclass(frozen=True, slots=True)
class TextTokens:
    """The split of one text, as the Gopher filters use it."""

    tokens: tuple[str, ...]
    "Words and punctuation tokens, in order."
    words: tuple[str, ...]
    "The tokens holding a letter or digit, in order."
    n_alpha_words: int
    "How many words hold a letter."


RECENT_TOKENS = 4_000_000
"""Tokens of the most recent texts kept, so that the filters of a batch split each text once."""
_recent: dict[str, TextTokens] = {}
_recent_count = 0


def text_tokens(text: str) -> TextTokens:
    """The split of `text` (remembered for the texts of the last batch or so)."""
    global _recent_count
    found = _recent.get(text)
    if found is not None:
        return found
    entries = list(map(_PIECES.__getitem__, text.split()))
    found = TextTokens(
        tuple(chain.from_iterable(map(_TOKENS, entries))),
        tuple(chain.from_iterable(map(_WORDS, entries))),
        sum(map(_ALPHA, entries)),
    )
    while _recent and _recent_count + len(found.tokens) > RECENT_TOKENS:
        _recent_count -= len(_recent.pop(next(iter(_recent))).tokens)
    _recent[text] = found
    _recent_count += len(found.tokens)
    return found


def split_tokens(text: str) -> tuple[str, ...]:
    """Words and punctuation tokens of `text`, in order."""
    return text_tokens(text).tokens
