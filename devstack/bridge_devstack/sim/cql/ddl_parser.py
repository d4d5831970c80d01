"""The DDL half of the emulator's CQL parser: `CREATE KEYSPACE/TYPE/TABLE` (primary keys,
clustering order, options), `ALTER TABLE ... ADD/DROP/WITH` and `DROP`. `parser.py` dispatches
statements here."""

from __future__ import annotations

from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.cursor import Cursor
from bridge_devstack.sim.cql.lexer import Kind
from bridge_devstack.sim.errors import CqlSyntaxError, UnsupportedCqlError


class DdlParser(Cursor):
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
