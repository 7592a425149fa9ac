"""Where hive-brain keeps its state, config and models by default.

Pinned because an existing user's index, journal and hook status live there: a change of library or
code must not move them.  The hand-written XDG code stays (platformdirs was measured and dropped:
its import pulls in tempfile/shutil/random on every prompt-hook run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------------------------------------- the file, read fast
_LINE = st.one_of(
    st.just(""), st.just("# a comment"), st.just("[table]"), st.just("a.b = 1"), st.just("x = 1e5"),
    st.tuples(st.sampled_from(["vault", "hook_deadline", "semantic", "k-1", "K_2", "bad key", '"q"']),
              st.sampled_from([" = ", "=", "\t=  "]),
              st.one_of(st.text(max_size=12).map(lambda t: '"' + t + '"'), st.text(max_size=12).map(lambda t: "'" + t + "'"),
                        st.sampled_from(["true", "false", "True", "0", "007", "-3", "+8000", "2.5", "-0.0", "1.", "1_000"])),
              st.sampled_from(["", "  # note", " #", "\r", " x"])).map("".join),
)


@given(st.lists(_LINE, max_size=6))
@settings(max_examples=300, deadline=None)
def test_the_fast_config_reader_agrees_with_tomllib_or_leaves_it_to_tomllib(lines):
    """Whatever the fast reader accepts, it reads exactly as tomllib; everything else goes to tomllib."""
    text = "\n".join(lines)
    got = config._simple_toml(text)
    if got is None:
        return
    assert got == tomllib.loads(text)


def test_the_config_file_config_set_writes_is_read_without_tomllib(tmp_path, monkeypatch):
    monkeypatch.setenv("HIVE_BRAIN_CONFIG", str(tmp_path / "config.toml"))
    config.set_in_file("vault", str(tmp_path / "my brain"))
    config.set_in_file("hook_deadline", "2.5")
    config.set_in_file("use_server", "false")
    text = (tmp_path / "config.toml").read_text()
    assert config._simple_toml(text) == tomllib.loads(text)
    s = config.resolve()
    assert (s.vault, s.hook_deadline, s.use_server) == (tmp_path / "my brain", 2.5, False)
    code = "import sys, hive_brain.config as c; c.resolve(); print('tomllib' in sys.modules, 'typing' in sys.modules)"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(config.__file__).parents[1])})
    assert out.stdout.split() == ["False", "False"]
    (tmp_path / "config.toml").write_text('vault = "x"\n[table]\nk = 1\n')  # not the simple form: tomllib reads it
    assert config._simple_toml((tmp_path / "config.toml").read_text()) is None
    assert config.resolve().vault == Path("x")


def test_the_vault_you_stand_in_beats_the_config_files(tmp_path, monkeypatch):
    """`--help`: the default vault is $HIVE_BRAIN_VAULT or the nearest vault above the current folder;
    the config file's vault is for folders outside any vault. A write shows where it landed, in full."""
    from click.testing import CliRunner

    from hive_brain.cli.app import main
    from hive_brain.config import resolve
    from hive_brain.store.vault import init_vault

    configured, here = tmp_path / "configured", tmp_path / "here"
    init_vault(configured, resolve())
    init_vault(here, resolve())
    (here / "Projects" / "web").mkdir(parents=True)
    runner = CliRunner()
    assert runner.invoke(main, ["config", "set", "vault", str(configured)]).exit_code == 0
    monkeypatch.chdir(here / "Projects" / "web")
    res = runner.invoke(main, ["remember", "--type", "fact", "--title", "Where am I", "--content", "In the vault here."])
    assert res.exit_code == 0, res.output
    written = list(here.rglob("where-am-i-*.md"))
    assert len(written) == 1 and not list(configured.rglob("where-am-i-*.md"))
    assert str(written[0]) in res.output  # the absolute path, not only Memory/...
    # Outside any vault the config file's vault is the default.
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(main, ["remember", "--type", "fact", "--title", "Elsewhere", "--content", "In the configured one."])
    assert res.exit_code == 0, res.output
    assert len(list(configured.rglob("elsewhere-*.md"))) == 1 and str(configured) in res.output
