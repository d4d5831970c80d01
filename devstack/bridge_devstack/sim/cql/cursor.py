"""A cursor over CQL tokens with the helpers every statement parser needs, and CQL terms
(constants, collections, tuples, function calls, bind markers)."""

from __future__ import annotations

from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.lexer import Kind, Token, tokenize
from bridge_devstack.sim.errors import CqlSyntaxError, UnsupportedCqlError

_LITERAL_WORDS = ("true", "false", "null", "nan", "infinity")


class Cursor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.markers = ast.MarkerCounter()

    # ------------------------------------------------------------ helpers

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tok
        if token.kind is not Kind.END:
            self.pos += 1
        return token

    def error(self, expected: str) -> CqlSyntaxError:
        token = self.tok
        found = "end of statement" if token.kind is Kind.END else repr(self.text[token.start : token.end])
        return CqlSyntaxError(f"expected {expected} at position {token.start}, found {found}")

    def unsupported(self, what: str) -> UnsupportedCqlError:
        return UnsupportedCqlError(f"{what} is not supported by the emulator (at position {self.tok.start})")

    def accept_word(self, *words: str) -> bool:
        if self.tok.is_word(*words):
            self.pos += 1
            return True
        return False

    def expect_word(self, word: str) -> None:
        if not self.accept_word(word):
            raise self.error(word.upper())

    def accept(self, symbol: str) -> bool:
        if self.tok.is_punct(symbol):
            self.pos += 1
            return True
        return False

    def expect(self, symbol: str) -> None:
        if not self.accept(symbol):
            raise self.error(repr(symbol))

    def ident(self, what: str = "a name") -> str:
        token = self.tok
        if token.kind in (Kind.IDENT, Kind.QUOTED):
            self.pos += 1
            return token.text
        raise self.error(what)

    def table_name(self) -> ast.TableName:
        first = self.ident("a table name")
        if self.accept("."):
            return ast.TableName(first, self.ident("a table name"))
        return ast.TableName(None, first)

    def if_not_exists(self) -> bool:
        if self.accept_word("if"):
            self.expect_word("not")
            self.expect_word("exists")
            return True
        return False

    def if_exists(self) -> bool:
        if self.accept_word("if"):
            self.expect_word("exists")
            return True
        return False

    def finish(self) -> None:
        self.accept(";")
        if self.tok.kind is not Kind.END:
            if self.tok.is_word("if"):
                raise self.unsupported("a lightweight-transaction condition (IF)")
            raise self.error("end of statement")

    # ------------------------------------------------------------ terms

    def term(self) -> ast.Term:
        token = self.tok
        if token.is_punct("-"):
            following = self.peek()
            if following.kind in (Kind.INTEGER, Kind.FLOAT) or following.is_word("nan", "infinity"):
                self.pos += 2
                return ast.Literal(following.kind, "-" + following.text, token.start)
            raise self.error("a value")
        if token.kind in (Kind.STRING, Kind.INTEGER, Kind.FLOAT, Kind.HEX, Kind.UUID, Kind.DURATION):
            self.advance()
            return ast.Literal(token.kind, token.text, token.start)
        if token.kind is Kind.MARKER:
            self.advance()
            return ast.Marker(self.markers.next())
        if token.is_punct("["):
            return ast.ListTerm(self.items("[", "]"))
        if token.is_punct("("):
            return ast.TupleTerm(self.items("(", ")"))
        if token.is_punct("{"):
            return self.brace_term()
        if token.kind in (Kind.IDENT, Kind.QUOTED):
            if token.kind is Kind.IDENT and token.text in _LITERAL_WORDS:
                self.advance()
                return ast.Literal(Kind.IDENT, token.text, token.start)
            if self.peek().is_punct("("):
                name = self.advance().text
                return ast.FunctionCall(name, self.items("(", ")"))
            self.advance()
            return ast.Name(token.text)
        raise self.error("a value")

    def items(self, opening: str, closing: str) -> tuple[ast.Term, ...]:
        self.expect(opening)
        items: list[ast.Term] = []
        if not self.tok.is_punct(closing):
            items.append(self.term())
            while self.accept(","):
                items.append(self.term())
        self.expect(closing)
        return tuple(items)

    def brace_term(self) -> ast.Term:
        self.expect("{")
        if self.accept("}"):
            return ast.MapTerm(())
        first = self.term()
        if self.accept(":"):
            entries = [(first, self.term())]
            while self.accept(","):
                key = self.term()
                self.expect(":")
                entries.append((key, self.term()))
            self.expect("}")
            return ast.MapTerm(tuple(entries))
        items = [first]
        while self.accept(","):
            items.append(self.term())
        self.expect("}")
        return ast.SetTerm(tuple(items))
