"""A tiny predicate language for boundaries that must run *inside* a query (DESIGN principle 5).

The same predicate is compiled to a tantivy query (``lexical.py``) and to a LanceDB SQL prefilter
(``vectors.py``), so the lexical and vector paths can never disagree about who may read what.
Fields are keyword fields of a passage document (see docs/architecture.md, "Passage document").
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tantivy


@dataclass(frozen=True)
class Eq:
    field: str
    value: str


@dataclass(frozen=True)
class In:
    field: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Range:
    """Inclusive integer range on an i64 field (dates are unix seconds); None = open end."""

    field: str
    lo: int | None = None
    hi: int | None = None


@dataclass(frozen=True)
class And:
    parts: tuple[Pred, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Pred, ...]


@dataclass(frozen=True)
class Not:
    part: Pred


Pred = Eq | In | Range | And | Or | Not


def all_of(*parts: Pred | None) -> Pred | None:
    ps = tuple(p for p in parts if p is not None)
    if not ps:
        return None
    return ps[0] if len(ps) == 1 else And(ps)


def any_of(*parts: Pred) -> Pred:
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def _sql_str(v: str) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def _sql_ident(f: str) -> str:
    if not f.replace("_", "").isalnum():
        raise ValueError(f"bad field name {f!r}")
    return f"`{f}`"


def to_sql(p: Pred | None) -> str | None:
    """Compile to a LanceDB/DataFusion SQL WHERE clause."""
    if p is None:
        return None
    if isinstance(p, Eq):
        return f"{_sql_ident(p.field)} = {_sql_str(p.value)}"
    if isinstance(p, In):
        if not p.values:
            return "FALSE"
        return f"{_sql_ident(p.field)} IN ({', '.join(_sql_str(v) for v in p.values)})"
    if isinstance(p, Range):
        parts = []
        if p.lo is not None:
            parts.append(f"{_sql_ident(p.field)} >= {int(p.lo)}")
        if p.hi is not None:
            parts.append(f"{_sql_ident(p.field)} <= {int(p.hi)}")
        return " AND ".join(parts) or "TRUE"
    if isinstance(p, And):
        return "(" + " AND ".join(to_sql(x) or "TRUE" for x in p.parts) + ")"
    if isinstance(p, Or):
        return "(" + " OR ".join(to_sql(x) or "TRUE" for x in p.parts) + ")"
    if isinstance(p, Not):
        return f"(NOT {to_sql(p.part)})"
    raise TypeError(p)


def matches(p: Pred | None, row: dict) -> bool:
    """Evaluate in Python (for tests and for the replay path's sanity checks)."""
    if p is None:
        return True
    if isinstance(p, Eq):
        return str(row.get(p.field, "")) == p.value
    if isinstance(p, In):
        return str(row.get(p.field, "")) in p.values
    if isinstance(p, Range):
        v = row.get(p.field)
        if v is None:
            return False
        return (p.lo is None or v >= p.lo) and (p.hi is None or v <= p.hi)
    if isinstance(p, And):
        return all(matches(x, row) for x in p.parts)
    if isinstance(p, Or):
        return any(matches(x, row) for x in p.parts)
    if isinstance(p, Not):
        return not matches(p.part, row)
    raise TypeError(p)


def to_tantivy(p: Pred, schema: Any, *, keyword_fields: Collection[str], int_fields: Collection[str]) -> tantivy.Query:
    """Compile to a tantivy query over ``schema`` (a filter: it adds nothing to the score)."""
    import tantivy  # here: the predicate algebra itself is imported on the light hook path

    def kw(name: str) -> str:
        if name not in keyword_fields:
            raise ValueError(f"predicates apply to keyword fields {tuple(keyword_fields)} or {tuple(int_fields)}, not {name!r}")
        return name

    def rng(f: str, lo: int | None, hi: int | None) -> tantivy.Query:
        if lo is None and hi is None:
            return tantivy.Query.all_query()
        return tantivy.Query.range_query(schema, f, tantivy.FieldType.Integer,
                                         None if lo is None else int(lo), None if hi is None else int(hi))

    def clause(q: Pred) -> tuple[tantivy.Occur, tantivy.Query]:
        if isinstance(q, Not):
            return (tantivy.Occur.MustNot, compile_(q.part))
        return (tantivy.Occur.Must, compile_(q))

    def compile_(q: Pred) -> tantivy.Query:
        if isinstance(q, Eq):
            if q.field in int_fields:
                return rng(q.field, int(q.value), int(q.value))
            return tantivy.Query.term_query(schema, kw(q.field), str(q.value), index_option="basic")
        if isinstance(q, In):
            if not q.values:
                return tantivy.Query.empty_query()
            if q.field in int_fields:
                return tantivy.Query.boolean_query(
                    [(tantivy.Occur.Should, rng(q.field, int(v), int(v))) for v in q.values])
            return tantivy.Query.term_set_query(schema, kw(q.field), [str(v) for v in q.values])
        if isinstance(q, Range):
            if q.field not in int_fields:
                raise ValueError(f"Range needs an integer field {tuple(int_fields)}, not {q.field!r}")
            return rng(q.field, q.lo, q.hi)
        if isinstance(q, And):
            if not q.parts:
                return tantivy.Query.all_query()
            return tantivy.Query.boolean_query([clause(x) for x in q.parts]
                                               + [(tantivy.Occur.Must, tantivy.Query.all_query())])
        if isinstance(q, Or):
            if not q.parts:
                return tantivy.Query.empty_query()
            return tantivy.Query.boolean_query([(tantivy.Occur.Should, compile_(x)) for x in q.parts])
        if isinstance(q, Not):
            # A BooleanQuery made only of MUST_NOT matches nothing in tantivy: anchor it on all docs.
            return tantivy.Query.boolean_query([
                (tantivy.Occur.Must, tantivy.Query.all_query()),
                (tantivy.Occur.MustNot, compile_(q.part)),
            ])
        raise TypeError(f"not a predicate: {q!r}")

    return compile_(p)
