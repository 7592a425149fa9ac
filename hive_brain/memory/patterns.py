"""Mining operational events for what keeps happening: recurring failures, workflows and routines.

The rules (each a constant below, each with its reason):

- **Test noise is dropped first.** An event whose task id or agent *starts with* a test word
  (``test``, ``tests``, ``fixture``, ``pytest``, ``dummy``, ``example``, ``sample``, ``tmp``,
  ``temp``, then a separator, a digit or the end: ``test-42``, ``fixture_a``, ``pytest7``), or whose
  title is marked as one (``[test] ...``, ``test: ...``, ``fixture: ...``), came from a test run or a
  fixture, not from work. Words *inside* a key stay work: ``ci.run-tests`` is a real operation.
- **Distinct tasks, not events, count.** A pattern needs ``MIN_TASKS`` (3) distinct task ids: one
  task retrying the same thing forty times is that task's problem, not a pattern.
- **Recurring failure**: failure events grouped by ``failure_key`` (else by operation key). Its
  evidence also lists how tasks got past it: the success of the same operation that followed the
  failure in the same task.
- **Workflow**: each task's events in time order, as operation keys with repeats (retries) collapsed;
  a run of 2 to ``MAX_STEPS`` keys that recurs *contiguously* in ``MIN_TASKS`` tasks. Only maximal
  runs are kept (a sub-run seen in no task beyond the longer run's is the same workflow).
- **Routine**: a successful operation repeated across ``MIN_TASKS`` tasks, unless it recurs only as a
  step of a reported workflow or as the fix of a reported failure (then that pattern says it).

Every suggestion carries its evidence: event ids, tasks, agents, first and last seen. ``--enqueue``
turns suggestions into Brain Review proposals (kind ``pattern``; a failure proposes a ``lesson``, a
workflow or routine a ``procedure``), once each: a pattern already proposed, whatever its status,
is not proposed again. Never memory: the owner approves and applies.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict
from typing import Any

from ..errors import UsageError
from ..store.notes import render
from .layers import require_owner
from .proposals import build_proposal, proposal_entries
from .store import MemoryStore

MIN_TASKS = 3
MAX_STEPS = 5
MAX_EVIDENCE_IDS = 20
SYSTEM = "hive-brain"  # proposer of what hive-brain itself found

_TEST_WORDS = r"(?:tests?|testing|fixtures?|pytest|dummy|example|sample|tmp|temp)"
_NOISE_ID = re.compile(rf"^{_TEST_WORDS}(?:[-_.:/#\s]|\d|$)", re.IGNORECASE)
_NOISE_TITLE = re.compile(rf"^\s*(?:\[{_TEST_WORDS}\]|{_TEST_WORDS}\s*:)", re.IGNORECASE)


def is_test_noise(ev: dict[str, Any]) -> bool:
    for k in ("task_id", "agent"):
        if _NOISE_ID.match(str(ev.get(k) or "")):
            return True
    return bool(_NOISE_TITLE.match(str(ev.get("title") or "")))


def parse_since(value: str | None, *, now: dt.datetime | None = None, ahead: bool = False,
                option: str = "--since") -> str | None:
    """``--since``: a date (``2026-11-01``), an ISO time, or an age (``7d``, ``12h``, ``30m``); returns
    the ISO-8601 UTC instant (``...Z``) events must be at or after. ``ahead``: an age counts forward
    from ``now`` instead (``capsule-export --expires 30d``)."""
    if not value or not value.strip():
        return None
    v = value.strip()
    now = now or dt.datetime.now(dt.UTC)
    m = re.fullmatch(r"(\d+)\s*([dhm])", v, re.IGNORECASE)
    if m:
        n, unit = int(m.group(1)), m.group(2).lower()
        delta = {"d": dt.timedelta(days=n), "h": dt.timedelta(hours=n), "m": dt.timedelta(minutes=n)}[unit]
        t = now + delta if ahead else now - delta
    else:
        try:
            t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"{option} {v!r} is neither a date nor an age",
                             hint="use e.g. 2026-11-01, 2026-11-01T09:00:00Z or 7d") from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.UTC)
    return t.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _evidence(evs: list[dict[str, Any]]) -> dict[str, Any]:
    evs = sorted(evs, key=lambda e: str(e.get("id")))
    tasks = sorted({str(e.get("task_id")) for e in evs})
    return {
        "events": len(evs),
        "eventIds": [str(e.get("id")) for e in evs[-MAX_EVIDENCE_IDS:]],  # the newest, when there are many
        "tasks": tasks,
        "agents": sorted({str(e.get("agent")) for e in evs if e.get("agent")}),
        "firstSeen": str(evs[0].get("ts")),
        "lastSeen": str(evs[-1].get("ts")),
    }


def _runs(keys: list[str]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for n in range(2, MAX_STEPS + 1):
        for i in range(len(keys) - n + 1):
            run = tuple(keys[i:i + n])
            if len(set(run)) == n:  # a loop (a, b, a) is retries, not steps
                out.add(run)
    return out


def _contains(big: tuple[str, ...], small: tuple[str, ...]) -> bool:
    n = len(small)
    return any(big[i:i + n] == small for i in range(len(big) - n + 1))


def mine(events: list[dict[str, Any]], *, since: str | None = None, min_tasks: int = MIN_TASKS) -> dict[str, Any]:
    """Suggestions from ``events`` (on-disk records, any order). Pure: reads nothing, writes nothing."""
    if since:
        events = [e for e in events if str(e.get("ts") or "") >= since]
    work = [e for e in events if not is_test_noise(e)]
    noise = len(events) - len(work)
    work.sort(key=lambda e: str(e.get("id")))  # ULIDs: time order (ms), then random within a ms
    patterns: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []

    def judge(kind: str, key: str, evs: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
        tasks = {str(e.get("task_id")) for e in evs}
        if len(tasks) >= min_tasks:
            patterns.append({"kind": kind, "key": key, **(extra or {}), "evidence": _evidence(evs)})
        elif len(evs) >= min_tasks:
            # Many events, too few tasks: one task repeating itself.
            rejected.append({"kind": kind, "key": key, "events": len(evs), "tasks": sorted(tasks),
                             "reason": f"only {len(tasks)} distinct task(s); a pattern needs {min_tasks}"})

    # Recurring failures, with how tasks got past them.
    failures: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in work:
        if e.get("outcome") == "failure":
            failures[str(e.get("failure_key") or e.get("operation_key"))].append(e)
    successes: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)  # (task, operation) -> in order
    for e in work:
        if e.get("outcome") == "success":
            successes[(str(e.get("task_id")), str(e.get("operation_key")))].append(e)
    for key, evs in sorted(failures.items()):
        fixes: Counter[str] = Counter()
        last_failure = {(str(e.get("task_id")), str(e.get("operation_key"))): str(e.get("id")) for e in evs}
        for t, failed_at in last_failure.items():
            fix = next((e for e in successes.get(t, ()) if str(e.get("id")) > failed_at), None)
            if fix is not None:
                fixes[str(fix.get("content") or fix.get("title"))] += 1
        ops = sorted({str(e.get("operation_key")) for e in evs})
        judge("failure", key, evs, {"operations": ops,
                                     "resolutions": [{"text": t, "tasks": n} for t, n in fixes.most_common(3)]})

    # Workflows: contiguous runs of operation keys recurring across tasks.
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in work:
        by_task[str(e.get("task_id"))].append(e)
    seqs: dict[str, list[str]] = {}
    for task, evs in by_task.items():
        keys: list[str] = []
        for e in evs:
            k = str(e.get("operation_key"))
            if not keys or keys[-1] != k:
                keys.append(k)
        seqs[task] = keys
    support: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for task, keys in seqs.items():
        for run in _runs(keys):
            support[run].add(task)
    frequent = {run: tasks for run, tasks in support.items() if len(tasks) >= min_tasks}
    workflows: list[tuple[tuple[str, ...], set[str]]] = []
    for run, tasks in sorted(frequent.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        longer = [t for big, t in workflows if _contains(big, run)]
        if longer and len(tasks - set().union(*longer)) < min_tasks:
            continue  # the same workflow, seen as part of a longer one
        workflows.append((run, tasks))
    explained: dict[str, set[str]] = defaultdict(set)  # operation key -> tasks a reported pattern covers
    for p in patterns:
        if p["kind"] == "failure":
            for op in p["operations"]:
                explained[op] |= set(p["evidence"]["tasks"])
    for run, tasks in workflows:
        steps = set(run)
        evs = [e for t in tasks for e in by_task[t] if str(e.get("operation_key")) in steps]
        patterns.append({"kind": "workflow", "key": " -> ".join(run), "steps": list(run),
                         "evidence": _evidence(evs)})
        for k in run:
            explained[k] |= tasks

    # Routines: successful operations repeated across tasks, beyond the workflows they are steps of
    # and the failures they are the fix of.
    routines: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (_task, op), evs in successes.items():
        routines[op] += evs
    for key, evs in sorted(routines.items()):
        tasks = {str(e.get("task_id")) for e in evs}
        if key in explained and len(tasks) >= min_tasks and len(tasks - explained[key]) < min_tasks:
            continue  # told by a reported workflow or failure; seldom done on its own
        judge("routine", key, evs)

    order = {"failure": 0, "workflow": 1, "routine": 2}
    patterns.sort(key=lambda p: (order[p["kind"]], -len(p["evidence"]["tasks"]), p["key"]))
    return {"events": len(events), "testNoise": noise, "considered": len(work), "tasks": len(by_task),
            "minTasks": min_tasks, "since": since, "patterns": patterns, "rejected": rejected}


def pattern_id(p: dict[str, Any]) -> str:
    """What identifies a pattern across runs (and its proposal): kind and key."""
    return f"{p['kind']}:{p['key']}"


def proposal_of(p: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    """(memory fields, content, reason) of the memory a pattern would become."""
    ev = p["evidence"]
    span = f"{ev['firstSeen']} .. {ev['lastSeen']}"
    who = ", ".join(ev["agents"]) or "no agent named"
    tasks = ", ".join(ev["tasks"][:10]) + (f" (+{len(ev['tasks']) - 10} more)" if len(ev["tasks"]) > 10 else "")
    if p["kind"] == "failure":
        title = f"Recurring failure: {p['key']}"
        lines = [f"`{p['key']}` failed in {len(ev['tasks'])} tasks ({span}; agents: {who}).",
                 f"Operations: {', '.join(p.get('operations') or [])}."]
        if p.get("resolutions"):
            lines.append("How tasks got past it:")
            lines += [f"- {r['text']} ({r['tasks']}x)" for r in p["resolutions"]]
        mem_type = "lesson"
    elif p["kind"] == "workflow":
        title = f"Workflow: {p['key']}"
        lines = [f"In {len(ev['tasks'])} tasks ({span}; agents: {who}) these steps ran in this order:"]
        lines += [f"{i}. `{s}`" for i, s in enumerate(p["steps"], 1)]
        mem_type = "procedure"
    else:
        title = f"Routine: {p['key']}"
        lines = [f"`{p['key']}` was done successfully in {len(ev['tasks'])} tasks ({span}; agents: {who})."]
        mem_type = "procedure"
    lines += ["", f"Evidence: tasks {tasks}; events {', '.join(ev['eventIds'][-5:])}."]
    fields = {"type": mem_type, "title": title[:300], "memory_key": None, "project": None, "tags": ["pattern"],
              "aliases": None, "confidence": None}
    reason = (f"mine-patterns: {p['kind']} seen in {len(ev['tasks'])} distinct tasks, {ev['events']} events, "
              f"{span}")
    return fields, "\n".join(lines) + "\n", reason


def enqueue(store: MemoryStore, report: dict[str, Any]) -> dict[str, Any]:
    """Stage one Brain Review proposal (kind ``pattern``) per new suggestion, in one unit of work."""
    require_owner(store.settings, "queueing pattern proposals (they quote every agent's events)", always=True)
    proposed: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    with store.transaction("mine-patterns") as tx:
        known = {str(e.meta.get("pattern")): e for e in proposal_entries(tx.catalog)
                 if e.meta.get("kind") == "pattern" and e.meta.get("pattern")}
        taken: set[str] = set()
        for p in report["patterns"]:
            pid = pattern_id(p)
            if pid in known:
                e = known[pid]
                skipped.append({"pattern": pid, "reason": f"already proposed as {e.id} ({e.status})"})
                continue
            fields, content, reason = proposal_of(p)
            path, meta, _text = build_proposal(kind="pattern", proposed_by=SYSTEM, fields=fields, content=content,
                                               reason=reason, sources=p["evidence"]["eventIds"],
                                               source_agents=p["evidence"]["agents"], taken=taken,
                                               exists=lambda q: store.vault.abs(q).exists())
            meta["pattern"] = pid  # what makes the next run skip it
            tx.write(path, render(meta, content), expect_old="")
            proposed.append({"pattern": pid, "proposal": meta["id"], "path": path, "type": fields["type"],
                             "title": fields["title"]})
    return {"proposed": proposed, "skipped": skipped}
