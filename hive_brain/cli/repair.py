"""`repair-conflicts`: what sync left behind, side by side, fixed in one transaction when confirmed."""

from __future__ import annotations

from typing import Any

import click

from .base import State, command, out


@command("repair-conflicts")
@click.option("--confirm", is_flag=True, help="Apply the repair (default: only show it).")
def repair_conflicts_cmd(state: State, confirm: bool, as_json: bool) -> None:
    """Find sync conflicts and keep one current memory per key and per id; nothing is deleted.

    Finds superseded notes a sync restored as active, copies that share a memory id (Obsidian "Make a
    copy", Syncthing, Dropbox, iCloud, Obsidian Sync) and current memories that share a key, and shows
    each pair with a diff. With --confirm, in one transaction: the head (the newest by `updated`;
    among copies of one id, the original file name on a tie) stays current; each other note becomes
    superseded by it (copies get ids of their own), stays on disk and is listed in the head's
    `conflict_versions`. Git conflict markers and sync copies of plain notes are listed for you.

    \b
    Example:
      hive-brain repair-conflicts             # show what would change
      hive-brain repair-conflicts --confirm   # do it
    """
    from ..memory.repair import repair_conflicts

    res = repair_conflicts(state.engine(), confirm=confirm)

    def human(c: Any) -> None:
        if not res["pairs"] and not res["manual"]:
            c.print("No sync conflicts.")
        for p in res["pairs"]:
            keep, aside = p["keep"], p["setAside"]
            c.print(f"[bold]{p['kind']}[/]", markup=True)
            width = max(len(keep["path"]), 20)
            new_id = f" → {p['newId']}" if p.get("newId") else ""
            rows = [("", "keep", "set aside"), ("id", keep["id"], aside["id"] + new_id),
                    ("status", keep["status"], aside["status"]),
                    ("updated", keep["updated"] or "-", aside["updated"] or "-"), ("path", keep["path"], aside["path"])]
            for name, a, b in rows:
                c.print(f"  {name:<8} {a:<{width}}  {b}", markup=False, highlight=False)
            if p["diff"]:
                c.print("\n".join("    " + line for line in p["diff"].splitlines()), markup=False, highlight=False)
        for m in res["manual"]:
            c.print(f"[yellow]by hand[/] {m['reason']}", markup=True)
        if res["dryRun"]:
            if res["pairs"]:
                c.print(f"Dry run: {len(res['notesToChange'])} notes would change. "
                        "Run `hive-brain repair-conflicts --confirm` to apply.")
        else:
            c.print(f"Changed {len(res['changed'])} notes in one transaction (generation {res['generation']}); "
                    f"{res['remaining']} conflicts remain.")
        if res.get("indexWarning"):
            c.print(f"[yellow]warning:[/] {res['indexWarning']}", markup=True)

    out(as_json, res, human)


COMMANDS: list[click.Command] = [repair_conflicts_cmd]
