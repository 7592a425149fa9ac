"""Operational events and usage signals: receipts of what agents did, kept beside memory, never in it.

``record-operation`` (and its compatibility alias ``remember-action``) appends one event to
``<state>/operational-events.jsonl``; ``record-usage`` appends which memories a recall retrieved or
an answer used to ``<state>/usage-events.jsonl``. Both are per-device bounded logs outside the vault
(:mod:`..store.oplog`): they never sync, never crowd durable recall, and age out after two files.
Secrets are refused with the same check as ``remember``. Mining them for patterns is :mod:`.patterns`.

Who reads what: the owner (no agent id) sees every event; an agent sees its own and those recorded
without an agent, the same rule as private memory.

On disk an event is snake_case (``id``, ``ts``, ``title``, ``content``, ``operation_key``,
``failure_key``, ``outcome``, ``task_id``, ``agent``); :func:`event_json` gives the camelCase form
the CLI prints.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import validate_agent_id
from ..errors import HiveBrainError, UsageError
from ..store.ids import new_ulid, now_iso
from ..store.oplog import EventLog

if TYPE_CHECKING:
    import datetime as dt

OPERATIONS_FILE = "operational-events.jsonl"
USAGE_FILE = "usage-events.jsonl"
OUTCOMES = ("success", "failure")
USAGE_KINDS = ("retrieved", "final-answer")
_COUNT_FIELD = {"retrieved": "retrieved", "final-answer": "finalAnswer"}  # usage_counts' keys (camelCase)
MAX_TITLE = 300
MAX_KEY = 200
MAX_USAGE_IDS = 100
_KEY_OK = re.compile(r"[a-z0-9][a-z0-9._:/+#@-]*")
_ID_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,119}")


def operation_log(state: Path) -> EventLog:
    return EventLog(Path(state) / OPERATIONS_FILE)


def usage_log(state: Path) -> EventLog:
    return EventLog(Path(state) / USAGE_FILE)


def clean_key(value: str | None, what: str, *, required: bool) -> str | None:
    """Keys group events: lowercased, inner spaces turned into '-', a small alphabet."""
    key = "-".join((value or "").strip().lower().split())
    if not key:
        if required:
            raise UsageError(f"{what} is empty", hint="name the operation, e.g. 'deploy.web' or 'ci.flaky-test'")
        return None
    if len(key) > MAX_KEY:
        raise UsageError(f"{what} is over {MAX_KEY} characters", hint="keys name a kind of operation, not its detail")
    if not _KEY_OK.fullmatch(key):
        raise UsageError(f"{what} {key!r} has characters a key may not hold",
                         hint="use letters, digits and . _ : / + # @ -, e.g. 'deploy.web'")
    return key


def record_operation(state: Path, *, title: str, content: str, operation_key: str, outcome: str, task_id: str,
                     failure_key: str | None = None, agent: str | None = None) -> dict[str, Any]:
    """Validate, refuse secrets, append one event; returns it (camelCase) with where it went."""
    title = " ".join((title or "").split())
    if not title:
        raise UsageError("title is empty", hint="say what was done, e.g. 'Deployed the web app'")
    if len(title) > MAX_TITLE:
        raise UsageError(f"title is over {MAX_TITLE} characters", hint="put detail in --content")
    outcome = (outcome or "").strip().lower()
    if outcome not in OUTCOMES:
        raise UsageError(f"outcome {outcome!r} is neither success nor failure", hint="pass --outcome success|failure")
    op_key = clean_key(operation_key, "the operation key", required=True)
    fail_key = clean_key(failure_key, "the failure key", required=False)
    task = (task_id or "").strip()
    if not task:
        raise UsageError("task id is empty", hint="pass the id of the task this was part of (--task-id)")
    if len(task) > MAX_KEY:
        raise UsageError(f"task id is over {MAX_KEY} characters")
    who = validate_agent_id(agent) if agent is not None else None
    # Here, not at import: automatic usage logging (the prompt hook) needs none of it.
    from ..store.secrets import check_secrets
    from ..store.text import check_text

    content = content or ""
    for text, what in ((title, "the title"), (content, "content"), (op_key or "", "the operation key"),
                       (fail_key or "", "the failure key"), (task, "the task id")):
        check_text(text, what)
    check_secrets(title=title, content=content, operation_key=op_key, failure_key=fail_key, task_id=task)
    event = {"id": "op-" + new_ulid().lower(), "ts": now_iso(), "title": title, "content": content,
             "operation_key": op_key, "failure_key": fail_key, "outcome": outcome, "task_id": task, "agent": who}
    log = operation_log(state)
    log.append(event)
    return {"status": "recorded", "id": event["id"], "event": event_json(event), "journal": str(log.path),
            "durableMemoryWritten": False}


def log_warnings(state: Path) -> list[str]:
    """What ``doctor`` says about the operational and usage logs: unreadable lines it reads around."""
    return [w for log in (operation_log(state), usage_log(state)) if (w := log.check())]


def event_json(ev: dict[str, Any]) -> dict[str, Any]:
    return {"id": ev.get("id"), "kind": "operational", "ts": ev.get("ts"), "title": ev.get("title"),
            "content": ev.get("content"), "operationKey": ev.get("operation_key"),
            "failureKey": ev.get("failure_key"), "outcome": ev.get("outcome"), "taskId": ev.get("task_id"),
            "agent": ev.get("agent")}


def visible_events(state: Path, agent: str | None) -> list[dict[str, Any]]:
    """Every readable event, oldest first (owner: all; an agent: its own and agentless ones)."""
    evs = [e for e in operation_log(state).read() if e.get("id") and e.get("operation_key")]
    if agent:
        evs = [e for e in evs if not e.get("agent") or e.get("agent") == agent]
    return evs


def search_operations(state: Path, query: str, *, agent: str | None, limit: int = 10) -> list[dict[str, Any]]:
    """Events that match ``query`` for recall's ``--include-operational``: kept apart from the ranked
    hits (a separate list, so no ranking weight changes), best covered first, then newest. An event
    must contain at least half of the question's content words, the bar recall's lexical abstention
    sets for a note."""
    from ..index.textproc import content_words

    words = set(content_words(query))
    if not words:
        return []
    scored: list[tuple[float, str, dict[str, Any]]] = []
    for ev in visible_events(state, agent):
        text = " ".join(str(ev.get(k) or "") for k in ("title", "content", "operation_key", "failure_key", "task_id"))
        have = words & set(content_words(text.replace(".", " ").replace("/", " ")) + content_words(text))
        cover = len(have) / len(words)
        if cover >= 0.5:
            scored.append((cover, str(ev.get("id")), ev))
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)  # ULIDs sort by time: newest first on ties
    return [{**event_json(ev), "coverage": round(cover, 3)} for cover, _id, ev in scored[:limit]]


def record_usage(state: Path, memory_ids: list[str], kind: str, *, agent: str | None = None,
                 query: str | None = None, timeout: float | None = None) -> dict[str, Any]:
    """One usage record: which memories a recall retrieved, or an answer ended up using. ``timeout``
    bounds the wait for the log's lock (default: the log's own)."""
    kind = (kind or "").strip().lower()
    if kind not in USAGE_KINDS:
        raise UsageError(f"usage kind {kind!r} is unknown", hint="pass --kind retrieved or --kind final-answer")
    ids = list(dict.fromkeys(i.strip() for raw in memory_ids for i in str(raw).split(",") if i.strip()))
    if not ids:
        raise UsageError("no memory ids given", hint="pass --memory-ids mem-a,mem-b")
    if len(ids) > MAX_USAGE_IDS:
        raise UsageError(f"at most {MAX_USAGE_IDS} memory ids per record, got {len(ids)}", hint="record them in parts")
    bad = [i for i in ids if not _ID_OK.fullmatch(i)]
    if bad:
        raise UsageError(f"{bad[0]!r} is not a memory id", hint="ids look like mem-01j...; find them with `recall --json`")
    who = validate_agent_id(agent) if agent is not None else None
    q = None
    if query:
        from ..store.secrets import check_secrets
        from ..store.text import clean_text

        q = " ".join(clean_text(query).split())[:500] or None
        if q:
            check_secrets(query=q)
    rec = {"id": "use-" + new_ulid().lower(), "ts": now_iso(), "kind": kind, "memory_ids": ids, "agent": who,
           "query": q}
    log = usage_log(state)
    if timeout is None:
        log.append(rec)
    else:
        log.append(rec, timeout=timeout)
    return {"status": "recorded", "id": rec["id"], "kind": kind, "memoryIds": ids, "agent": who,
            "log": str(log.path)}


def log_retrieved(state: Path, items: list[dict[str, Any]], *, agent: str | None,
                  timeout: float | None = None) -> None:
    """The memories among what a read returned (``answer``'s pack items, the hook's injected items, an
    MCP recall's hits), logged as ``retrieved`` usage with no query (a question may hold what a secret
    check would refuse). Never fails the read: a full disk or a busy log (past ``timeout``) loses this
    one signal, nothing else. Light on purpose: the prompt hook calls it (no YAML, no index)."""
    ids = list(dict.fromkeys(str(it["id"]) for it in items if it.get("kind") == "memory" and it.get("id")))
    if not ids:
        return
    try:
        record_usage(state, ids[:MAX_USAGE_IDS], "retrieved", agent=agent, timeout=timeout)
    except (OSError, HiveBrainError):
        pass


def _since_text(since: dt.datetime | dt.date | str | None) -> str | None:
    """``since`` as the text form records carry (``YYYY-MM-DDTHH:MM:SSZ``), so a plain string compare
    selects records at or after it."""
    import datetime as dt  # here: the prompt hook imports this module and never reads counts

    if since is None:
        return None
    if isinstance(since, str):
        try:
            since = dt.datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"since {since!r} is not an ISO 8601 date or date-time", hint="e.g. 2026-11-01") from None
    if not isinstance(since, dt.datetime):
        since = dt.datetime(since.year, since.month, since.day, tzinfo=dt.UTC)
    if since.tzinfo is None:
        since = since.replace(tzinfo=dt.UTC)
    return since.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def usage_counts(state: Path, *, kind: str | None = None,
                 since: dt.datetime | dt.date | str | None = None) -> dict[str, dict[str, Any]]:
    """memory id -> ``{"retrieved": n, "finalAnswer": n, "last": ts}`` over what the usage log still
    holds (this device only). ``kind`` counts only ``retrieved`` or ``final-answer`` records (the other
    count stays 0); ``since`` only records at or after it; ``last`` is the newest counted record's
    time (ISO 8601, UTC). A memory no counted record names is absent. A stable API: promotion reads it.
    """
    if kind is not None and kind not in USAGE_KINDS:
        raise UsageError(f"usage kind {kind!r} is unknown", hint="pass retrieved or final-answer")
    after = _since_text(since)
    counts: dict[str, dict[str, Any]] = {}
    for rec in usage_log(state).read():
        k = rec.get("kind")
        if k not in USAGE_KINDS or (kind is not None and k != kind):
            continue
        ts = str(rec.get("ts") or "")
        if after is not None and ts < after:
            continue
        field = _COUNT_FIELD[k]
        for mid in rec.get("memory_ids") or []:
            c = counts.setdefault(str(mid), {"retrieved": 0, "finalAnswer": 0, "last": None})
            c[field] += 1
            if ts and (c["last"] is None or ts > c["last"]):
                c["last"] = ts
    return counts
