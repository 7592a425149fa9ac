"""The input record of a typed memory (what `remember`, `batch` and Brain Review hand the store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..store.notes import to_text_list


@dataclass
class MemoryInput:
    type: str
    title: str
    content: str
    memory_key: str | None = None
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    confidence: float | None = None
    scope: str | None = None  # "hive" (shared) | "private" | "task"; None = by caller identity
    task: str | None = None
    overrides: str | None = None
    origin: str | None = None
    # Extra frontmatter recording where a reviewed memory came from (review id, sources); set by
    # Brain Review only, never accepted from a caller's record.
    provenance: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryInput:
        if not isinstance(d, dict):
            raise UsageError("each record must be a JSON object")
        unknown = set(d) - (set(cls.__dataclass_fields__) - {"provenance"}) - {"memory_scope"}
        if unknown:
            raise UsageError(f"unknown field(s): {', '.join(sorted(unknown))}")
        d = dict(d)
        if "memory_scope" in d:
            d["scope"] = d.pop("memory_scope")
        d["tags"] = to_text_list(d.get("tags"))
        d["aliases"] = to_text_list(d.get("aliases"))
        for req in ("type", "title", "content"):
            if not isinstance(d.get(req), str):
                raise UsageError(f"field {req!r} is required and must be a string")
        return cls(**d)


def clean_confidence(c: Any) -> float | None:
    if c is None:
        return None
    try:
        v = float(c)
    except (TypeError, ValueError) as e:
        raise UsageError(f"confidence must be a number between 0 and 1, not {c!r}") from e
    if not 0.0 <= v <= 1.0:
        raise UsageError(f"confidence must be between 0 and 1, not {v}")
    return v
