"""`hive-brain serve`: real server processes, real files, real sockets.

Latency bounds here are deliberately generous (the benchmarks measure the real numbers); the tests
check behaviour: a saved edit becomes searchable without anyone calling catch-up, one server per
vault, clean stop, recovery after kill -9, and a client that never hangs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hive_brain.config import resolve
from hive_brain.errors import InvalidAgentId, UsageError
from hive_brain.rpc import client
from hive_brain.store.vault import open_vault

from .helpers import run

START_TIMEOUT = 30.0
SEARCHABLE_WITHIN = 5.0


def _state() -> Path:
    return open_vault(resolve()).state


def _serve(tmp_path: Path, *args: str) -> subprocess.Popen:
    err = open(tmp_path / f"serve-{time.monotonic_ns()}.err", "w")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen([sys.executable, "-m", "hive_brain", "serve", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ))
    finally:
        err.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def server(vault_path, tmp_path):
    state = _state()
    proc = _serve(tmp_path)
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        yield proc, state
    finally:
        _stop(proc)


def _save_like_an_editor(path: Path, text: str) -> None:
    """Obsidian and most editors write a temp file and rename it over the note."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _paths(state: Path, query: str, **args) -> list[str]:
    res = client.call(state, "recall", {"query": query, "scope": "full-vault", **args}, timeout=5)
    assert res["via"] == "server"
    return [h["path"] for h in res["hits"]]


def _wait_for(pred, timeout: float) -> float:
    t0 = time.monotonic()
    while True:
        if pred():
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.02)


def test_serve_status_refuses_a_second_and_stops(server, tmp_path):
    proc, state = server
    info = client.server_info(state)
    assert info["running"] and info["pid"] == proc.pid and info["ready"]
    assert run("status")["server"]["running"] is True
    cli_status = run("serve", "--status")
    assert cli_status["running"] and cli_status["status"]["watcher"]

    second = subprocess.run([sys.executable, "-m", "hive_brain", "serve"], capture_output=True, text=True, timeout=60)
    assert second.returncode == 1
    assert f"already running (pid {proc.pid})" in second.stderr

    stopped = subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--stop", "--json"], capture_output=True,
                             text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] is True
    assert proc.wait(10) == 0
    assert not client.socket_path(state).exists()
    assert not (state / client.INFO_NAME).exists()
    assert client.server_info(state)["running"] is False
    with pytest.raises(client.ServerUnavailable):
        client.call(state, "ping", timeout=0.5)
    assert run("serve", "--stop")["wasRunning"] is False


def test_saved_edit_is_searchable_through_the_server(server, vault_path):
    _proc, state = server
    note = vault_path / "Projects" / "Foo.md"
    _save_like_an_editor(note, "# Foo\n\nThe Foo service is deployed with quokkaship on Fridays.\n")
    took = _wait_for(lambda: "Projects/Foo.md" in _paths(state, "quokkaship"), SEARCHABLE_WITHIN)
    assert took < SEARCHABLE_WITHIN

    _save_like_an_editor(note, "# Foo\n\nThe Foo service is deployed with marmotrelease on Mondays.\n")
    _wait_for(lambda: "Projects/Foo.md" in _paths(state, "marmotrelease"), SEARCHABLE_WITHIN)
    assert "Projects/Foo.md" not in _paths(state, "quokkaship")

    note.unlink()
    _wait_for(lambda: "Projects/Foo.md" not in _paths(state, "marmotrelease"), SEARCHABLE_WITHIN)
    # Files an editor leaves around (temp files, other extensions, .obsidian) never become notes.
    (vault_path / ".obsidian").mkdir(exist_ok=True)
    (vault_path / ".obsidian" / "Hidden.md").write_text("wombatconfig\n")
    (vault_path / "Projects" / "Bar.txt").write_text("wombatconfig\n")
    client.call(state, "catch_up", timeout=10)
    assert _paths(state, "wombatconfig") == []


