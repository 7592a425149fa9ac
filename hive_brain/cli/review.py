"""CLI commands for memory layers and Brain Review: review (list/show/approve/reject/apply/skill), promote,
conflicts, health.

Registered explicitly by :mod:`.app`; heavy modules are imported
inside the commands. (``promote`` is also ``consolidate --propose-promotions``, in :mod:`.agents`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .base import State, command, out

if TYPE_CHECKING:
    from ..memory.review import BrainReview


def _review(state: State) -> BrainReview:
    from ..memory.review import BrainReview

    return BrainReview(state.engine().memory)


# ---------------------------------------------------------------------------------------------- review
@click.group("review")
def review_group() -> None:
    """Brain Review: proposals to change shared memory, decided by the vault owner.

    Agents in enforcement mode (HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS=1) cannot write shared memory:
    `remember --memory-scope hive` queues a proposal, and `promote` proposes what several agents learned
    alike. Proposals are notes under Operations/Brain Review/ (readable and editable in Obsidian).

    \b
    Example:
      hive-brain review list --status pending
      hive-brain review approve rev-01j... && hive-brain review apply rev-01j...
    """


@command("list", group=review_group)
@click.option(
    "--status",
    type=click.Choice(["pending", "approved", "rejected", "applied"]),
    default=None,
    help="Only proposals with this status (default: all).",
)
def review_list_cmd(state: State, status: str | None, as_json: bool) -> None:
    """List proposals, oldest first (an agent sees only its own).

    \b
    Example:
      hive-brain review list --status pending
    """
    res = _review(state).list(status)

    def human(c: Any) -> None:
        from rich.markup import escape

        if not res:
            c.print("No proposals" + (f" with status {status}." if status else "."))
        for p in res:
            c.print(
                f"[bold]{p['id']}[/] {p['status']:<8} {p['kind']:<9} {escape(str(p.get('title')))} "
                f"[dim]({p.get('type')}, by {escape(str(p.get('proposedBy')))})[/]"
            )
            if p.get("reason"):
                c.print(f"   [dim]{escape(str(p['reason']))}[/]")

    out(as_json, res, human)


@command("show", group=review_group)
@click.argument("review_id", metavar="ID")
def review_show_cmd(state: State, review_id: str, as_json: bool) -> None:
    """Show one proposal: the memory it proposes, why, and where it came from.

    \b
    Example:
      hive-brain review show rev-01j...
    """
    res = _review(state).show(review_id)

    def human(c: Any) -> None:
        from rich.markup import escape

        c.print(f"[bold]{escape(str(res.get('title')))}[/]  ({res['id']}, {res['kind']}, {res['status']})")
        c.print(
            f"type {res.get('type')} · key {res.get('memoryKey')} · by {res.get('proposedBy')}",
            markup=False,
        )
        if res.get("reason"):
            c.print(f"reason: {res['reason']}", markup=False)
        if res.get("sources"):
            c.print(f"sources: {', '.join(res['sources'])}", markup=False)
        if res.get("evolves"):
            c.print(f"evolves: {res['evolves']}", markup=False)
        for line in evidence_lines(res.get("evidence")):
            c.print(line, markup=False)
        c.print("")
        c.print(res["content"], markup=False)

    out(as_json, res, human)


@command("approve", group=review_group)
@click.argument("review_id", metavar="ID")
@click.option("--apply", "and_apply", is_flag=True, help="Also apply it right away.")
def review_approve_cmd(state: State, review_id: str, and_apply: bool, as_json: bool) -> None:
    """Approve a pending proposal (owner only). It changes shared memory once applied.

    \b
    Example:
      hive-brain review approve rev-01j...
      hive-brain review approve rev-01j... --apply
    """
    rv = _review(state)
    res = rv.approve(review_id)
    if and_apply:
        res = rv.apply(review_id)
    out(
        as_json,
        res,
        lambda c: c.print(
            f"Applied {res['proposal']} → shared memory [bold]{res['id']}[/] ({res['path']})"
            if and_apply
            else f"Approved {res['proposal']}; apply it with `hive-brain review apply {res['proposal']}`"
        ),
    )


@command("reject", group=review_group)
@click.argument("review_id", metavar="ID")
@click.option("--reason", default=None, help="Why (kept in the proposal note).")
def review_reject_cmd(state: State, review_id: str, reason: str | None, as_json: bool) -> None:
    """Reject a pending or approved proposal (owner only); shared memory is not touched.

    \b
    Example:
      hive-brain review reject rev-01j... --reason "only true for the legacy repo"
    """
    res = _review(state).reject(review_id, reason)
    out(as_json, res, lambda c: c.print(f"Rejected {res['proposal']}."))


@command("apply", group=review_group)
@click.argument("review_id", metavar="ID")
def review_apply_cmd(state: State, review_id: str, as_json: bool) -> None:
    """Turn an approved proposal into shared memory (owner only; one journaled transaction).

    The proposal note as it is now is applied, so edits made to it in Obsidian count.

    \b
    Example:
      hive-brain review apply rev-01j...
    """
    res = _review(state).apply(review_id)
    out(
        as_json,
        res,
        lambda c: c.print(
            f"Applied {res['proposal']} → shared memory [bold]{res['id']}[/] ({res['path']})"
            + (f", superseding {res['supersedes']}" if res.get("supersedes") else "")
        ),
    )


@command("skill", group=review_group)
@click.argument("review_id")
@click.option("--name", default=None, help="The skill's name (lower-case letters, digits, hyphens; default: from "
              "the workflow's steps).")
@click.option("--link", "link_to", multiple=True, type=click.Choice(["claude-code", "codex"]),
              help="Also symlink it into that agent's personal skills folder (repeatable).")
def review_skill_cmd(state: State, review_id: str, name: str | None, link_to: tuple[str, ...], as_json: bool) -> None:
    """Write an approved workflow (a pattern proposal) as an agent skill: Skills/<name>/SKILL.md.

    --link claude-code links it as ~/.claude/skills/<name>; --link codex as ~/.agents/skills/<name>.
    A skill that exists and is not this proposal's is never overwritten.

    \b
    Example:
      hive-brain review approve rev-01j... && hive-brain review apply rev-01j...
      hive-brain review skill rev-01j... --name deploy-web --link claude-code --link codex
    """
    from pathlib import Path

    from ..agents.skills import check, link
    from ..memory.skills import write_skill

    agents = list(dict.fromkeys(link_to))

    def links_free(skill_dir: Path) -> None:
        for a in agents:
            check(skill_dir, a)

    res = write_skill(state.engine().memory, review_id, name=name, check=links_free)
    if agents:
        res["links"] = [link(Path(res["dir"]), a) for a in agents]

    def human(c: Any) -> None:
        from rich.markup import escape

        c.print(f"{'Rewrote' if res['rewritten'] else 'Wrote'} skill [bold]{escape(res['name'])}[/] "
                f"{escape(res['path'])} [dim](from {res['proposal']})[/]")
        for ln in res.get("links", []):
            c.print(f"  {ln['agent']}: {escape(ln['link'])} ({ln['status']})")

    out(as_json, res, human)


# ---------------------------------------------------------------------------------------------- promote
@command("promote")
@click.option("--dry-run", is_flag=True, help="Show the groups and proposals; write nothing.")
@click.option(
    "--threshold",
    type=click.FloatRange(0.1, 1.0),
    default=0.6,
    show_default=True,
    help="Word-overlap (Jaccard) at which two memories count as near-duplicates.",
)
def promote_cmd(state: State, dry_run: bool, threshold: float, as_json: bool) -> None:
    """Propose promoting what several agents learned alike into shared memory (owner only).

    Finds active private memories of two or more agents with the same memory_key, the same content,
    or word overlap >= the threshold, and queues one Brain Review proposal per group. Running it again
    does not duplicate proposals.

    \b
    Example:
      hive-brain promote --dry-run
      hive-brain promote && hive-brain review list --status pending
    """
    res = _review(state).promote(dry_run=dry_run, threshold=threshold)
    out(as_json, res, lambda c: say_promotions(c, res))


def say_promotions(c: Any, res: dict[str, Any]) -> None:
    """The promotion pass in words (``promote`` and ``consolidate --propose-promotions``)."""
    from rich.markup import escape

    dry_run = res["dryRun"]
    verb = "Would propose" if dry_run else "Proposed"
    for p in res["proposed"]:
        why = "; ".join(p["basis"]) if p.get("basis") else p.get("reason", "")
        c.print(
            f"{verb} [bold]{p['proposal']}[/] {escape(p['title'])} "
            f"[dim](agents {', '.join(p['agents'])}; {escape(why)})[/]"
        )
    for pid in res["extended"]:
        c.print(f"{'Would extend' if dry_run else 'Extended'} {pid} with new sources")
    c.print(
        f"{res['groups']} groups, {res.get('used', 0)} much-used lessons: {len(res['proposed'])} proposed, "
        f"{len(res['extended'])} extended, {len(res['skipped'])} already proposed or shared"
        + (" (a dry run: nothing was written)" if dry_run and (res["proposed"] or res["extended"]) else "")
    )


# ---------------------------------------------------------------------------------------------- conflicts
@command("conflicts")
def conflicts_cmd(state: State, as_json: bool) -> None:
    """List conflicts: private overrides of memories the user stated, and what sync left behind.

    Overrides of user-stated memories are refused at `remember`; these come from hand-edited notes.
    Fix one by removing the `overrides` property of the private memory, or by changing the user's
    memory. Sync conflicts (a superseded note restored as active, copies sharing a memory id, two
    current memories with one key, sync copies, git conflict markers) are fixed by
    `hive-brain repair-conflicts` where they can be. A memory deleted on this device that a sync
    brought back updated is listed too: delete it again, or keep it (`hive-brain doctor --keep ID`).

    \b
    Example:
      hive-brain conflicts --json
    """
    from ..memory.conflicts import find
    from ..memory.deletions import came_back
    from ..memory.layers import conflicts

    eng = state.engine()
    eng.catalog.refresh()
    agent = eng.settings.agent_id
    # A memory deleted here that a sync brought back: between this device's deletion and the other's update.
    back = [{"kind": "deletedCameBack", **x} for x in came_back(eng.vault.state, eng.catalog, agent)]
    res = conflicts(eng.catalog, agent) + find(eng.catalog, agent) + back

    def human(c: Any) -> None:
        if not res:
            c.print("No conflicts.")
        for x in res:
            if x["kind"] == "override":
                c.print(
                    f"[bold]{x['private']}[/] (agent {x['agent']}) overrides [bold]{x['shared']}[/]: "
                    f"user-stated, not applied\n   [dim]{x['privatePath']} → {x['sharedPath']}[/]"
                )
            else:
                c.print(f"[bold]{x['kind']}[/] {x['path']}\n   [dim]{x['reason']}[/]")
        if any(x["kind"] not in ("override", "deletedCameBack") for x in res):
            c.print("Run `hive-brain repair-conflicts` to see them side by side and fix them.")

    out(as_json, res, human)


# ---------------------------------------------------------------------------------------------- health
@command("health")
def health_cmd(state: State, as_json: bool) -> None:
    """Memories per layer, Brain Review queue, conflicts and index freshness.

    \b
    Example:
      hive-brain health --json
    """
    from ..memory.health import health

    res = health(state.engine())

    def human(c: Any) -> None:
        m = res["memories"]
        per = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"  # noqa: E731
        c.print(
            f"memories   {m['total']} active: shared {m['shared']}; private: {per(m['private'])}; "
            f"task: {per(m['task'])}",
            markup=False,
        )
        q = res["proposals"]
        c.print(
            f"review     {q['pending']} pending, {q['approved']} approved, {q['applied']} applied, "
            f"{q['rejected']} rejected"
        )
        c.print(
            f"conflicts  {res['conflicts']}" + (" (see `hive-brain conflicts`)" if res["conflicts"] else "")
        )
        ix = res["index"]
        c.print(
            f"index      generation {ix['generation']}, "
            + ("up to date" if ix["fresh"] else f"{ix['staleNotes']} notes not yet indexed")
        )
        if res["problems"]:
            c.print(f"problems   {res['problems']} unreadable notes (see `hive-brain doctor`)")
        for w in res["warnings"]:
            c.print(f"[yellow]warning:[/] {w}")

    out(as_json, res, human)


COMMANDS: list[click.Command] = [review_group, promote_cmd, conflicts_cmd, health_cmd]


def evidence_lines(ev: dict | None) -> list[str]:
    """Where a proposal was learned, as ``review show`` prints it: the conversation, then the words
    quoted from it (each line quoted, so a reviewer tells them from the proposal)."""
    if not ev:
        return []
    where = ev.get("conversation") or ev.get("transcript") or "a conversation"
    bits = [f"session {ev['sessionId']}" if ev.get("sessionId") else "", f"turn {ev['turn']}" if ev.get("turn") else ""]
    lines = [f"evidence: {where}" + (f" ({', '.join(b for b in bits if b)})" if any(bits) else "")]
    if ev.get("conversation") and ev.get("transcript"):
        lines.append(f"  transcript: {ev['transcript']}")
    lines += [f"  > {line}" if line.strip() else "  >" for line in str(ev.get("excerpt") or "").splitlines()]
    return lines
