"""The `rasql` sqlglot dialect: Spark SQL plus RaSQL's recursive-aggregate CTE heads.

Two additions to Spark's grammar:

* a CTE head column may be an aggregate, `min() AS Cost`, `mmin AS Cost`, `count() Cnt`,
  or a payload that travels with a min/max winner, `argmin(Cost) AS Pred` (both parsed into
  `AggregateColumn`);
* the RaSQL body form `AS (SELECT ...) UNION (SELECT ...)`: branches chained after the
  parenthesised first branch, with no outer parentheses;
* the SQL-standard `SEARCH` and `CYCLE` clauses after a CTE (PostgreSQL's grammar), kept on the
  CTE as `SearchClause` / `CycleClause` args for the planner to rewrite (sqlglot's own parse
  keeps one column of one clause per WITH, not per CTE);
* a head aggregate users declare, spelled as Spark's SQL functions are
  (`CREATE [OR REPLACE] [TEMPORARY] AGGREGATE bor(a BIGINT, b BIGINT) RETURNS BIGINT IDENTITY 0
  RETURN a | b`, `CreateAggregate`) and dropped with `DROP [TEMPORARY] AGGREGATE [IF EXISTS] bor`
  (`DropAggregate`).

Importing this module registers the dialect, so `sqlglot.parse_one(q, read="rasql")` works.
"""

from __future__ import annotations

from typing import NoReturn

from sqlglot import exp
from sqlglot.dialects.dialect import groupconcat_sql
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError
from sqlglot.generators.spark import SparkGenerator
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

# RaSQL's spellings that may omit the parentheses: `mmin AS Cost`.
PAREN_FREE_AGGREGATES = {"MMIN", "MMAX", "MSUM", "MCOUNT"}
# Payload spellings, which name the head column whose winner they follow: `argmin(Cost) AS Pred`.
PAYLOADS = {"ARGMIN", "ARGMAX"}


class AggregateColumn(exp.Expression):
    """A CTE head column `func() AS name`, or a payload `argmin(of) AS name`; `func` is kept as
    written (the planner validates it)."""

    arg_types = {"this": True, "func": True, "of": False}

    @property
    def name(self) -> str:
        return self.this.name

    @property
    def func(self) -> str:
        return self.args["func"]

    @property
    def of(self) -> str | None:
        """The head column a payload follows (`Cost` in `argmin(Cost) AS Pred`), else None."""
        of = self.args.get("of")
        return of.name if of is not None else None


class CreateAggregate(exp.Expression):
    """`CREATE [OR REPLACE] [TEMPORARY] AGGREGATE name(a T, b T) RETURNS T IDENTITY e RETURN m`:
    a head aggregate whose merge `m` is an expression over its two parameters and whose identity
    `e` is the value that merges with any value to give it back (docs/dialect.md section 2)."""

    arg_types = {"this": True, "expressions": True, "returns": True, "identity": True,
                 "merge": True, "replace": False, "temporary": False}

    @property
    def parameters(self) -> list[str]:
        return [p.name for p in self.expressions]


class DropAggregate(exp.Expression):
    """`DROP [TEMPORARY] AGGREGATE [IF EXISTS] name`."""

    arg_types = {"this": True, "exists": False, "temporary": False}


class SearchClause(exp.Expression):
    """`SEARCH {BREADTH|DEPTH} FIRST BY cols SET this` after a CTE."""

    arg_types = {"this": True, "kind": True, "expressions": True}


class CycleClause(exp.Expression):
    """`CYCLE cols SET this [TO to DEFAULT default] USING using` after a CTE."""

    arg_types = {"this": True, "expressions": True, "to": False, "default": False, "using": True}


# Tokens after which a bare `From` is a column name, not the FROM clause (`SELECT From, To`).
FOLLOWS_COLUMN = {
    TokenType.COMMA, TokenType.FROM, TokenType.R_PAREN, TokenType.EQ, TokenType.NEQ,
    TokenType.LT, TokenType.LTE, TokenType.GT, TokenType.GTE, TokenType.PLUS, TokenType.DASH,
    TokenType.STAR, TokenType.SLASH, TokenType.AND, TokenType.OR, TokenType.ALIAS,
}


