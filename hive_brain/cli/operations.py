"""Commands for operational events and usage signals: record-operation (and its alias remember-action),
mine-patterns, record-usage."""

from __future__ import annotations

import sys
from typing import Any

import click

from .base import State, command, out, say


def _operation_options(fn: Any) -> Any:
    opts = [
        click.option("--title", required=True, help="What was done, in one line."),
        click.option("--content", required=True, help="Detail (what failed, how it was fixed). Use - for standard input."),
        click.option("--operation-key", required=True, help="The kind of operation, e.g. deploy.web or ci.run-tests."),
        click.option("--failure-key", default=None, help="What went wrong, e.g. ci.flaky-login-test (for failures)."),
        click.option("--outcome", type=click.Choice(["success", "failure"]), required=True),
        click.option("--task-id", required=True, help="The task this was part of (patterns count distinct tasks)."),
        click.option("--agent", "event_agent", default=None, metavar="ID",
                     help="Agent that did it (default: --agent before the command, or $HIVE_AGENT_ID)."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _record(state: State, title: str, content: str, operation_key: str, failure_key: str | None, outcome: str,
            task_id: str, event_agent: str | None, as_json: bool) -> None:
    from ..memory.operations import record_operation

    if content == "-":
        content = sys.stdin.read()
    eng = state.engine()
    res = record_operation(eng.vault.state, title=title, content=content, operation_key=operation_key,
                           failure_key=failure_key, outcome=outcome, task_id=task_id,
                           agent=event_agent if event_agent is not None else eng.settings.agent_id)
    say(as_json, res, lambda: f"Recorded {res['id']} ({outcome}, {res['event']['operationKey']}) → {res['journal']}")


@command("record-operation")
@_operation_options
def record_operation_cmd(state: State, title: str, content: str, operation_key: str, failure_key: str | None,
                         outcome: str, task_id: str, event_agent: str | None, as_json: bool) -> None:
    """Log a routine completion, handoff or retry to the operational journal (not memory).

    The journal is per device, outside the vault (<state>/operational-events.jsonl, rotated to one .1
    at 8 MB); recall shows events only with --include-operational, and mine-patterns turns recurring
    ones into Brain Review proposals. Secrets are refused as for remember.

    \b
    Example:
      hive-brain record-operation --title "Deploy failed: migration lock" --content "Retried after 60 s." \\
          --operation-key deploy.web --failure-key db.migration-lock --outcome failure --task-id TASK-812
    """
    _record(state, title, content, operation_key, failure_key, outcome, task_id, event_agent, as_json)


@command("remember-action")
@_operation_options
def remember_action_cmd(state: State, title: str, content: str, operation_key: str, failure_key: str | None,
                        outcome: str, task_id: str, event_agent: str | None, as_json: bool) -> None:
    """Compatibility alias of record-operation: logs an event, writes no memory (durableMemoryWritten: false).

    \b
    Example:
      hive-brain remember-action --title "Ran the release checklist" --content "All green." \\
          --operation-key release.checklist --outcome success --task-id TASK-815 --json
    """
    _record(state, title, content, operation_key, failure_key, outcome, task_id, event_agent, as_json)


@command("mine-patterns")
@click.option("--enqueue", is_flag=True, help="Queue each new suggestion as a Brain Review proposal (kind pattern).")
@click.option("--since", default=None, metavar="DATE|AGE", help="Only events since then: 2026-11-01, or an age like 7d.")
def mine_patterns_cmd(state: State, enqueue: bool, since: str | None, as_json: bool) -> None:
    """Suggest recurring failures, workflows and routines from the operational journal.

    Counts distinct tasks (3 or more make a pattern; one task repeating itself does not), drops
    test-run and fixture events, and shows the evidence of each suggestion. A dry run unless
    --enqueue, which only creates Brain Review proposals (the owner approves and applies them).

    \b
    Example:
      hive-brain mine-patterns --since 30d
      hive-brain mine-patterns --enqueue --json
    """
    from ..memory.operations import visible_events
    from ..memory.patterns import enqueue as enqueue_patterns
    from ..memory.patterns import mine, parse_since

    eng = state.engine()
    report = mine(visible_events(eng.vault.state, eng.settings.agent_id), since=parse_since(since))
    report["dryRun"] = not enqueue
    if enqueue:
        report.update(enqueue_patterns(eng.memory, report))

    def human(c: Any) -> None:
        c.print(f"{report['considered']} events from {report['tasks']} tasks ({report['testNoise']} test events "
                f"dropped); {len(report['patterns'])} suggestions", markup=False)
        for p in report["patterns"]:
            ev = p["evidence"]
            c.print(f"- {p['kind']}: {p['key']}  ({len(ev['tasks'])} tasks, {ev['events']} events, agents "
                    f"{', '.join(ev['agents']) or '-'}, {ev['firstSeen']} .. {ev['lastSeen']})", markup=False)
            for r in p.get("resolutions") or []:
                c.print(f"    fixed by: {r['text']} ({r['tasks']}x)", markup=False)
        for r in report.get("proposed") or []:
            c.print(f"Queued for Brain Review: {r['proposal']} ({r['path']})", markup=False)
        for r in report.get("skipped") or []:
            c.print(f"Skipped {r['pattern']}: {r['reason']}", markup=False)
        if not enqueue and report["patterns"]:
            c.print("Dry run: nothing was written; --enqueue queues them for Brain Review.", markup=False)

    out(as_json, report, human)


@command("record-usage")
@click.option("--memory-ids", "memory_ids", multiple=True, required=True,
              help="Memory ids (comma-separated or repeated).")
@click.option("--kind", type=click.Choice(["retrieved", "final-answer"]), required=True,
              help="retrieved: a recall returned them; final-answer: the answer used them.")
@click.option("--query", default=None, help="The question they answered (optional).")
def record_usage_cmd(state: State, memory_ids: tuple[str, ...], kind: str, query: str | None, as_json: bool) -> None:
    """Log that memories were retrieved or used in a final answer (per device, outside the vault).

    \b
    Example:
      hive-brain record-usage --memory-ids mem-01jabc,mem-01jdef --kind final-answer
    """
    from ..memory.operations import record_usage

    eng = state.engine()
    res = record_usage(eng.vault.state, list(memory_ids), kind, agent=eng.settings.agent_id, query=query)
    say(as_json, res, lambda: f"Recorded {res['id']} ({kind}: {len(res['memoryIds'])} memories)")


COMMANDS = [record_operation_cmd, remember_action_cmd, mine_patterns_cmd, record_usage_cmd]