def test_requests_carry_their_own_agent_and_bad_requests_do_not_hurt(server, vault_path):
    _proc, state = server
    _save_like_an_editor(vault_path / "Agents" / "bob" / "Notes" / "Plan.md", "# Plan\n\nbob keeps the otterplan here.\n")
    res = client.call(state, "catch_up", timeout=10)
    assert res["generation"] is not None
    # The owner (no agent) reads the shared layer only; bob reads his private notes too.
    assert _paths(state, "otterplan") == []
    assert _paths(state, "otterplan", agent="bob") == ["Agents/bob/Notes/Plan.md"]
    assert _paths(state, "otterplan", agent="alice") == []
    with pytest.raises(InvalidAgentId):
        client.call(state, "recall", {"query": "otterplan", "agent": " "}, timeout=5)
    for not_an_id in (123, True, ["bob"], {"id": "bob"}):  # a bare field of another type is no identity
        with pytest.raises(UsageError, match="args.agent must be a string"):
            client.call(state, "recall", {"query": "otterplan", "agent": not_an_id}, timeout=5)
    with pytest.raises(UsageError):
        client.call(state, "nonsense", timeout=5)
    with pytest.raises(UsageError):
        client.call(state, "recall", {"query": "x", "no_such_option": 1}, timeout=5)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(client.socket_path(state)))
        s.sendall(b"this is not json\n")
        assert json.loads(s.makefile("rb").readline())["ok"] is False
    pack = client.call(state, "answer", {"query": "otterplan", "agent": "bob", "budget": 2000}, timeout=5)
    assert not pack["abstained"] and "otterplan" in pack["context"]
    assert client.call(state, "ping", timeout=2)["ready"] is True


def test_kill_9_leaves_nothing_that_blocks_the_next_server(vault_path, tmp_path):
    state = _state()
    proc = _serve(tmp_path)
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert (state / client.INFO_NAME).exists() and client.socket_path(state).exists()  # stale leftovers
        assert client.server_info(state)["running"] is False
        with pytest.raises(client.ServerUnavailable):
            client.call(state, "ping", timeout=0.5)
        proc = _serve(tmp_path)
        pong = client.wait_ready(state, START_TIMEOUT, proc=proc)
        assert pong["pid"] == proc.pid
        assert client.server_info(state)["pid"] == proc.pid
    finally:
        _stop(proc)
    assert proc.returncode == 0
    assert not client.socket_path(state).exists()


def _socket_dir(state: Path) -> Path:
    path = client.socket_path(state)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def test_call_never_waits_past_its_timeout(tmp_path):
    state = tmp_path / "s"
    path = _socket_dir(state)
    with pytest.raises(client.ServerUnavailable):  # no socket file at all
        client.call(state, "ping", timeout=0.2)

    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        hung.bind(str(path))
        hung.listen(1)  # accepts at the kernel level, never answers
        t0 = time.monotonic()
        with pytest.raises(client.ServerUnavailable):
            client.call(state, "ping", timeout=0.2)
        # Bound only: a call that ignored its deadline would hang here (speed is in benchmarks/).
        assert time.monotonic() - t0 < 5.0
    finally:
        hung.close()
    # The file of a socket whose process is gone: refused at once.
    assert path.exists()
    t0 = time.monotonic()
    with pytest.raises(client.ServerUnavailable):
        client.call(state, "ping", timeout=0.2)
    assert time.monotonic() - t0 < 5.0
    path.unlink()


def test_socket_path_fits_and_is_deterministic(tmp_path):
    short = Path("/tmp/hb") / "v"
    assert client.socket_path(short) == Path("/tmp/hb/v/server.sock")
    long_state = tmp_path / ("x" * 120) / "0123456789abcdef0123456789abcdef"
    p = client.socket_path(long_state)
    assert len(os.fsencode(str(p))) <= 103
    assert p.parent == Path(f"/tmp/hive-brain-{os.getuid()}")
    assert client.socket_path(long_state) == p != client.socket_path(long_state.with_name("other"))