def _shuffle(args: list) -> exp.Expr:
    # Spark's `shuffle(array[, seed])`; sqlglot's Shuffle node takes the array only
    return exp.Shuffle(this=args[0]) if len(args) == 1 else exp.Anonymous(this="SHUFFLE", expressions=args)


def _uuid(args: list) -> exp.Expr:
    # Spark's `uuid([seed])`; sqlglot's Uuid node drops the seed (so `uuid(5)` became `UUID()`)
    return exp.Uuid() if not args else exp.Anonymous(this="UUID", expressions=args)


class TimeLiteral(exp.Expression):
    """Spark's `TIME 'hh:mm:ss[.f]'`. Spark 4.3 takes the literal but not yet a CAST to TIME
    (UNSUPPORTED_TIME_TYPE), so the literal is not sqlglot's CAST, which must keep its error."""

    arg_types = {"this": True}


# Spark's binary operators below comparison, loosest first (SqlBaseParser's `valueExpression`):
# `|`, `^`, `&`, then the shifts, then `+ - ||`, then `* / % DIV`. sqlglot's own parser puts `||`
# and every bitwise operator on one level below `+`, so `mask | 1 << v` meant `(mask | 1) << v`.
BITWISE_LEVELS = ((TokenType.PIPE, exp.BitwiseOr), (TokenType.CARET, exp.BitwiseXor),
                  (TokenType.AMP, exp.BitwiseAnd))
# Operators whose precedence differs between Spark, sqlglot's generators and DuckDB: an operand
# built from one is parenthesised, so that every SQL text rendered from the tree (Spark's, the
# driver's DuckDB) groups it as Spark parsed it.
REGROUPED = (exp.DPipe, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseAnd, exp.BitwiseLeftShift,
             exp.BitwiseRightShift)


def _grouped(parent: type, operand: exp.Expr | None) -> exp.Expr | None:
    if (isinstance(operand, exp.Binary) and type(operand) is not parent
            and (issubclass(parent, REGROUPED) or isinstance(operand, REGROUPED))):
        return exp.Paren(this=operand)
    return operand


