"""The server's life as a user lives it (issue 26): the hook never waits on a starting server, one
server per vault and none without a vault, a stop that returns when the process is gone.

Real server processes, real sockets, real hook processes. No latency is asserted (benchmarks/cold.py
measures it); what is checked is what the user's clock depends on: one deadline, counted from the
hook's start and recorded as it was; the server started after the answer; one starter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hive_brain.agents import hooks
from hive_brain.config import resolve
from hive_brain.rpc import client
from hive_brain.store.vault import open_vault

from .helpers import remember

START_TIMEOUT = 60.0


def _state() -> Path:
    return open_vault(resolve()).state


def _indexed(vault_path: Path) -> Path:
    remember("Release steps", "Tag the commit, then run make release and announce it in #eng.", "procedure")
    from hive_brain.engine import Engine

    Engine.from_settings(resolve()).rebuild()
    return _state()


def _payload(prompt: str = "what are the release steps after tagging the commit?") -> str:
    return json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": prompt})


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ---------------------------------------------------------------------------------------------- one deadline
def test_the_full_path_keeps_the_deadline_the_fast_path_started(vault_path, monkeypatch):
    """The fast path's time counts: the full path is handed its t0 and does not start a new deadline."""
    _indexed(vault_path)
    monkeypatch.setenv("HIVE_AGENT_ID", "claude-code")
    spent = float(resolve().hook_deadline) + 5.0
    t0 = time.monotonic() - spent  # as if the fast path had waited past the whole deadline
    assert hooks.dispatch("prompt", [], stdin=_payload(), hard_exit=False, t0=t0) == 0
    last = hooks.read_status(resolve().state_dir)["last"]["prompt"]
    assert last["mode"] == "timeout"
    assert last["durationMs"] >= spent * 1000  # recorded from the hook's start, not the full path's


def test_the_server_is_started_after_the_answer_is_printed(vault_path, monkeypatch, capsys):
    _indexed(vault_path)
    monkeypatch.setenv("HIVE_AGENT_ID", "claude-code")
    monkeypatch.setenv("HIVE_BRAIN_AUTOSTART", "1")
    printed_at_start: list[str] = []

    def start(settings):
        printed_at_start.append(capsys.readouterr().out)
        return True

    monkeypatch.setattr(hooks, "_start_server", start)
    assert hooks.dispatch("prompt", [], stdin=_payload(), hard_exit=False) == 0
    assert len(printed_at_start) == 1
    answer = json.loads(printed_at_start[0])  # the whole answer was out before the start began
    assert "make release" in answer["hookSpecificOutput"]["additionalContext"]
    last = hooks.read_status(resolve().state_dir)["last"]["prompt"]
    assert last["mode"] == "lexical" and last["serverStarted"] is True


def test_one_starter_when_many_hooks_find_the_server_down(vault_path, monkeypatch):
    from hive_brain.store.lock import FileLock

    state = _state()
    spawned: list[Path] = []
    monkeypatch.setattr(client, "spawn_server", lambda root, st: spawned.append(Path(st)))
    other = FileLock(state / client.AUTOSTART_LOCK)
    assert other.acquire(0, command="autostart")  # another hook is starting it this very moment
    try:
        assert client.start_in_background(vault_path, state) is False
    finally:
        other.release()
    assert spawned == []
    assert client.start_in_background(vault_path, state) is True
    assert client.start_in_background(vault_path, state) is False  # started a moment ago
    assert spawned == [state]


def test_a_hung_server_costs_the_prompt_one_deadline_recorded_as_it_was(vault_path):
    """A real listener that never answers: the fast path waits its share of the one deadline, the
    lexical answer comes in the rest, and the status file records the whole wait."""
    from .helpers import hung_server

    state = _indexed(vault_path)
    from hive_brain.agents.settingsfile import hook_executable

    env = dict(os.environ, HIVE_AGENT_ID="claude-code", HIVE_BRAIN_HOOK_DEADLINE="3")
    with hung_server(state) as accepted:
        t0 = time.monotonic()
        out = subprocess.run([*hook_executable(), "hook", "prompt"], input=_payload(), capture_output=True,
                             text=True, timeout=60, env=env)
        wall = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    assert "make release" in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    last = hooks.read_status(resolve().state_dir)["last"]["prompt"]
    assert last["mode"] == "lexical" and "no answer in time" in last["serverError"]
    from hive_brain.agents import quick

    share = 3.0 - quick.local_reserve(3.0)
    assert share * 1000 <= last["durationMs"] <= wall * 1000
    assert len(accepted) == 1


