"""One read path: the view factory and the one server-first `Reader` behind engine, hook and MCP.

Real vaults, real indexes, a real in-process server and real lock holders in other processes.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from pathlib import Path

from hive_brain.config import resolve
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
    _, res = _recall_while_another_process_writes(vault_path)
    assert any("not embedded" in w or "writing" in w for w in res["warnings"]), res["warnings"]


def _recall_while_another_process_writes(vault_path) -> tuple[int, dict]:
    """Index without vectors, then recall from a fresh engine while another process holds the lock:
    (passages waiting for vectors, the recall result, which must have found the answer)."""
    _notes(vault_path)
    eng = Engine.open()
    eng.rebuild(embed=False)
    pending = eng.indexer.pending_count()
    assert pending > 0
    holder = _LockHolder(eng.vault.state)
    try:
        res = Engine.open().recall("train through the mountains", scope="full-vault")
    finally:
        holder.close()
    assert res["hits"] and res["hits"][0]["path"].startswith("Projects/Trip")
    return pending, res



def test_a_writer_taking_the_lock_mid_embedding_ends_the_run_not_the_read(vault_path, with_model, monkeypatch):
    """The race behind "30 of 432 recalls failed after a server kill": the lock was free when the
    reader caught up and taken before its embedding run could write (another reader, a CLI write).
    The catch-up is pinned to "nothing to do" so the lock is taken exactly in between; the lock, the
    model and the embedding run are real."""
    from hive_brain.index.indexer import Indexer

    monkeypatch.setattr(Indexer, "try_catch_up", lambda self: {"changed": False})
    pending, res = _recall_while_another_process_writes(vault_path)
    assert any(f"{pending} passages are not embedded" in w for w in res["warnings"]), res["warnings"]

# ---------------------------------------------------------------------------------------------- one reader
SATURDAY_NOW = dt.datetime(2023, 10, 16, 12, tzinfo=dt.UTC)  # a Monday; "last Saturday" is 2023-10-14


def _saturday_note(vault: Path) -> None:
    conv = vault / "Memory/Conversations"
    conv.mkdir(parents=True, exist_ok=True)
    (conv / "sat.md").write_text('---\ntitle: "Session sat"\ndate: "2023-10-14"\n---\n\n'
                                 "**User**: We fixed the flaky upload test and renamed the bucket.\n", encoding="utf-8")


def _front_ends(monkeypatch) -> tuple[list[str], dict]:
    """The source (server | local) that answered each read of engine, hook and MCP through Reader.read."""
    from hive_brain.agents import hooks, mcp
    from hive_brain.reader import Reader

    seen: list[str] = []
    real = Reader.read

    def spy(self, work, **kw):
        def wrapped(src):
            out = work(src)
            seen.append(src.via)
            return out
        return real(self, wrapped, **kw)

    monkeypatch.setattr(Reader, "read", spy)
    settings = resolve(agent_id="claude-code")
    tools = mcp.Tools(settings)
    calls = {
        "engine recall": lambda: Engine.open(agent_id="claude-code").recall("flaky upload test", semantic=False),
        "engine answer": lambda: Engine.open(agent_id="claude-code").answer("flaky upload test", semantic=False),
        "hook": lambda: hooks.answer_for_hook(settings, "why was the flaky upload test fixed?", budget=2000,
                                              deadline=__import__("time").monotonic() + 30),
        "mcp recall": lambda: tools.call("recall", {"query": "flaky upload test", "limit": 5}),
        "mcp answer": lambda: tools.call("answer", {"query": "flaky upload test", "budget": 2000}),
    }
    return seen, calls


def test_engine_hook_and_mcp_read_through_the_one_reader_locally_when_no_server(vault_path, monkeypatch):
    _saturday_note(vault_path)
    Engine.open().rebuild(embed=False)
    seen, calls = _front_ends(monkeypatch)
    for name, fn in calls.items():
        seen.clear()
        out = fn()
        assert seen == ["local"], (name, seen)
        assert "upload" in str(out), name
    assert calls["hook"]()["mode"] == "lexical"


def test_the_server_is_used_when_up_by_every_front_end_and_now_reaches_it(vault_path, monkeypatch):
    from hive_brain.daemon.server import Server

    _saturday_note(vault_path)
    Engine.open().rebuild(embed=False)
    seen, calls = _front_ends(monkeypatch)
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(30)
        for name, fn in calls.items():
            seen.clear()
            out = fn()
            assert seen == ["server"], (name, seen)
            assert "upload" in str(out), name
        assert calls["hook"]()["mode"] == "lexical-server"
        eng = Engine.open()
        # `now=` is a read parameter like any other: the server answers it, relative to the caller's clock.
        res = eng.recall("what did we talk about last Saturday?", semantic=False, now=SATURDAY_NOW)
        assert res["via"] == "server"
        assert [h["path"] for h in res["hits"]] == ["Memory/Conversations/sat.md"]
        assert eng.recall("what did we talk about last Saturday?", semantic=False)["abstained"]  # today's Saturday
        pack = eng.answer("what did we talk about last Saturday?", semantic=False, now=SATURDAY_NOW)
        assert pack["via"] == "server" and "flaky upload" in pack["context"]
        local = eng.recall("what did we talk about last Saturday?", semantic=False, now=SATURDAY_NOW,
                           view=eng.view(semantic=False))
        assert "via" not in local and [h["path"] for h in local["hits"]] == ["Memory/Conversations/sat.md"]
    # Server gone: the same engine's reader notices and reads in-process (no error, same answer).
    seen.clear()
    res = Engine.open().recall("what did we talk about last Saturday?", semantic=False, now=SATURDAY_NOW)
    assert seen == ["local"] and [h["path"] for h in res["hits"]] == ["Memory/Conversations/sat.md"]


def test_a_hung_server_is_asked_once_per_process_then_reads_go_local(vault_path, tmp_path):
    """One failure decides for the next RETRY_AFTER_S: a second read does not wait on the server again."""
    import socket

    from hive_brain.reader import Reader
    from hive_brain.rpc import client

    _saturday_note(vault_path)
    eng = Engine.open()
    eng.rebuild(embed=False)
    path = client.socket_path(eng.vault.state)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)  # accepts into the backlog, never answers
    (eng.vault.state / client.READY_NAME).touch()  # as a server that hung after it was ready
    try:
        reader = Reader(eng.vault.state, agent=None, local_view=lambda s: eng.view(semantic=s), timeout=0.3)
        vias: list[str] = []

        def work(src):
            vias.append(src.via)
            return src.recall("flaky upload test", semantic=False)

        assert reader.read(work)["hits"]
        assert vias == ["server", "local"] and "did not answer" in (reader.server_error or "")
        vias.clear()
        assert reader.read(work)["hits"]
        assert vias == ["local"]
    finally:
        srv.close()
        path.unlink(missing_ok=True)
        (eng.vault.state / client.READY_NAME).unlink(missing_ok=True)


def test_replay_and_the_read_only_view_come_from_the_one_factory(vault_path):
    from hive_brain.search.view import open_view

    _saturday_note(vault_path)
    eng = Engine.open()
    assert open_view(eng.vault, eng.settings) is None  # read-only: nothing indexed, and it never indexes
    eng.rebuild(embed=False)
    g1 = eng.indexer.gens.current_id()
    (vault_path / "Memory/Conversations/sat.md").unlink()
    eng.view()  # catch-up publishes the deletion
    ro = open_view(eng.vault, eng.settings)
    assert ro.generation == eng.indexer.gens.current_id() != g1 and ro.vectors is None
    old = open_view(eng.vault, eng.settings, generation=g1, semantic=False)
    assert old.generation == g1
    assert eng.recall("flaky upload test", view=old, semantic=False)["hits"]
    assert not eng.recall("flaky upload test", view=ro, semantic=False)["hits"]


def test_the_hook_read_path_stays_import_light(vault_path):
    """Reader and view factory on the prompt hook's path, server down: no CLI, model, vector or
    writer-side module is loaded (the hook's whole process has a ~200 ms budget)."""
    Engine.open().rebuild(embed=False)
    code = textwrap.dedent("""
        import sys, time
        from hive_brain.agents import hooks
        s = hooks._settings({}, [])
        pack = hooks.answer_for_hook(s, "which package manager", budget=2000, deadline=time.monotonic() + 30)
        assert pack["mode"] == "lexical", pack
        # store.lock may load (the server client's pid_alive lives there; it imports only fcntl/json/os).
        heavy = ("click", "rich", "numpy", "lancedb", "pyarrow", "onnxruntime", "hive_brain.engine",
                 "hive_brain.index.indexer", "hive_brain.store.journal")
        print(",".join(m for m in heavy if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