class RaSQLParser(SparkParser):
    FUNCTIONS = {**SparkParser.FUNCTIONS, "SHUFFLE": _shuffle, "UUID": _uuid}
    TYPE_LITERAL_PARSERS = {**SparkParser.TYPE_LITERAL_PARSERS,
                            exp.DType.TIME: lambda self, this, _: self.expression(TimeLiteral(this=this))}

    def _parse_bitwise(self) -> exp.Expr | None:
        return self._parse_bitwise_level(0)

    def _parse_bitwise_level(self, level: int) -> exp.Expr | None:
        if level == len(BITWISE_LEVELS):
            return self._parse_shift()
        token, klass = BITWISE_LEVELS[level]
        this = self._parse_bitwise_level(level + 1)
        while self._match(token):
            operand = self._parse_bitwise_level(level + 1)
            this = self.expression(klass(this=_grouped(klass, this), expression=_grouped(klass, operand)))
        return this

    def _parse_shift(self) -> exp.Expr | None:
        this = self._parse_term()
        while True:
            klass: type[exp.Binary] | None
            if self._match_pair(TokenType.LT, TokenType.LT):
                klass = exp.BitwiseLeftShift
            elif self._match_pair(TokenType.GT, TokenType.GT):
                klass = None if self._match(TokenType.GT) else exp.BitwiseRightShift  # None: `>>>`
            else:
                return this
            operand = self._parse_term()
            if klass is None:  # sqlglot has no node for it: Spark's function of that meaning
                this = self.expression(exp.Anonymous(this="SHIFTRIGHTUNSIGNED", expressions=[this, operand]))
            else:
                this = self.expression(klass(this=_grouped(klass, this), expression=_grouped(klass, operand)))

    def _parse_term(self, parse_mod: bool = True) -> exp.Expr | None:
        # sqlglot's loop over TERM (+, -, COLLATE), with Spark's `||` on the same level
        this = self._parse_factor(parse_mod=parse_mod)
        while True:
            if self.dialect.DPIPE_IS_STRING_CONCAT and self._match(TokenType.DPIPE):
                operand = self._parse_factor(parse_mod=parse_mod)
                this = self.expression(exp.DPipe(
                    this=_grouped(exp.DPipe, this), expression=_grouped(exp.DPipe, operand),
                    safe=not self.dialect.STRICT_STRING_CONCAT))
            elif self._match_set(self.TERM):
                klass = self.TERM[self._prev.token_type]
                comments = self._prev_comments
                operand = self._parse_factor(parse_mod=parse_mod)
                this = self.expression(klass(this=_grouped(klass, this), expression=operand),
                                       comments=comments)
                if isinstance(this, exp.Collate):
                    self._normalize_collate(this)
            else:
                return this

    def _parse_primary(self) -> exp.Expr | None:
        # Spark accepts the reserved word FROM as a column name; RaDlog's queries use it.
        if (
            self._curr
            and self._curr.token_type == TokenType.FROM
            and self._next
            and self._next.token_type in FOLLOWS_COLUMN
            and self._prev
            and self._prev.token_type not in (TokenType.FROM, TokenType.DOT)
        ):
            self._advance()
            return exp.column(exp.to_identifier(self._prev.text))
        return super()._parse_primary()

    def _parse_column(self) -> exp.Expr | None:
        # Spark reads `X 'F0'` as `X'F0'`: X is one of its literal types (`literalType`), written
        # before a string as DATE is; sqlglot knows only the form without the space.
        if (
            self._curr
            and self._curr.token_type == TokenType.VAR
            and self._curr.text.upper() == "X"
            and self._next
            and self._next.token_type == TokenType.STRING
        ):
            self._advance(2)
            return self.expression(exp.HexString(this=self._prev.text))
        return super()._parse_column()

    def _parse_value(self, values: bool = True) -> exp.Tuple | None:
        # A row of Spark's `VALUES 1, 2 AS t(x)` is one expression, never an aliased one
        # (`inlineTable`): sqlglot read `2 AS t` as the last row and lost the table's name.
        if self._curr and self._curr.token_type == TokenType.L_PAREN:
            return super()._parse_value(values)
        expression = self._parse_assignment()
        return self.expression(exp.Tuple(expressions=[expression])) if expression else None

    def _parse_refresh(self) -> exp.Refresh | exp.Command:
        # Databricks' `REFRESH MATERIALIZED VIEW name FULL`: recompute instead of refreshing from
        # what changed (recsql.statements.materialized)
        refresh = super()._parse_refresh()
        if isinstance(refresh, exp.Refresh) and refresh.text("kind") == "MATERIALIZED VIEW" \
                and self._match_text_seq("FULL"):
            refresh.set("mode", exp.var("FULL"))
        return refresh

    def _parse_create(self) -> exp.Create | exp.Command:
        start = self._index
        replace = self._match_pair(TokenType.OR, TokenType.REPLACE)
        temporary = self._match_texts(("TEMPORARY", "TEMP"))
        if self._match_text_seq("AGGREGATE"):
            # a statement node of recsql's own, as `_parse_refresh` may give a Command
            return self._parse_create_aggregate(bool(replace), bool(temporary))  # type: ignore[return-value]
        self._retreat(start)
        return super()._parse_create()

    def _parse_create_aggregate(self, replace: bool, temporary: bool) -> CreateAggregate:
        """What follows `CREATE [OR REPLACE] [TEMPORARY] AGGREGATE`, in the order of Spark's
        `CREATE FUNCTION name(params) RETURNS type [characteristics] RETURN expr`."""
        name = self._parse_id_var(any_token=False)
        if name is None:
            self._aggregate_error("the aggregate's name after CREATE AGGREGATE")
        if not self._match(TokenType.L_PAREN):
            self._aggregate_error(f"`(a T, b T)` after `{name.name}`: the two values its merge takes, "
                                  "each of the aggregate's type")
        parameters = self._parse_csv(self._parse_aggregate_parameter)
        if not self._match(TokenType.R_PAREN):
            self._aggregate_error("`)` after the merge's two parameters")
        if not self._match_text_seq("RETURNS"):
            self._aggregate_error("RETURNS and the aggregate's type after its parameters")
        returns = self._parse_aggregate_type("RETURNS")
        if not self._match_text_seq("IDENTITY"):
            self._aggregate_error("IDENTITY and the value that merges with any value to give it "
                                  "back (0 for a bitwise or), after the type")
        identity = self._parse_assignment()
        if identity is None or not self._match_text_seq("RETURN"):
            self._aggregate_error("RETURN and the merge, an expression over the two parameters, "
                                  "after the identity")
        merge = self._parse_assignment()
        if merge is None:
            self._aggregate_error("the merge after RETURN: an expression over the two parameters")
        node = CreateAggregate(this=name, expressions=parameters, returns=returns, identity=identity,
                               merge=merge, replace=replace, temporary=temporary)
        self._check_aggregate(node)
        return node

    def _parse_aggregate_parameter(self) -> exp.ColumnDef:
        name = self._parse_id_var(any_token=False)
        if name is None:
            self._aggregate_error("a parameter's name")
        return exp.ColumnDef(this=name, kind=self._parse_aggregate_type(f"`{name}`"))

    def _parse_aggregate_type(self, after: str) -> exp.DataType:
        """A Spark type after `after`; a word that is no type is an error saying so."""
        token = self._curr
        start = self._index
        try:
            found = self._parse_types(allow_identifiers=False)
        except Exception:  # noqa: BLE001 - sqlglot's type parser fails on some non-types
            self._retreat(start)
            found = None
        if not isinstance(found, exp.DataType) or found.this == exp.DataType.Type.USERDEFINED:
            written = f"`{token.text}` is not a Spark type" if token else "the statement ends"
            self._aggregate_error(f"a type after {after} ({written}: BIGINT, BOOLEAN, STRING, "
                                  "ARRAY<INT>, STRUCT<lo: INT, hi: INT>, ...)")
        assert isinstance(found, exp.DataType)  # _aggregate_error raised otherwise
        return found

    def _check_aggregate(self, node: CreateAggregate) -> None:
        """Two parameters of the aggregate's type; a merge over them alone, an identity over
        nothing."""
        name, returns = node.name, node.args["returns"]
        params = node.expressions
        if len(params) != 2 or any(not isinstance(p, exp.ColumnDef) or p.args.get("kind") != returns
                                   for p in params) or params[0].name.lower() == params[1].name.lower():
            self._fail(f"The merge of aggregate `{name}` takes two values of its type: write "
                       f"`{name}(a {returns.sql('spark')}, b {returns.sql('spark')}) RETURNS "
                       f"{returns.sql('spark')}`")
        names = {p.name.lower() for p in params}
        uses: tuple[tuple[str, exp.Expr, set[str]], ...] = (
            ("merge", node.args["merge"], names), ("identity", node.args["identity"], set()))
        for label, expression, allowed in uses:
            for column in expression.find_all(exp.Column):
                root = column.parts[0].name.lower()
                if root not in allowed and not _lambda_bound(column, root):
                    may = f"only its parameters `{'`, `'.join(p.name for p in params)}`" if allowed else "no column"
                    self._fail(f"The {label} of aggregate `{name}` may use {may}; it uses "
                               f"`{column.sql('spark')}`")
            if expression.find(exp.AggFunc, exp.Query, exp.Window):
                self._fail(f"The {label} of aggregate `{name}` is a plain expression: no aggregate, "
                           "window or subquery")

    def _aggregate_error(self, expected: str) -> NoReturn:
        self._fail(f"Expected {expected} (CREATE [OR REPLACE] [TEMPORARY] AGGREGATE name(a T, b T) "
                   "RETURNS T IDENTITY value RETURN merge)")

    def _fail(self, message: str) -> NoReturn:
        """Raise `message` at the current token now: what follows a malformed declaration is no
        statement to go on parsing."""
        self.raise_error(message)
        self.check_errors()
        raise ParseError(message)  # never: check_errors raised it

    def _parse_drop(self, exists: bool = False, kind: str | None = None) -> exp.Drop | exp.Command:
        start = self._index
        temporary = self._match_texts(("TEMPORARY", "TEMP"))
        if not kind and self._match_text_seq("AGGREGATE"):
            if_exists = self._parse_exists()
            name = self._parse_id_var(any_token=False)
            if name is None:
                self._fail("Expected the aggregate's name after DROP AGGREGATE")
            return DropAggregate(this=name, exists=bool(if_exists),  # type: ignore[return-value]
                                 temporary=bool(temporary))
        self._retreat(start)
        return super()._parse_drop(exists, kind)

    def _parse_cte(self) -> exp.CTE | exp.FunctionSpecification | None:
        level = self._take_max_recursion_level()
        cte = super()._parse_cte()
        if isinstance(cte, exp.CTE) and level is not None:
            cte.meta["max_recursion_level"] = level
        if isinstance(cte, exp.CTE) and self._curr and self._curr.token_type in self.SET_OPERATIONS:
            # RaSQL form: `(base) UNION (recursive)` continues after the first parenthesis.
            cte.set("this", self._parse_set_operations(cte.this))
            cte.meta["rasql_form"] = True
        if isinstance(cte, exp.CTE):
            self._parse_search_cycle(cte)
        return cte

    def _parse_search_cycle(self, cte: exp.CTE) -> None:
        """PostgreSQL's `SEARCH ... SET seq` and `CYCLE ... USING path` after a CTE's body."""
        if self._match_text_seq("SEARCH"):
            start = self._prev
            kind = self._match_texts(("BREADTH", "DEPTH")) and self._prev.text.upper()
            if not kind or not self._match_text_seq("FIRST", "BY"):
                self.raise_error("Expected BREADTH FIRST BY or DEPTH FIRST BY after SEARCH")
                return
            columns = self._parse_csv(self._parse_id_var)
            if not self._match_text_seq("SET"):
                self.raise_error("Expected SET and the sequence column's name in the SEARCH clause")
                return
            search = SearchClause(this=self._parse_id_var(), kind=kind, expressions=columns)
            search.meta.update(line=start.line, col=start.col, start=start.start, end=start.end)
            cte.set("search", search)
        if self._match_text_seq("CYCLE"):
            start = self._prev
            columns = self._parse_csv(self._parse_id_var)
            if not self._match_text_seq("SET"):
                self.raise_error("Expected SET and the cycle mark column's name in the CYCLE clause")
                return
            mark = self._parse_id_var()
            to = default = None
            if self._match_text_seq("TO"):
                to = self._parse_bitwise()
                if not self._match(TokenType.DEFAULT):
                    self.raise_error("Expected DEFAULT after the CYCLE clause's TO value")
                    return
                default = self._parse_bitwise()
            if not self._match_text_seq("USING"):
                self.raise_error("Expected USING and the path column's name in the CYCLE clause")
                return
            cycle = CycleClause(this=mark, expressions=columns, to=to, default=default,
                                using=self._parse_id_var())
            cycle.meta.update(line=start.line, col=start.col, start=start.start, end=start.end)
            cte.set("cycle", cycle)

    def _take_max_recursion_level(self) -> int | None:
        """Spark's `name [(columns)] MAX RECURSION LEVEL n AS (...)`: the clause's tokens are taken
        out of the stream (sqlglot's CTE parser does not know it) and n returned."""
        i = self._index + 1  # past the name
        tokens = self._tokens
        if i < len(tokens) and tokens[i].token_type == TokenType.L_PAREN:
            depth = 0
            for j in range(i, len(tokens)):
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[j].token_type, 0)
                if depth == 0:
                    i = j + 1
                    break
        words = [t.text.upper() for t in tokens[i:i + 3]]
        if words != ["MAX", "RECURSION", "LEVEL"] or i + 3 >= len(tokens) \
                or tokens[i + 3].token_type != TokenType.NUMBER:
            return None
        level = int(tokens[i + 3].text)
        del tokens[i:i + 4]
        self._tokens_size = len(tokens)
        self._advance(0)  # refresh the lookahead after the change
        return level

    def _parse_function_parameter(self) -> exp.Expr | None:
        return self._parse_aggregate_column() or super()._parse_function_parameter()

    def _parse_aggregate_column(self) -> AggregateColumn | None:
        """`name() [AS] alias` or `mname [AS] alias`; anything else is not ours (retreat)."""
        start = self._index
        func_token = self._curr
        if not func_token or func_token.token_type == TokenType.STRING:  # falsy at the end
            return None
        self._advance()
        of = self._parse_payload_of() if func_token.text.upper() in PAYLOADS else None
        has_parens = of is not None or self._match_pair(TokenType.L_PAREN, TokenType.R_PAREN)
        if not has_parens and func_token.text.upper() not in PAREN_FREE_AGGREGATES:
            self._retreat(start)
            return None
        self._match(TokenType.ALIAS)
        alias = self._parse_id_var(any_token=False)
        if alias is None:
            self._retreat(start)
            return None
        column = AggregateColumn(this=alias, func=func_token.text, of=of)
        column.meta.update(line=func_token.line, col=func_token.col, start=func_token.start)
        return column


    def _parse_payload_of(self) -> exp.Identifier | None:
        """`(Cost)` after `argmin`: the one column it names, else None (nothing consumed)."""
        start = self._index
        if self._match(TokenType.L_PAREN):
            of = self._parse_id_var(any_token=False)
            if isinstance(of, exp.Identifier) and self._match(TokenType.R_PAREN):
                return of
        self._retreat(start)
        return None