# ---------------------------------------------------------------------------------------------- the ready marker
def test_a_ready_marker_a_kill_9_left_is_not_believed(vault_path):
    from hive_brain.agents import quick

    state = _state()
    state.mkdir(parents=True, exist_ok=True)
    (state / client.READY_NAME).write_text(f"{_dead_pid()}\n")
    assert client.server_ready(state) is False
    with pytest.raises(quick.Fallback, match="not ready"):
        quick._ask(str(state), b"{}\n", time.monotonic() + 1)
    (state / client.READY_NAME).write_text(f"{os.getpid()}\n")
    assert client.server_ready(state) is True


def test_after_a_kill_9_the_next_prompt_starts_a_server(vault_path, tmp_path, monkeypatch):
    import signal

    state = _indexed(vault_path)
    proc = subprocess.Popen([sys.executable, "-m", "hive_brain", "serve"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert (state / client.READY_NAME).exists()  # left behind, but not believed
    spawned: list[Path] = []
    monkeypatch.setattr(client, "spawn_server", lambda root, st: spawned.append(Path(st)))
    assert client.start_in_background(vault_path, state) is True
    assert spawned == [state]


# ---------------------------------------------------------------------------------------------- one per vault, none without
def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hive_brain", "serve", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env or dict(os.environ))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _until(pred, timeout: float, step: float = 0.05) -> bool:
    t_end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > t_end:
            return False
        time.sleep(step)
    return True


def test_a_server_stops_when_its_vault_is_deleted_and_indexes_no_empty_vault(vault_path):
    import shutil

    from hive_brain.daemon.server import Server

    remember("Release steps", "Tag the commit, then run make release.", "procedure")
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(START_TIMEOUT)
        gen = srv.indexing.snap.generation
        shutil.rmtree(vault_path)
        assert srv.stopping.wait(30), "the server outlived its vault"
        assert "vault" in (srv.stop_reason or "") and "gone" in srv.stop_reason
        assert srv.indexing.snap.generation == gen  # the deletion was not indexed as "every note removed"


def test_a_server_stops_when_its_vault_is_replaced(vault_path):
    from hive_brain.daemon.server import Server
    from hive_brain.store.vault import init_vault

    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(START_TIMEOUT)
        vault_path.rename(vault_path.with_name("old-vault"))
        init_vault(vault_path, resolve())  # a new vault at the same path: another inode, another id
        assert srv.stopping.wait(30), "the server outlived its vault"
        assert "replaced" in (srv.stop_reason or "") or "gone" in (srv.stop_reason or "")


def test_rm_rf_of_the_state_dir_stops_the_old_server_before_a_new_one_serves(vault_path):
    """The lock outlives the state dir (it is in the runtime dir): a server started after the rm -rf
    waits for the old one, which notices its state dir is gone and exits; never two at once."""
    import shutil

    state = _state()
    old = _serve()
    new = None
    try:
        client.wait_ready(state, START_TIMEOUT, proc=old)
        shutil.rmtree(state)
        new = _serve()
        # Both alive at once only while the new one waits for the lock: it is not ready before the old exits.
        assert _until(lambda: old.poll() is not None or client.server_ready(state), 60)
        assert old.poll() is not None, "the new server became ready while the old one still ran"
        assert old.returncode == 0
        pong = client.wait_ready(state, START_TIMEOUT, proc=new)
        assert pong["pid"] == new.pid
    finally:
        _stop(old)
        if new is not None:
            _stop(new)


def test_a_server_started_before_model_install_takes_up_the_pack(vault_path, tmp_path, pack_dir):
    """A server started with no pack installed answered lexically for good: every answer said "no embedding
    pack installed (run `hive-brain model install`)" after the install had run, and `status` said semantic
    on. It now restarts itself (the same process, exec'd) once the pack it would load changes."""
    state = _state()
    models = Path(os.environ["HIVE_BRAIN_MODEL_DIR"])  # empty: conftest's per-test folder
    models.mkdir(parents=True, exist_ok=True)
    proc = _serve()
    try:
        pong = client.wait_ready(state, START_TIMEOUT, proc=proc)
        assert not client.call(state, "status", timeout=10)["semantic"]["on"]
        # What `model install` leaves (a complete pack folder appears at once: it is renamed into place).
        (models / pack_dir.name).symlink_to(pack_dir, target_is_directory=True)

        def semantic_on() -> bool:
            try:
                return bool(client.call(state, "status", timeout=5)["semantic"]["on"])
            except Exception:  # noqa: BLE001 - restarting: not answering for a moment
                return False

        assert _until(semantic_on, START_TIMEOUT + 30, step=0.5), (state / "server.log").read_text(encoding="utf-8")[-800:]
        assert client.call(state, "ping", timeout=5)["pid"] == pong["pid"] == proc.pid  # restarted in place
        assert proc.poll() is None
        assert "the embedding pack changed" in (state / "server.log").read_text(encoding="utf-8")
    finally:
        _stop(proc)


def test_serve_stop_returns_only_once_the_process_has_exited(vault_path):
    from hive_brain.daemon.server import stop_server

    state = _state()
    proc = _serve()
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        res = stop_server(state)
        assert res["stopped"] and res["pid"] == proc.pid
        assert proc.poll() is not None, "stop_server said stopped while the process still ran"
    finally:
        _stop(proc)


def test_a_server_stopped_by_a_signal_says_which_in_its_log(vault_path):
    """A server SIGTERMed (`serve --stop --all` from another session of the same user finds it in /proc)
    logged only "stopped": the sync harness took two such stops for servers that died."""
    import signal

    state = _state()
    proc = _serve()
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        log = (state / "server.log").read_text(encoding="utf-8")
        assert "stopping: signal SIGTERM" in log, log[-500:]
    finally:
        _stop(proc)


def test_serve_list_shows_every_server_and_stop_all_stops_them(vault_path, tmp_path):
    from hive_brain.store.vault import init_vault

    other = tmp_path / "other-vault"
    init_vault(other, resolve())
    procs = [_serve(), _serve(env=dict(os.environ, HIVE_BRAIN_VAULT=str(other)))]
    # Another session's server (its own runtime dir, as a second test suite or login has): not ours to stop.
    foreign_run = tmp_path / "foreign-run"
    foreign_run.mkdir(mode=0o700)
    foreign_vault = tmp_path / "foreign-vault"
    init_vault(foreign_vault, resolve())
    foreign = _serve(env=dict(os.environ, HIVE_BRAIN_VAULT=str(foreign_vault), XDG_RUNTIME_DIR=str(foreign_run)))
    try:
        client.wait_ready(open_vault(resolve(vault=foreign_vault)).state, START_TIMEOUT, proc=foreign)
        client.wait_ready(_state(), START_TIMEOUT, proc=procs[0])
        client.wait_ready(open_vault(resolve(vault=other)).state, START_TIMEOUT, proc=procs[1])
        listed = subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--list", "--json"], capture_output=True,
                                text=True, timeout=60, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        rows = {r["pid"]: r for r in json.loads(listed.stdout)["servers"]}
        assert set(rows) >= {p.pid for p in procs} and foreign.pid not in rows
        assert rows[procs[0].pid]["vault"] == str(vault_path.resolve())
        assert rows[procs[1].pid]["vault"] == str(other.resolve())
        for p in procs:
            assert rows[p.pid]["rssBytes"] > 10 * 2**20 and rows[p.pid]["uptimeS"] >= 0
        human = subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--list"], capture_output=True, text=True,
                               timeout=60, cwd=tmp_path).stdout
        assert f"pid {procs[0].pid}" in human and str(other.resolve()) in human
        stopped = subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--stop", "--all", "--json"],
                                 capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert all(p.poll() is not None for p in procs)
        assert foreign.poll() is None, "serve --stop --all stopped another session's server"
        again = subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--list", "--json"], capture_output=True,
                               text=True, timeout=60, cwd=tmp_path)
        assert not {r["pid"] for r in json.loads(again.stdout)["servers"]} & {p.pid for p in procs}
    finally:
        for p in [*procs, foreign]:
            _stop(p)


