"""Recursive-descent parser of the emulator's CQL subset into `ast` nodes.

Supported: `INSERT`, `UPDATE`, `DELETE` (with `USING TTL/TIMESTAMP`), `BEGIN [UNLOGGED] BATCH`
(here), `CREATE KEYSPACE/TYPE/TABLE`, `ALTER TABLE ... ADD/DROP/WITH`, `DROP KEYSPACE/TABLE/TYPE`
(in `ddl_parser.py`), `TRUNCATE`, `USE`; `ALTER TYPE`, `ALTER KEYSPACE` and `SELECT` are passed
through. Anything else raises `UnsupportedCqlError` naming the part that is not supported.
"""

from __future__ import annotations

from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.ddl_parser import DdlParser
from bridge_devstack.sim.cql.lexer import Kind
from bridge_devstack.sim.errors import CqlSyntaxError, UnsupportedCqlError

_RELATION_OPS = ("=", "<", ">", "<=", ">=")


def parse_statement(text: str) -> ast.Statement:
    """Parse one statement (a trailing `;` is allowed)."""
    return _Parser(text).statement()


class _Parser(DdlParser):
    """DML and the statement dispatch; DDL in `DdlParser`."""

    # ------------------------------------------------------------ statements

    def statement(self) -> ast.Statement:
        token = self.tok
        if token.is_word("insert"):
            result: ast.Statement = self.insert()
        elif token.is_word("update"):
            result = self.update()
        elif token.is_word("delete"):
            result = self.delete()
        elif token.is_word("begin"):
            result = self.batch()
        elif token.is_word("create"):
            result = self.create()
        elif token.is_word("alter"):
            result = self.alter()
        elif token.is_word("drop"):
            result = self.drop()
        elif token.is_word("truncate"):
            self.advance()
            self.accept_word("table")
            result = ast.Truncate(self.table_name())
        elif token.is_word("use"):
            self.advance()
            result = ast.Use(self.ident("a keyspace name"))
        elif token.is_word("select"):
            return ast.PassThrough(self.text.strip().rstrip(";"))
        elif token.kind is Kind.END:
            raise CqlSyntaxError("empty statement")
        else:
            raise UnsupportedCqlError(
                f"statement {self.text[token.start : token.end].upper()!r} is not supported by the emulator"
            )
        self.finish()
        return result

    def using(self, allow_ttl: bool = True) -> ast.Using:
        ttl: ast.Term | None = None
        timestamp: ast.Term | None = None
        if not self.accept_word("using"):
            return ast.Using()
        while True:
            if self.accept_word("ttl"):
                if not allow_ttl:
                    raise self.error("TIMESTAMP (a DELETE takes no TTL)")
                ttl = self.term()
            elif self.accept_word("timestamp"):
                timestamp = self.term()
            elif self.tok.is_word("timeout"):
                raise self.unsupported("USING TIMEOUT")
            else:
                raise self.error("TTL or TIMESTAMP")
            if not self.accept_word("and"):
                return ast.Using(ttl, timestamp)

    def insert(self) -> ast.Insert:
        self.expect_word("insert")
        self.expect_word("into")
        table = self.table_name()
        if self.tok.is_word("json"):
            raise self.unsupported("INSERT JSON")
        self.expect("(")
        columns = [self.ident("a column name")]
        while self.accept(","):
            columns.append(self.ident("a column name"))
        self.expect(")")
        self.expect_word("values")
        self.expect("(")
        values = [self.term()]
        while self.accept(","):
            values.append(self.term())
        self.expect(")")
        if len(values) != len(columns):
            raise CqlSyntaxError(f"INSERT names {len(columns)} columns but gives {len(values)} values")
        if self.tok.is_word("if"):
            raise self.unsupported("INSERT ... IF NOT EXISTS (a lightweight transaction)")
        using = self.using()
        return ast.Insert(table, tuple(columns), tuple(values), using)

    def update(self) -> ast.Update:
        self.expect_word("update")
        table = self.table_name()
        using = self.using()
        self.expect_word("set")
        assignments = [self.assignment()]
        while self.accept(","):
            assignments.append(self.assignment())
        where = self.where()
        return ast.Update(table, using, tuple(assignments), where)

    def assignment(self) -> ast.Assignment:
        column = self.ident("a column name")
        if self.accept("["):
            key = self.term()
            self.expect("]")
            self.expect("=")
            return ast.Assignment(column, "element", self.term(), key=key)
        if self.accept("."):
            field = self.ident("a field name")
            self.expect("=")
            return ast.Assignment(column, "field", self.term(), field=field)
        if self.accept("+="):
            return ast.Assignment(column, "+", self.term())
        if self.accept("-="):
            return ast.Assignment(column, "-", self.term())
        self.expect("=")
        if self.tok.kind in (Kind.IDENT, Kind.QUOTED) and self.tok.text == column and (self.peek().is_punct("+", "-")):
            self.advance()
            op = self.advance().text
            return ast.Assignment(column, op, self.term())
        value = self.term()
        if self.accept("+"):
            if self.ident("the column name") != column:
                raise CqlSyntaxError(f"only '{column} = <value> + {column}' may prepend to {column}")
            return ast.Assignment(column, "prepend", value)
        return ast.Assignment(column, "=", value)

    def delete(self) -> ast.Delete:
        self.expect_word("delete")
        targets: list[ast.DeleteTarget] = []
        if not self.tok.is_word("from"):
            targets.append(self.delete_target())
            while self.accept(","):
                targets.append(self.delete_target())
        self.expect_word("from")
        table = self.table_name()
        using = self.using(allow_ttl=False)
        where = self.where()
        return ast.Delete(table, tuple(targets), using, where)

    def delete_target(self) -> ast.DeleteTarget:
        column = self.ident("a column name")
        if self.accept("["):
            key = self.term()
            self.expect("]")
            return ast.DeleteTarget(column, key=key)
        if self.accept("."):
            return ast.DeleteTarget(column, field=self.ident("a field name"))
        return ast.DeleteTarget(column)

    def where(self) -> tuple[ast.Relation, ...]:
        self.expect_word("where")
        relations = [self.relation()]
        while self.accept_word("and"):
            relations.append(self.relation())
        return tuple(relations)

    def relation(self) -> ast.Relation:
        if self.tok.is_word("token") and self.peek().is_punct("("):
            raise self.unsupported("a token() restriction")
        if self.accept("("):
            columns = [self.ident("a column name")]
            while self.accept(","):
                columns.append(self.ident("a column name"))
            self.expect(")")
            is_tuple = True
        else:
            columns = [self.ident("a column name")]
            is_tuple = False
        if self.accept_word("in"):
            return ast.Relation(tuple(columns), "in", self.in_values(), is_tuple)
        token = self.tok
        if token.is_punct(*_RELATION_OPS):
            self.advance()
            return ast.Relation(tuple(columns), token.text, self.term(), is_tuple)
        if token.is_word("contains", "like") or token.is_punct("!="):
            raise self.unsupported(f"the {token.text.upper()} operator in WHERE")
        raise self.error("a relation operator (=, <, >, <=, >=, IN)")

    def in_values(self) -> ast.Term:
        if self.tok.kind is Kind.MARKER:
            raise self.unsupported("a bind marker for a whole IN list")
        self.expect("(")
        items: list[ast.Term] = []
        if not self.tok.is_punct(")"):
            items.append(self.term())
            while self.accept(","):
                items.append(self.term())
        self.expect(")")
        return ast.TupleTerm(tuple(items))

    def batch(self) -> ast.Batch:
        self.expect_word("begin")
        if self.accept_word("counter"):
            raise UnsupportedCqlError("COUNTER BATCH is not supported (counter tables cannot have CDC)")
        kind = "unlogged" if self.accept_word("unlogged") else "logged"
        self.expect_word("batch")
        using = self.using(allow_ttl=False)
        statements: list[ast.Modification] = []
        while not self.tok.is_word("apply"):
            if self.tok.is_word("insert"):
                statements.append(self.insert())
            elif self.tok.is_word("update"):
                statements.append(self.update())
            elif self.tok.is_word("delete"):
                statements.append(self.delete())
            elif self.tok.is_word("if"):
                raise self.unsupported("a lightweight-transaction condition (IF) in a batch")
            else:
                raise self.error("INSERT, UPDATE, DELETE or APPLY BATCH")
            self.accept(";")
        self.expect_word("apply")
        self.expect_word("batch")
        return ast.Batch(kind, using, tuple(statements))
