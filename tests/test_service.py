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
