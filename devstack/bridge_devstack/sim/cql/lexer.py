"""Tokenizer for the CQL subset the emulator understands.

Unquoted identifiers and keywords are lower-cased (CQL is case-insensitive there); quoted
identifiers keep their case. Every token keeps its start offset so errors can point at it and so
option values can be passed on to Cassandra verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from bridge_devstack.sim.errors import CqlSyntaxError


class Kind(Enum):
    IDENT = "identifier"
    QUOTED = "quoted identifier"
    STRING = "string"
    INTEGER = "integer"
    FLOAT = "float"
    HEX = "blob"
    UUID = "uuid"
    DURATION = "duration"
    PUNCT = "symbol"
    MARKER = "bind marker"
    END = "end of statement"


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    text: str  # the value: lower-cased for IDENT, unescaped for STRING/QUOTED, symbol for PUNCT
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        return self.kind is Kind.IDENT and self.text in words

    def is_punct(self, *symbols: str) -> bool:
        return self.kind is Kind.PUNCT and self.text in symbols


_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_FLOAT = r"\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?"
_DURATION = r"(?:\d+(?:y|mo|w|d|h|ms|m|s|us|µs|ns))+"
_PATTERNS = [
    (None, r"\s+|--[^\n]*|//[^\n]*|/\*.*?\*/"),
    (Kind.UUID, _UUID + r"(?![0-9A-Za-z_])"),
    (Kind.HEX, r"0[xX][0-9a-fA-F]*(?![0-9A-Za-z_])"),
    (Kind.DURATION, r"(?:" + _DURATION + r")(?![0-9A-Za-z_])"),
    (Kind.FLOAT, r"(?:" + _FLOAT + r")(?![0-9A-Za-z_])"),
    (Kind.INTEGER, r"\d+(?![0-9A-Za-z_])"),
    (Kind.IDENT, r"[A-Za-z_][A-Za-z0-9_$]*"),
    (Kind.PUNCT, r"<=|>=|!=|\+=|-=|[(),;.=<>+\-\[\]{}:*]"),
    (Kind.MARKER, r"\?"),
]
_MASTER = re.compile("|".join(f"(?P<g{i}>{p})" for i, (_, p) in enumerate(_PATTERNS)), re.DOTALL)


def tokenize(text: str) -> list[Token]:
    """All tokens of `text`, ending with one END token."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == "'":
            pos = _quoted(text, pos, "'", Kind.STRING, tokens)
            continue
        if char == '"':
            pos = _quoted(text, pos, '"', Kind.QUOTED, tokens)
            continue
        if text.startswith("$$", pos):
            end = text.find("$$", pos + 2)
            if end < 0:
                raise CqlSyntaxError(f"unterminated $$ string starting at position {pos}")
            tokens.append(Token(Kind.STRING, text[pos + 2 : end], pos, end + 2))
            pos = end + 2
            continue
        match = _MASTER.match(text, pos)
        if match is None:
            raise CqlSyntaxError(f"unexpected character {char!r} at position {pos}")
        kind = _PATTERNS[int(match.lastgroup[1:])][0]  # type: ignore[index]
        value = match.group()
        if kind is not None:
            tokens.append(Token(kind, value.lower() if kind is Kind.IDENT else value, pos, match.end()))
        pos = match.end()
    tokens.append(Token(Kind.END, "", len(text), len(text)))
    return tokens


def _quoted(text: str, pos: int, quote: str, kind: Kind, tokens: list[Token]) -> int:
    chars: list[str] = []
    i = pos + 1
    while i < len(text):
        if text[i] == quote:
            if text.startswith(quote * 2, i):
                chars.append(quote)
                i += 2
                continue
            tokens.append(Token(kind, "".join(chars), pos, i + 1))
            return i + 1
        chars.append(text[i])
        i += 1
    raise CqlSyntaxError(f"unterminated {kind.value} starting at position {pos}")


def split_statements(text: str) -> list[str]:
    """Split a script into statements at top-level `;`, keeping `BEGIN ... APPLY BATCH` whole;
    comments between statements are dropped."""
    statements: list[str] = []
    first: Token | None = None
    last: Token | None = None
    in_batch = False
    tokens = tokenize(text)
    for i, token in enumerate(tokens):
        if token.is_word("begin") and first is None:
            in_batch = True
        elif token.is_word("batch") and i > 0 and tokens[i - 1].is_word("apply"):
            in_batch = False
        if (token.is_punct(";") and not in_batch) or token.kind is Kind.END:
            if first is not None and last is not None:
                statements.append(text[first.start : last.end])
            first = last = None
            continue
        first = first or token
        last = token
    return statements
