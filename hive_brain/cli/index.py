"""Commands that look after the per-device index: doctor, rebuild-index, status, generations."""

from __future__ import annotations

from typing import Any

import click

from .base import State, command, count, duration, out, print_pending_writes, progress_bars
from .text import damaged_line, markup_escape, rich_style, status_lines


# ---------------------------------------------------------------------------------------------- health
@command("doctor")
@click.option("--keep", "keep", multiple=True, metavar="MEMORY_ID",
              help="Keep a memory deleted here that a sync brought back (doctor stops naming it). Repeatable.")
def doctor_cmd(state: State, keep: tuple[str, ...], as_json: bool) -> None:
    """List notes hive-brain cannot read (broken YAML, binary, not UTF-8, too large), sync conflicts,
    and repair state.

    Broken notes are reported, never rewritten. Unfinished transactions are rolled forward or back.
    Notes holding a secret are listed by path, line and kind (never the value): the index and every
    read show it redacted; move the value to a password manager and name it instead.
    Sync conflicts (a superseded note restored as active, copies sharing a memory id, current
    memories sharing a key, sync copies, git conflict markers) are fixed by `repair-conflicts`.
    A memory deleted on this device that a sync brought back (the other device had updated it) is
    named until it is deleted again or kept (`--keep ID`).
    Every per-device state file is read through: a damaged one is moved aside (`<name>.damaged-<time>`)
    and rebuilt from the notes, and listed here.

    Exits 1 when it found something to fix (an unreadable note, a sync conflict, a deleted memory
    back, a damaged state file), so a script or CI can tell; 0 when all is well.

    \b
    Example:
      hive-brain doctor --json
      hive-brain doctor --keep mem-01j...
    """
    res = state.engine().doctor(keep=list(keep))
    from ..agents.install import hook_vaults

    res["hookVaults"] = hook_vaults(state.settings(identify=False))
    lost = [v for v in res["hookVaults"] if not v["vault"]["exists"]]

    def human(c: Any) -> None:
        for r in res["recovered"]:
            c.print(f"recovered transaction {r['id']}: {r['action']}"
                    + (f" ({r['problem']}; kept in {r['keptIn']})" if r.get("keptIn") else ""), markup=False)
        print_damaged(c, res["damaged"])
        for w in res["warnings"]:
            c.print(f"[yellow]warning:[/] {w}")
        if not res["problems"]:
            c.print(f"All {count(res['notes'])} notes are readable.")
        for p in res["problems"]:
            c.print(f"[yellow]{p['path']}[/]: {p['problem']}", markup=True)
        for s in res["secrets"]:
            c.print(f"[red]{s['path']}:{s['line']}[/]: holds a secret ({s['kind']}); reads show it redacted - "
                    "move it to a password manager", markup=True, highlight=False)
        for x in res["conflicts"]:
            c.print(f"[yellow]{x['kind']}[/] {x['path']}: {x['reason']}", markup=True)
        if res["conflicts"]:
            c.print("Run `hive-brain repair-conflicts` to see them side by side and fix them.")
        for mid in res["kept"]:
            c.print(f"kept {mid}: no longer named", markup=False)
        for x in res["cameBack"]:
            c.print(f"[yellow]deleted, back[/] {markup_escape(x['path'])}: {markup_escape(x['reason'])}", markup=True)
        print_pending_writes(c, res["pendingWrites"])
        from ..agents.settingsfile import describe_vault

        for v in res["hookVaults"]:
            c.print(f"hook {v['agent']} ({v['where']}) uses {describe_vault(v['vault'])}", markup=False,
                    style=None if v["vault"]["exists"] else "red")

    out(as_json, res, human)
    if res["problems"] or res["conflicts"] or res["cameBack"] or res["damagedNow"] or lost:
        raise SystemExit(1)


