"""`hive-brain service install|uninstall`: the user service file, written where the service manager
reads it, and a command line that really starts the vault's server."""

from __future__ import annotations

import os
import plistlib
import shlex
import signal
import subprocess
import sys

from hive_brain.config import resolve
from hive_brain.daemon.service import plan
from hive_brain.rpc import client
from hive_brain.store.vault import open_vault

from .helpers import run


def _no_service_manager(monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_install_writes_the_unit_once_and_says_how_to_enable_it_without_systemctl(vault_path, tmp_path, monkeypatch):
    dry = run("service", "install", "--dry-run")
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / dry["name"]
    assert dry["path"] == str(unit) and not unit.exists()
    assert f"--vault {vault_path.resolve()} serve" in dry["text"] or f"--vault {vault_path} serve" in dry["text"]
    _no_service_manager(monkeypatch, tmp_path)
    res = run("service", "install")
    assert res["changed"] and not res["started"] and "systemctl --user enable --now" in res["note"]
    text = unit.read_text()
    assert "WantedBy=default.target" in text and f"HIVE_BRAIN_STATE_DIR={tmp_path / 'state'}" in text
    assert run("service", "install")["changed"] is False
    gone = run("service", "uninstall")
    assert gone["removed"] and not unit.exists()
    assert run("service", "uninstall")["removed"] is False


def test_the_units_command_line_starts_the_vaults_server(vault_path):
    p = plan(resolve(), platform="linux")
    exec_start = next(line for line in p["text"].splitlines() if line.startswith("ExecStart="))
    env_lines = [line.split("=", 1)[1].strip('"') for line in p["text"].splitlines() if line.startswith("Environment=")]
    env = {**os.environ, **dict(e.split("=", 1) for e in env_lines)}
    proc = subprocess.Popen(shlex.split(exec_start.split("=", 1)[1]), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pong = client.wait_ready(open_vault(resolve()).state, 60, proc=proc)
        assert pong["ready"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_launchd_agent_on_macos(vault_path):
    p = plan(resolve(), platform="darwin")
    data = plistlib.loads(p["text"].encode())
    assert data["ProgramArguments"][:3] == [sys.executable, "-m", "hive_brain"]
    assert data["ProgramArguments"][-1] == "serve" and data["KeepAlive"] is True
    assert p["path"].endswith(f"{data['Label']}.plist") and "LaunchAgents" in p["path"]


def test_install_fails_with_one_clear_line_when_systemctl_fails(vault_path, tmp_path, monkeypatch):
    """A service manager that is there and refuses (no user session bus, a broken unit) is a failure:
    exit 1 and its own words, never exit 0 with b'...' in the note."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "systemctl").write_text("#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
    (fake / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    p = subprocess.run([sys.executable, "-m", "hive_brain", "service", "install"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ))
    assert p.returncode == 1, (p.stdout, p.stderr)
    err = p.stderr.strip()
    assert "Failed to connect to bus: No medium found" in err and "b'" not in err and 'b"' not in err
    assert "daemon-reload" in err
    assert "Traceback" not in err
