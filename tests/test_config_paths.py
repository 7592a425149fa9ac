"""Where hive-brain keeps its state, config and models by default.

Pinned because an existing user's index, journal and hook status live there: a change of library or
code must not move them.  The hand-written XDG code stays (platformdirs was measured and dropped:
its import pulls in tempfile/shutil/random on every prompt-hook run).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hive_brain import config

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="pins the Linux (XDG) layout")

XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")


@linux_only
def test_defaults_without_xdg_vars_are_under_home(monkeypatch, tmp_path):
    for var in (*XDG, "HIVE_BRAIN_STATE_DIR", "HIVE_BRAIN_MODEL_DIR"):
        monkeypatch.delenv(var, raising=False)
    home = Path.home()
    s = config.resolve()
    assert s.state_dir == home / ".local/share/hive-brain"
    assert s.model_dir == home / ".cache/hive-brain/models"
    assert config.config_file() == home / ".config/hive-brain/config.toml"


@linux_only
def test_xdg_vars_move_each_directory(monkeypatch, tmp_path):
    for var in ("HIVE_BRAIN_STATE_DIR", "HIVE_BRAIN_MODEL_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "d"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "k"))
    s = config.resolve()
    assert s.state_dir == tmp_path / "d/hive-brain"
    assert s.model_dir == tmp_path / "k/hive-brain/models"
    assert config.config_file() == tmp_path / "c/hive-brain/config.toml"


@linux_only
def test_empty_xdg_var_means_unset(monkeypatch):
    for var in ("HIVE_BRAIN_STATE_DIR", "HIVE_BRAIN_MODEL_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "")
    assert config.resolve().state_dir == Path.home() / ".local/share/hive-brain"


def test_env_and_flags_still_win_over_the_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("HIVE_BRAIN_STATE_DIR", str(tmp_path / "s"))
    assert config.resolve().state_dir == tmp_path / "s"
    assert config.resolve(state_dir=str(tmp_path / "f")).state_dir == tmp_path / "f"


def test_resolving_settings_imports_nothing_heavy():
    """The prompt hook resolves settings on every prompt: keep that to the standard library's basics."""
    code = (
        "import sys, hive_brain.config as c; c.resolve(); c.config_file(); "
        "print(' '.join(m for m in ('platformdirs', 'tempfile', 'shutil', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_due_allows_an_action_once_per_interval(tmp_path):
    """Starting a server or a rebuild that may fail again at once: at most once per interval."""
    import os

    from hive_brain.store.fsutil import due

    marker = tmp_path / "sub" / "marker"
    assert due(marker, 60) is True and marker.exists()
    assert due(marker, 60) is False
    old = marker.stat().st_mtime - 120
    os.utime(marker, (old, old))
    assert due(marker, 60) is True
