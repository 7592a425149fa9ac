"""Owner-only state: the state dir is 0700 and its files 0600, the lock file cannot be opened by anyone
else, and the server answers only its own uid (issue 12)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hive_brain.config import resolve
from hive_brain.rpc import client
from hive_brain.store.vault import init_vault, open_vault

from .helpers import remember, run

NOBODY = 65534


@pytest.fixture
def loose_umask():
    """The umask most users have (022): what state files got before state permissions were set."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _loose_base(monkeypatch) -> Path:
    """A world-traversable folder for vault and state (pytest's tmp dirs are 0700, which would hide
    the state from another user whatever its own modes are)."""
    base = Path(tempfile.mkdtemp(prefix="hb-perms-", dir="/tmp"))
    base.chmod(0o755)
    monkeypatch.setenv("HIVE_BRAIN_STATE_DIR", str(base / "state"))
    root = base / "vault"
    init_vault(root, resolve())
    monkeypatch.setenv("HIVE_BRAIN_VAULT", str(root))
    return base


def _write_state() -> Path:
    remember("Deploy day", "We deploy on Tuesdays.", "fact")
    remember("Private plan", "The otterplan stays private.", "lesson", agent="a")
    run("rebuild-index", "--lexical-only", "--quiet")
    run("browse")
    return open_vault(resolve()).state


def _loose(state: Path) -> list[str]:
    out = []
    for p in [state, *state.rglob("*")]:
        try:
            mode = p.lstat().st_mode
        except FileNotFoundError:
            continue  # a SQLite -wal/-shm file removed as its last connection closed
        if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
            out.append(f"{p} {stat.S_IMODE(mode):o}")
    return out


def test_state_is_owner_only(loose_umask, monkeypatch):
    base = _loose_base(monkeypatch)
    try:
        state = _write_state()
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        files = [p for p in state.rglob("*") if p.is_file()]  # is_file() is False for a vanished file
        assert len(files) > 10  # catalog, objects, generations, tantivy, lock, journal...
        assert _loose(state) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_state_made_by_an_older_version_is_tightened(loose_umask, monkeypatch):
    base = _loose_base(monkeypatch)
    try:
        state = open_vault(resolve()).state
        state.chmod(0o755)
        lock = state / "lock"
        lock.write_text("")
        lock.chmod(0o644)
        remember("Deploy day", "We deploy on Tuesdays.", "fact")
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    finally:
        shutil.rmtree(base, ignore_errors=True)


PROBE = r"""
import fcntl, json, os, socket, sys
paths, sock = json.loads(sys.argv[1]), sys.argv[2]
opened = []
for p in paths:
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        continue
    opened.append(p)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        opened.append("LOCKED " + p)
    except OSError:
        pass
    os.close(fd)
answered = None
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(sock)
    s.sendall(b'{"op": "recall", "args": {"query": "otterplan deploy", "agent": "a"}}\n')
    answered = s.recv(65536).decode() or None
except OSError:
    answered = None
print(json.dumps({"opened": opened, "answered": answered}))
"""


def _as_nobody(paths: list[str], sock: Path) -> dict:
    py = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    out = subprocess.run([py, "-c", PROBE, json.dumps(paths), str(sock)], user=NOBODY, group=NOBODY,
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="running a probe as another local user needs root (to switch to uid 65534)")
def test_another_local_user_reads_nothing_and_cannot_hold_the_lock(loose_umask, monkeypatch, tmp_path):
    base = _loose_base(monkeypatch)
    proc = None
    try:
        state = _write_state()
        proc = subprocess.Popen([sys.executable, "-m", "hive_brain", "serve"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
        client.wait_ready(state, 30.0, proc=proc)
        sock = client.socket_path(state)
        paths = [str(p) for p in state.rglob("*") if p.is_file() and not p.is_socket()]
        assert len(paths) > 10
        res = _as_nobody(paths, sock)
        assert res == {"opened": [], "answered": None}, res
        # Were the socket and every folder loosened by hand, the server still answers its own uid only.
        for d in [state.parent, state, *[p for p in state.rglob("*") if p.is_dir()]]:
            d.chmod(0o755)
        sock.chmod(0o666)
        res = _as_nobody([], sock)
        assert res["answered"] is None, res
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # and still answers its owner
            s.settimeout(10)
            s.connect(str(sock))
            s.sendall(b'{"op": "ping"}\n')
            assert json.loads(s.recv(65536))["ok"]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(15)
        shutil.rmtree(base, ignore_errors=True)
