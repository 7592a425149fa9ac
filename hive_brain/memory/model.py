"""The input record of a typed memory (what `remember`, `batch` and Brain Review hand the store)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import UsageError
from ..store.notes import to_text_list
from ..store.text import check_text

# The memory types a write accepts (DESIGN.md: preference, instruction, decision, ...). A user adds
# their own with the `memory_types` setting. Only writes are checked: a hand-written note of any
# type is indexed and recalled as it is.
MEMORY_TYPES: tuple[str, ...] = (
    "instruction", "preference", "decision", "lesson", "procedure", "fact", "quirk", "person", "project",
)


def known_types(extra: str | Iterable[str] | None = None) -> list[str]:
    """The built-in types plus ``extra`` (the ``memory_types`` setting: comma-separated or a list)."""
    more = extra.split(",") if isinstance(extra, str) else list(extra or ())
    names = list(MEMORY_TYPES)
    for t in (str(x).strip().lower() for x in more):
        if t and t not in names:
            names.append(t)
    return names


def check_type(mem_type: str, extra: str | Iterable[str] | None = None) -> str:
    """``mem_type`` normalised, or a UsageError naming the valid types (and the nearest one)."""
    import difflib

    t = mem_type.strip().lower()
    allowed = known_types(extra)
    if t in allowed:
        return t
    near = difflib.get_close_matches(t, allowed, n=1, cutoff=0.6)
    guess = f" (did you mean {near[0]!r}?)" if near else ""
    name = t if t and not near else "<name>"
    raise UsageError(
        f"unknown memory type {mem_type!r}{guess}; valid types: {', '.join(allowed)}",
        hint=f"to add your own: `hive-brain config set memory_types {name}`",
    )


@dataclass
class MemoryInput:
    type: str
    title: str
    content: str
    memory_key: str | None = None
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    # Questions a later reader would ask that this memory answers (the writer's 3-5 phrasings): searched
    # as the title is. A question may hold commas, so a string is one question, never a comma list.
    questions: list[str] = field(default_factory=list)
    confidence: float | None = None
    scope: str | None = None  # "hive" (shared) | "private" | "task"; None = by caller identity
    task: str | None = None
    overrides: str | None = None
    origin: str | None = None
    # Where it was learned (``{"conversation", "excerpt", "turn"}``): a transcript, a conversation note
    # or a session id, and the words quoted from it. Resolved and checked by MemoryStore.remember
    # (memory.conversations.conversation_evidence) into ``provenance["evidence"]``, which a Brain
    # Review proposal shows its reviewer.
    evidence: dict[str, Any] | None = None
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
        for name in ("tags", "aliases"):
            v = d.get(name)
            if not (v is None or isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))):
                raise UsageError(f"field {name!r} must be a list of strings (or one comma-separated string)")
            d[name] = to_text_list(v)
        d["questions"] = question_list(d.get("questions"))
        for req in ("type", "title", "content"):
            if not isinstance(d.get(req), str):
                raise UsageError(f"field {req!r} is required and must be a string")
        ev = d.get("evidence")
        if ev is not None:
            if not isinstance(ev, dict) or set(ev) - {"conversation", "excerpt", "turn"}:
                raise UsageError("field 'evidence' must be an object with conversation, excerpt and turn")
            if not isinstance(ev.get("conversation"), str) or not ev["conversation"].strip():
                raise UsageError("evidence needs its conversation: a transcript file, a conversation note or a session id")
            if ev.get("excerpt") is not None and not isinstance(ev["excerpt"], str):
                raise UsageError("the evidence's excerpt must be a string")
            t = ev.get("turn")
            if t is not None and (isinstance(t, bool) or not isinstance(t, int)):
                raise UsageError("the evidence's turn must be a whole number")
        for opt in ("memory_key", "project", "scope", "task", "overrides", "origin"):
            if d.get(opt) is not None and not isinstance(d[opt], str):
                raise UsageError(f"field {opt!r} must be a string")
        return cls(**d)

    def check(self) -> None:
        """Every text field under the one rule (:func:`hive_brain.store.text.check_text`)."""
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, str):
                check_text(v, "the " + f.name.replace("_", " "))
            elif isinstance(v, list):
                for x in v:
                    check_text(str(x), f"a value in {f.name}")
            elif f.name == "evidence" and isinstance(v, dict):
                for k, x in v.items():
                    if isinstance(x, str):
                        check_text(x, f"the evidence's {k}")


MAX_QUESTIONS = 10
MAX_QUESTION_CHARS = 300


def question_list(v: Any) -> list[str]:
    """``questions`` as a list: one string is one question (it may hold commas); a wrong shape, too
    many or too long ones are a UsageError (they are searched on every recall)."""
    if v is None:
        return []
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
        raise UsageError("field 'questions' must be a list of strings")
    out = [" ".join(x.split()) for x in v if x.strip()]
    if len(out) > MAX_QUESTIONS:
        raise UsageError(f"at most {MAX_QUESTIONS} questions, not {len(out)}", hint="keep the 3-5 a reader is likeliest to ask")
    for q in out:
        if len(q) > MAX_QUESTION_CHARS:
            raise UsageError(f"a question is over {MAX_QUESTION_CHARS} characters: {q[:40]!r}...", hint="ask it shorter")
    return out


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