def _lambda_bound(column: exp.Column, name: str) -> bool:
    """`name` is a parameter of a lambda around `column` (`transform(a, x -> x + 1)`)."""
    node = column.parent
    while node is not None:
        if isinstance(node, exp.Lambda) and name in {p.name.lower() for p in node.expressions}:
            return True
        node = node.parent
    return False


def _create_aggregate_sql(generator: SparkGenerator, expression: CreateAggregate) -> str:
    words = ["CREATE", *(["OR REPLACE"] if expression.args.get("replace") else []),
             *(["TEMPORARY"] if expression.args.get("temporary") else []), "AGGREGATE"]
    return (f"{' '.join(words)} {generator.sql(expression, 'this')}({generator.expressions(expression, flat=True)}) "
            f"RETURNS {generator.sql(expression, 'returns')} IDENTITY {generator.sql(expression, 'identity')} "
            f"RETURN {generator.sql(expression, 'merge')}")


def _drop_aggregate_sql(generator: SparkGenerator, expression: DropAggregate) -> str:
    temporary = " TEMPORARY" if expression.args.get("temporary") else ""
    exists = " IF EXISTS" if expression.args.get("exists") else ""
    return f"DROP{temporary} AGGREGATE{exists} {generator.sql(expression, 'this')}"


def _aggregate_column_sql(generator: SparkGenerator, expression: AggregateColumn) -> str:
    of = generator.sql(expression, "of")
    return f"{expression.func}({of}) AS {generator.sql(expression, 'this')}"


