"""One read path: the view factory and the one server-first `Reader` behind engine, hook and MCP.

Real vaults, real indexes, a real in-process server and real lock holders in other processes.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from pathlib import Path

from hive_brain.engine import Engine

NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)  # a Monday


def _notes(vault: Path, n: int = 6) -> None:
    for i in range(n):
        p = vault / "Projects" / f"Trip {i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# Trip {i}\n\nWe travelled by train number {i} through the mountains.\n", encoding="utf-8")


class _LockHolder:
    """Another process holding the vault's write lock until closed."""

    def __init__(self, state: Path) -> None:
        code = textwrap.dedent(f"""
            import sys
            from pathlib import Path
            from hive_brain.store.lock import vault_lock
            with vault_lock(Path({str(state)!r}), timeout=10, command="test holder"):
                print("held", flush=True)
                sys.stdin.read()
        """)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


def test_a_default_recall_answers_while_another_process_holds_the_lock(vault_path, with_model):
    """No server, passages waiting for vectors, a writer holding the lock: the reader answers with
    what is indexed (and says so) instead of raising LockTimeout while trying to embed."""
    _notes(vault_path)
    eng = Engine.open()
    eng.rebuild(embed=False)
    assert eng.indexer.pending_count() > 0
    holder = _LockHolder(eng.vault.state)
    try:
        res = Engine.open().recall("train through the mountains", scope="full-vault")
    finally:
        holder.close()
    assert res["hits"] and res["hits"][0]["path"].startswith("Projects/Trip")
    assert any("not embedded" in w or "writing" in w for w in res["warnings"]), res["warnings"]