def test_an_idle_server_exits_after_idle_exit(vault_path, monkeypatch):
    from hive_brain.daemon.server import Server

    monkeypatch.setenv("HIVE_BRAIN_IDLE_EXIT", "3s")
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(START_TIMEOUT)
        client.call(srv.state, "recall", {"query": "anything"}, timeout=10)
        assert srv.stopping.wait(30)
        assert "idle_exit" in (srv.stop_reason or "")


def test_idle_exit_is_off_by_default_and_read_as_a_duration(monkeypatch):
    from hive_brain.errors import UsageError

    assert resolve().idle_exit == 0
    for text, secs in (("2h", 7200), ("30m", 1800), ("90s", 90), ("1", 3600), ("off", 0)):
        monkeypatch.setenv("HIVE_BRAIN_IDLE_EXIT", text)
        assert resolve().idle_exit == secs
    monkeypatch.setenv("HIVE_BRAIN_IDLE_EXIT", "soon")
    with pytest.raises(UsageError):
        resolve()


# ---------------------------------------------------------------------------------------------- quiet transcripts
def _aged(path: Path, entries: list[dict] | str, seconds_ago: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(entries if isinstance(entries, str) else "".join(json.dumps(e) + "\n" for e in entries),
                    encoding="utf-8")
    t = time.time() - seconds_ago
    os.utime(path, (t, t))
    return path


def _conversations(vault_path: Path, agent: str) -> list[str]:
    d = vault_path / "Memory" / "Conversations" / agent
    return sorted(p.read_text(encoding="utf-8") for p in d.glob("*.md")) if d.is_dir() else []


def test_the_server_captures_a_transcript_that_went_quiet(vault_path, monkeypatch):
    """A session whose end-of-session hook never ran (killed at `/exit`, Cline's hooks off): a running
    server captures its transcript once it has been quiet for `transcript_quiet`, redacted, one note per
    session, which the hook, running late, then finds as its own. A transcript still being written, one of
    an agent whose hooks never used this vault, one of another project and one from last week are left alone."""
    from tests.test_hooks import assistant, user
    from tests.test_installers import CLINE_HISTORY

    token = "ghp_" + "B" * 36
    home = Path.home()
    projects = home / ".claude" / "projects" / "-home-u-webapp"
    quiet = _aged(projects / "sess-quiet.jsonl", [user(f"Why does the deploy fail? token {token}", sid="sess-quiet"),
                                                  assistant("The runner lost its cache.", sid="sess-quiet")], 600)
    _aged(projects / "sess-live.jsonl", [user("Still typing here", sid="sess-live"),
                                         assistant("Go on.", sid="sess-live")], 0)
    _aged(projects / "sess-old.jsonl", [user("Last week's talk", sid="sess-old"),
                                        assistant("Long ago.", sid="sess-old")], 8 * 86400)
    _aged(home / ".cline" / "data" / "tasks" / "1733160000000" / "api_conversation_history.json",
          json.dumps(CLINE_HISTORY), 600)
    _aged(home / ".gemini" / "tmp" / "p1" / "chats" / "session-1.jsonl",
          [{"sessionId": "g1", "projectHash": "h", "startTime": "2026-03-01T10:00:00Z"},
           {"id": "m1", "type": "user", "content": "Gemini is not installed"},
           {"id": "m2", "type": "gemini", "content": "So this stays out."}], 600)
    # Another project's session of the same agent, whose hooks went to another vault (or none).
    _aged(home / ".claude" / "projects" / "-home-u-diary" / "sess-diary.jsonl",
          [user("Plan my holiday", sid="sess-diary"), assistant("Norway in June.", sid="sess-diary")], 600)
    # Each session's session-start hook ran against this vault, as at the sessions' start.
    for agent, fmt, stdin in (("claude-code", "claude", {"session_id": "sess-quiet", "transcript_path": str(quiet)}),
                              ("claude-code", "claude", {"session_id": "sess-live"}),
                              ("claude-code", "claude", {"session_id": "sess-old"}),
                              ("cline", "cline", {"taskId": "1733160000000"})):
        monkeypatch.setenv("HIVE_AGENT_ID", agent)
        assert hooks.dispatch("session-start", ["--format", fmt], stdin=json.dumps(stdin), hard_exit=False) == 0
    monkeypatch.delenv("HIVE_AGENT_ID")
    monkeypatch.setenv("HIVE_BRAIN_TRANSCRIPT_QUIET", "60s")
    state = _state()
    proc = _serve()
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        assert _until(lambda: _conversations(vault_path, "claude-code") and _conversations(vault_path, "cline"), 30), (
            (state / "server.log").read_text() if (state / "server.log").exists() else "no log")
    finally:
        _stop(proc)
    claude = _conversations(vault_path, "claude-code")
    assert len(claude) == 1 and "Why does the deploy fail?" in claude[0], claude  # not the live one, nor last week's
    assert "Norway" not in claude[0]  # nor another project's session
    assert token not in claude[0] and "redactions: 1" in claude[0]
    assert "**Assistant:** The runner lost its cache." in claude[0]
    cline = _conversations(vault_path, "cline")
    assert len(cline) == 1 and "Renamed it to backup-db." in cline[0] and "sk-ant-api03-" not in cline[0]
    assert _conversations(vault_path, "gemini") == []
    # The Stop hook arriving late writes nothing new: the same note, found by the session id.
    monkeypatch.setenv("HIVE_AGENT_ID", "claude-code")
    stdin = json.dumps({"session_id": "sess-quiet", "transcript_path": str(quiet), "hook_event_name": "Stop"})
    assert hooks.dispatch("stop", [], stdin=stdin, hard_exit=False) == 0
    assert hooks.read_status(resolve().state_dir)["last"]["stop"]["mode"] == "already"
    # A restarted server does not capture them again.
    proc = _serve()
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        time.sleep(2)
    finally:
        _stop(proc)
    assert _conversations(vault_path, "claude-code") == claude and _conversations(vault_path, "cline") == cline


def test_transcript_quiet_is_two_minutes_by_default_and_read_as_a_duration(monkeypatch):
    assert resolve().transcript_quiet == 120
    monkeypatch.setenv("HIVE_BRAIN_TRANSCRIPT_QUIET", "off")
    assert resolve().transcript_quiet == 0