def _search_clause_sql(generator: SparkGenerator, expression: SearchClause) -> str:
    columns = generator.expressions(expression, flat=True)
    return f"SEARCH {expression.args['kind']} FIRST BY {columns} SET {generator.sql(expression, 'this')}"


def _cycle_clause_sql(generator: SparkGenerator, expression: CycleClause) -> str:
    columns = generator.expressions(expression, flat=True)
    values = ""
    if expression.args.get("to") is not None:
        values = f" TO {generator.sql(expression, 'to')} DEFAULT {generator.sql(expression, 'default')}"
    return (f"CYCLE {columns} SET {generator.sql(expression, 'this')}{values} "
            f"USING {generator.sql(expression, 'using')}")


# Where sqlglot's Spark generator renders a node into text of another meaning in Spark 4.3
# (each found by running every example of Spark's own function documentation through the
# dialect, tests/parser/test_spark_round_trip.py): Spark's own spelling instead.
def _instr_sql(generator: SparkGenerator, expression: exp.StrPosition) -> str:
    occurrence = expression.args.get("occurrence")
    if occurrence is None:
        return SparkGenerator.TRANSFORMS[exp.StrPosition](generator, expression)
    # `instr(s, sub, pos, occurrence)`: the hive form drops the occurrence
    return generator.func("INSTR", expression.this, expression.args.get("substr"),
                          expression.args.get("position") or exp.Literal.number(1), occurrence)


