"""Recursive-descent parser of the emulator's CQL subset into `ast` nodes.

Supported: `INSERT`, `UPDATE`, `DELETE` (with `USING TTL/TIMESTAMP`), `BEGIN [UNLOGGED] BATCH`,
`CREATE KEYSPACE/TYPE/TABLE`, `ALTER TABLE ... ADD/DROP/WITH`, `DROP KEYSPACE/TABLE/TYPE`,
`TRUNCATE`, `USE`; `ALTER TYPE`, `ALTER KEYSPACE` and `SELECT` are passed through. Anything
else raises `UnsupportedCqlError` naming the part that is not supported.
"""

from __future__ import annotations

from bridge.sim.cql import ast
from bridge.sim.cql.cursor import Cursor
from bridge.sim.cql.lexer import Kind
from bridge.sim.errors import CqlSyntaxError, UnsupportedCqlError

_RELATION_OPS = ("=", "<", ">", "<=", ">=")


def parse_statement(text: str) -> ast.Statement:
    """Parse one statement (a trailing `;` is allowed)."""
    return _Parser(text).statement()


class _Parser(Cursor):
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

    # ------------------------------------------------------------ DDL

    def create(self) -> ast.Statement:
        self.expect_word("create")
        if self.accept_word("keyspace", "schema"):
            exists = self.if_not_exists()
            name = self.ident("a keyspace name")
            self.expect_word("with")
            return ast.CreateKeyspace(name, exists, self.options())
        if self.accept_word("type"):
            exists = self.if_not_exists()
            table = self.table_name()
            self.expect("(")
            fields = [self.field_def()]
            while self.accept(","):
                fields.append(self.field_def())
            self.expect(")")
            return ast.CreateType(table.keyspace, table.name, exists, tuple(fields))
        if self.accept_word("table", "columnfamily"):
            return self.create_table()
        raise self.unsupported(f"CREATE {self.tok.text.upper()}")

    def field_def(self) -> tuple[str, str]:
        return self.ident("a field name"), self.type_text()

    def type_text(self) -> str:
        """The raw text of a CQL type (nested `<...>` included), parsed later with the UDTs known."""
        start = self.tok.start
        self.ident("a type")
        if self.accept("."):
            self.ident("a type name")
        if self.accept("<"):
            depth = 1
            while depth:
                token = self.advance()
                if token.kind is Kind.END:
                    raise self.error("'>' closing the type")
                depth += token.is_punct("<") - token.is_punct(">")
        return self.text[start : self.tokens[self.pos - 1].end]

    def create_table(self) -> ast.CreateTable:
        exists = self.if_not_exists()
        table = self.table_name()
        self.expect("(")
        columns: list[ast.ColumnDef] = []
        partition: tuple[str, ...] = ()
        clustering: tuple[str, ...] = ()
        while True:
            if self.tok.is_word("primary") and self.peek().is_word("key"):
                self.pos += 2
                partition, clustering = self.primary_key()
            else:
                name = self.ident("a column name")
                type_text = self.type_text()
                static = self.accept_word("static")
                if self.accept_word("primary"):
                    self.expect_word("key")
                    partition = (name,)
                columns.append(ast.ColumnDef(name, type_text, static))
            if not self.accept(","):
                break
            if self.tok.is_punct(")"):
                break
        self.expect(")")
        if not partition:
            raise CqlSyntaxError(f"CREATE TABLE {table.name} has no PRIMARY KEY")
        order: list[tuple[str, str]] = []
        options: list[ast.Option] = []
        if self.accept_word("with"):
            while True:
                if self.accept_word("clustering"):
                    self.expect_word("order")
                    self.expect_word("by")
                    order = self.clustering_order()
                elif self.tok.is_word("compact"):
                    raise self.unsupported("COMPACT STORAGE (Cassandra 5 has no compact tables)")
                else:
                    options.append(self.option())
                if not self.accept_word("and"):
                    break
        return ast.CreateTable(table, exists, tuple(columns), partition, clustering, tuple(order), tuple(options))

    def primary_key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        self.expect("(")
        if self.accept("("):
            partition = [self.ident("a column name")]
            while self.accept(","):
                partition.append(self.ident("a column name"))
            self.expect(")")
        else:
            partition = [self.ident("a column name")]
        clustering: list[str] = []
        while self.accept(","):
            clustering.append(self.ident("a column name"))
        self.expect(")")
        return tuple(partition), tuple(clustering)

    def clustering_order(self) -> list[tuple[str, str]]:
        self.expect("(")
        order: list[tuple[str, str]] = []
        while True:
            name = self.ident("a column name")
            direction = "desc" if self.accept_word("desc") else "asc"
            self.accept_word("asc")
            order.append((name, direction))
            if not self.accept(","):
                break
        self.expect(")")
        return order

    def options(self) -> tuple[ast.Option, ...]:
        options = [self.option()]
        while self.accept_word("and"):
            options.append(self.option())
        return tuple(options)

    def option(self) -> ast.Option:
        name = self.ident("an option name")
        self.expect("=")
        start = self.tok.start
        value = self.term()
        return ast.Option(name, value, self.text[start : self.tokens[self.pos - 1].end])

    def alter(self) -> ast.Statement:
        self.expect_word("alter")
        if self.accept_word("table", "columnfamily"):
            table = self.table_name()
            if self.accept_word("add"):
                return ast.AlterTable(table, add=self.added_columns())
            if self.accept_word("drop"):
                return ast.AlterTable(table, drop=self.dropped_columns())
            if self.accept_word("with"):
                return ast.AlterTable(table, options=self.options())
            raise self.unsupported(f"ALTER TABLE ... {self.tok.text.upper()}")
        if self.tok.is_word("type", "keyspace"):
            what = self.advance().text
            name = self.table_name()
            return ast.PassThrough(
                self.text.strip().rstrip(";"),
                keyspace=name.keyspace if what == "type" else name.name,
                type_name=name.name if what == "type" else None,
            )
        raise self.unsupported(f"ALTER {self.tok.text.upper()}")

    def added_columns(self) -> tuple[ast.ColumnDef, ...]:
        parenthesized = self.accept("(")
        columns: list[ast.ColumnDef] = []
        while True:
            name = self.ident("a column name")
            columns.append(ast.ColumnDef(name, self.type_text(), self.accept_word("static")))
            if not (parenthesized and self.accept(",")):
                break
        if parenthesized:
            self.expect(")")
        return tuple(columns)

    def dropped_columns(self) -> tuple[str, ...]:
        if self.accept("("):
            names = [self.ident("a column name")]
            while self.accept(","):
                names.append(self.ident("a column name"))
            self.expect(")")
            return tuple(names)
        return (self.ident("a column name"),)

    def drop(self) -> ast.Drop:
        self.expect_word("drop")
        what = self.advance()
        if not what.is_word("keyspace", "table", "type", "columnfamily", "schema"):
            raise UnsupportedCqlError(f"DROP {what.text.upper()} is not supported by the emulator")
        kind = {"columnfamily": "table", "schema": "keyspace"}.get(what.text, what.text)
        exists = self.if_exists()
        name = self.table_name()
        if kind == "keyspace":
            return ast.Drop(kind, name.name, name.name, exists)
        return ast.Drop(kind, name.keyspace, name.name, exists)