def test_client_import_is_light():
    code = ("import sys, hive_brain.rpc.client; "
            "print(','.join(m for m in ('click','rich','yaml','tantivy','numpy','hive_brain.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_in_process_server_and_forced_catch_up(vault_path):
    from hive_brain.daemon.server import AlreadyRunning, Server

    settings = resolve()
    with Server(settings, log_to_stderr=False) as srv:
        assert srv.wait_ready(START_TIMEOUT)
        with pytest.raises(AlreadyRunning):
            Server(settings, log_to_stderr=False).start()
        _save_like_an_editor(vault_path / "Ideas" / "Kite.md", "# Kite\n\nA kite made of lemurfabric.\n")
        client.call(srv.state, "catch_up", timeout=10)
        # Right after a forced catch-up returns, the note is visible: no polling needed.
        assert _paths(srv.state, "lemurfabric") == ["Ideas/Kite.md"]
        st = client.call(srv.state, "status", timeout=5)
        assert st["ready"] and st["catchUps"] >= 2 and st["semantic"]["on"] is False
    assert not client.socket_path(srv.state).exists()


def test_detach_starts_in_the_background_and_stop_stops_it(vault_path):
    state = _state()
    try:
        res = subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--detach", "--json"], capture_output=True,
                             text=True, timeout=90)
        assert res.returncode == 0, res.stderr
        info = json.loads(res.stdout)
        assert info["running"] and not info["alreadyRunning"]
        assert client.server_info(state)["pid"] == info["pid"]
        again = json.loads(subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--detach", "--json"],
                                          capture_output=True, text=True, timeout=90).stdout)
        assert again["alreadyRunning"] and again["pid"] == info["pid"]
        assert (state / client.LOG_NAME).exists()
    finally:
        from hive_brain.daemon.server import stop_server

        stop_server(state)
    assert client.server_info(state)["running"] is False


def test_semantic_search_through_the_warm_server(vault_path, with_model):
    from hive_brain.daemon.server import Server

    for i in range(6):
        _save_like_an_editor(vault_path / "Projects" / f"Trip {i}.md",
                             f"# Trip {i}\n\nWe travelled by train number {i} through the mountains.\n")
    with Server(resolve(), log_to_stderr=False) as srv:
        srv.compact_after = 1  # exercise compaction once the backlog is embedded
        assert srv.wait_ready(60)
        _wait_for(lambda: client.call(srv.state, "status", timeout=5)["semantic"]["pendingPassages"] == 0, 60)
        _wait_for(lambda: client.call(srv.state, "status", timeout=5)["semantic"]["vectorWritesSinceCompaction"] == 0,
                  30)
        res = client.call(srv.state, "recall", {"query": "railway journey", "scope": "full-vault"}, timeout=10)
        assert res["semantic"] is True and not res["warnings"]
        assert res["timing"].get("semanticMs") is not None
        # The prompt hook's smaller candidate pool is accepted and ranks the same top note here.
        small = client.call(srv.state, "recall", {"query": "railway journey", "scope": "full-vault", "pool": 10},
                            timeout=10)
        assert small["hits"][0]["path"] == res["hits"][0]["path"]
        # A new note is searchable lexically at once and semantically once its slice is embedded.
        _save_like_an_editor(vault_path / "Ideas" / "Boat.md", "# Boat\n\nA sailing boat crossing the ocean.\n")
        client.call(srv.state, "catch_up", timeout=10)
        _wait_for(lambda: client.call(srv.state, "status", timeout=5)["semantic"]["pendingPassages"] == 0, 60)
        res = client.call(srv.state, "recall", {"query": "sailing boat", "scope": "full-vault"}, timeout=10)
        assert res["hits"][0]["path"] == "Ideas/Boat.md"
        assert res["hits"][0]["scoreDetails"]["semantic"] is not None


def test_a_note_saved_by_hand_is_found_by_a_recall_made_right_after(server):
    """Read your own edit (issue 28): the server indexes what its watcher already saw before it
    answers, instead of answering while the event waits out the debounce."""
    _proc, state = server
    vault = resolve().vault
    assert vault is not None
    for i, word in enumerate(("wombatsave", "narwhalsave", "ibexsave")):
        (vault / "Projects").mkdir(exist_ok=True)
        (vault / "Projects" / f"Hand{i}.md").write_text(f"# Hand {i}\n\nThe {word} note, saved in the editor.\n")
        time.sleep(0.1)  # what a CLI process takes to start; far less than the debounce plus a catch-up
        assert _paths(state, word) == [f"Projects/Hand{i}.md"], word
