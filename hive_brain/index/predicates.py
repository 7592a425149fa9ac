"""A tiny predicate language for boundaries that must run *inside* a query (DESIGN principle 5).

The same predicate is compiled to a tantivy query (``lexical.py``) and to a LanceDB SQL prefilter
(``vectors.py``), so the lexical and vector paths can never disagree about who may read what.
Fields are keyword fields of a passage document (see docs/architecture.md, "Passage document").
"""

from __future__ import annotations

from dataclasses import dataclass


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