# ---------------------------------------------------------------------------------------------- index
@command("rebuild-index")
@click.option("--lexical-only", is_flag=True, help="Do not compute vectors now (they are queued).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def rebuild_cmd(state: State, lexical_only: bool, quiet: bool, as_json: bool) -> None:
    """Rebuild the whole index from the Markdown notes (lexical first, then vectors).

    \b
    Example:
      hive-brain rebuild-index
    """
    with progress_bars(not (quiet or as_json), {"notes": "indexing notes", "passages": "embedding passages"}) as bar:
        res = state.engine().rebuild(progress=bar, embed=not lexical_only)
    out(as_json, res, lambda c: c.print(rebuild_summary(res), markup=False))


def rebuild_summary(res: dict) -> str:
    """"2,002 notes, 7,115 passages: lexical 9.4 s, vectors 5,261 embedded in 31 min → generation 12"."""
    v = res.get("vectors") or {}
    if v.get("semantic") is False:
        vectors = "no vectors (no embedding model: `hive-brain model install`)"
    elif "embedded" not in v:
        vectors = f"vectors: {count(v.get('pending', 0))} passages queued (embedded by the server or the next rebuild)"
    else:
        vectors = f"vectors {count(v['embedded'])} embedded in {duration(v.get('seconds', 0))}"
        if v.get("pending"):
            vectors += f", {count(v['pending'])} still queued"
        if v.get("damaged"):
            vectors += f" (stopped: {v['damaged']})"
    line = (f"{count(res['indexed'])} notes, {count(res.get('passages', 0))} passages: lexical "
            f"{duration(res['seconds'])}, {vectors} → generation {res['generation']}")
    if res.get("totalSeconds") is not None:
        line += f" ({duration(res['totalSeconds'])} in all)"
    for d in res.get("damaged") or []:
        line += f"\nrebuilt from the notes: {d}"
    return line


@command("status")
def status_cmd(state: State, as_json: bool) -> None:
    """Show the vault, the index generation, semantic search and the server.

    \b
    Example:
      hive-brain status --json
    """
    res = state.engine().status()

    def human(c: Any) -> None:
        for line in status_lines(res, rich_style, markup_escape):
            c.print(line)

    out(as_json, res, human)


def print_damaged(c: Any, damaged: list[dict]) -> None:
    for d in damaged:
        c.print(damaged_line(d, rich_style, markup_escape))


@command("generations")
@click.option("--prune", is_flag=True, help="Remove old generated history (keeps the newest 20 and a checkpoint).")
@click.option("--keep", type=int, default=20, show_default=True)
def generations_cmd(state: State, prune: bool, keep: int, as_json: bool) -> None:
    """List index generations, the policy, and the earliest replayable one.

    \b
    Example:
      hive-brain generations
      hive-brain generations --prune --keep 10
    """
    eng = state.engine()
    pr = eng.prune_generations(keep) if prune else None
    res = eng.generations()
    if prune:
        res["pruned"] = pr

    def human(c: Any) -> None:
        for g in res["generations"][-30:]:
            if not g.get("verified"):
                c.print(f"[red]{g['id']:>6} damaged: {g.get('problem')}[/]")
                continue
            cur = "*" if g["id"] == res["current"] else " "
            c.print(f"{cur}{g['id']:>5} {g['kind']:<10} {g['created']} notes {count(g['notes']):>6} "
                    f"+{count(g['added'])} ~{count(g['changed'])} -{count(g['removed'])}  {g['notesHash'][:12]}  "
                    f"{g['label']}", markup=False)
        c.print(f"current {res['current']} · earliest replayable {res['earliestReplayable']} · "
                f"checkpoint every {res['policy']['checkpointEvery']}")
        if pr is not None:
            c.print(f"pruned {count(len(pr['removed']))} generations ({count(pr.get('objectsRemoved', 0))} stored note "
                    f"versions no longer needed), kept {count(len(pr['kept']))}")

    out(as_json, res, human)

COMMANDS: list[click.Command] = [doctor_cmd, rebuild_cmd, status_cmd, generations_cmd]