def _by_sql(name: str):
    def render(generator: SparkGenerator, expression: exp.ArgMax | exp.ArgMin) -> str:
        # `max_by(x, y, n)`: the hive form drops the count
        return generator.func(name, expression.this, expression.expression, expression.args.get("count"))
    return render


def _listagg_sql(generator: SparkGenerator, expression: exp.GroupConcat) -> str:
    # Spark's `listagg(x)` / `string_agg(x)` join with no delimiter; sqlglot supplied ','
    return groupconcat_sql(generator, expression, sep=None)


def _to_char_sql(generator: SparkGenerator, expression: exp.ToChar) -> str:
    # `to_char(x, format)` formats; sqlglot wrote a CAST to STRING, dropping the format
    if expression.args.get("format") is None:
        return generator.tochar_sql(expression)
    return generator.func("TO_CHAR", expression.this, expression.args.get("format"))


class RaSQLGenerator(SparkGenerator):
    TRANSFORMS = {
        **{node: render for node, render in SparkGenerator.TRANSFORMS.items()
           # `percentile_cont(p) WITHIN GROUP (ORDER BY x)` stays exact: Spark 4 has it, where
           # sqlglot wrote the approximate `percentile_approx(x, p)`
           if node is not exp.WithinGroup},
        exp.StrPosition: _instr_sql,
        exp.ArgMax: _by_sql("MAX_BY"),
        exp.ArgMin: _by_sql("MIN_BY"),
        exp.GroupConcat: _listagg_sql,
        exp.ToChar: _to_char_sql,
        TimeLiteral: lambda generator, e: f"TIME {generator.sql(e, 'this')}",
        AggregateColumn: _aggregate_column_sql,
        SearchClause: _search_clause_sql,
        CycleClause: _cycle_clause_sql,
        CreateAggregate: _create_aggregate_sql,
        DropAggregate: _drop_aggregate_sql,
    }
    # Spark 4 has TIME (sqlglot wrote TIMESTAMP) and the VARIANT constructor `parse_json`
    # (sqlglot dropped it, leaving the JSON text as a STRING)
    TYPE_MAPPING = {**SparkGenerator.TYPE_MAPPING, exp.DType.TIME: "TIME"}
    PARSE_JSON_NAME = "PARSE_JSON"

    def cte_sql(self, expression: exp.CTE) -> str:
        clauses = [self.sql(expression, key) for key in ("search", "cycle") if expression.args.get(key)]
        return " ".join([super().cte_sql(expression), *clauses])

    def refresh_sql(self, expression: exp.Refresh) -> str:
        mode = expression.args.get("mode")
        if mode is None:
            return super().refresh_sql(expression)
        plain = expression.copy()
        plain.set("mode", None)
        return f"{super().refresh_sql(plain)} {mode.name}"


class RaSQL(Spark):
    """Registered as `rasql` by sqlglot's dialect metaclass (the lower-cased class name)."""

    Parser = RaSQLParser
    Generator = RaSQLGenerator
