"""A user-level service that keeps the vault's server running across logins: a systemd user unit on
Linux, a launchd agent on macOS. Optional: hooks and commands start the server on demand anyway
(``autostart``); a service makes it warm from login, before the first prompt.

One service per vault, named from the vault id, running ``python -m hive_brain --vault ROOT serve`` in
the foreground with this interpreter, so the service runs the same install the user runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import HiveBrainError, UsageError
from ..store.fsutil import atomic_write_text
from ..store.vault import open_vault

LAUNCHD_LABEL = "dev.hive-brain.{vid}"


def _env_lines(settings: Settings) -> dict[str, str]:
    # What the server needs to find the same state and model as the user's shell does.
    env = {"HIVE_BRAIN_STATE_DIR": str(settings.state_dir), "HIVE_BRAIN_MODEL_DIR": str(settings.model_dir)}
    cfg = os.environ.get("HIVE_BRAIN_CONFIG")
    if cfg:
        env["HIVE_BRAIN_CONFIG"] = cfg
    return env


def plan(settings: Settings, *, platform: str | None = None) -> dict[str, Any]:
    """What ``install`` would write and run (nothing is touched)."""
    platform = platform or sys.platform
    vault = open_vault(settings)
    vid = vault.vault_id[:12]
    argv = [sys.executable, "-m", "hive_brain", "--vault", str(vault.root), "serve"]
    env = _env_lines(settings)
    if platform == "darwin":
        label = LAUNCHD_LABEL.format(vid=vid)
        path = Path.home() / "Library" / "LaunchAgents" / f"{label}.plist"
        args = "".join(f"    <string>{_xml(a)}</string>\n" for a in argv)
        envs = "".join(f"    <key>{_xml(k)}</key><string>{_xml(v)}</string>\n" for k, v in env.items())
        text = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
            '<plist version="1.0">\n<dict>\n'
            f"  <key>Label</key><string>{label}</string>\n"
            f"  <key>ProgramArguments</key>\n  <array>\n{args}  </array>\n"
            f"  <key>EnvironmentVariables</key>\n  <dict>\n{envs}  </dict>\n"
            "  <key>RunAtLoad</key><true/>\n  <key>KeepAlive</key><true/>\n"
            "</dict>\n</plist>\n"
        )
        return {"kind": "launchd", "name": label, "path": str(path), "text": text, "vault": str(vault.root),
                "enable": ["launchctl", "load", "-w", str(path)], "disable": ["launchctl", "unload", "-w", str(path)]}
    if platform.startswith("linux"):
        name = f"hive-brain-{vid}.service"
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        path = base / "systemd" / "user" / name
        text = (
            "[Unit]\n"
            f"Description=hive-brain memory server for {vault.root}\n\n"
            "[Service]\n"
            f"ExecStart={' '.join(_systemd_quote(a) for a in argv)}\n"
            + "".join(f"Environment={_systemd_quote(f'{k}={v}')}\n" for k, v in env.items())
            + "Restart=on-failure\nRestartSec=5\n\n"
            "[Install]\nWantedBy=default.target\n"
        )
        return {"kind": "systemd", "name": name, "path": str(path), "text": text, "vault": str(vault.root),
                "enable": ["systemctl", "--user", "enable", "--now", name],
                "disable": ["systemctl", "--user", "disable", "--now", name]}
    raise UsageError(f"no user service manager is supported on {platform}",
                     hint="start the server with `hive-brain serve --detach` (hooks also start it on demand)")


def install(settings: Settings, *, dry_run: bool = False, start: bool = True) -> dict[str, Any]:
    p = plan(settings)
    path = Path(p["path"])
    old = path.read_text(encoding="utf-8") if path.exists() else None
    res = {**{k: v for k, v in p.items() if k != "text"}, "changed": old != p["text"], "dryRun": dry_run,
           "started": False}
    if dry_run:
        return {**res, "text": p["text"]}
    if old != p["text"]:
        atomic_write_text(path, p["text"])
    if start:
        res.update(_run(p["enable"], reload=p["kind"] == "systemd"))
        if res.get("failed"):
            # The service manager is there and refused: a failure, not a note (it used to exit 0).
            raise HiveBrainError(f"wrote {path}, but {res['note']}",
                                 hint=f"fix what it says, then run `{' '.join(p['enable'])}` (or `hive-brain service install` again)")
    return res


def uninstall(settings: Settings, *, dry_run: bool = False) -> dict[str, Any]:
    p = plan(settings)
    path = Path(p["path"])
    res = {**{k: v for k, v in p.items() if k != "text"}, "removed": path.exists(), "dryRun": dry_run}
    if dry_run or not path.exists():
        return res
    res.update({("stopped" if k == "started" else k): v for k, v in _run(p["disable"], reload=False).items()})
    path.unlink()
    return res


def _run(argv: list[str], *, reload: bool) -> dict[str, Any]:
    """Run the service manager; where there is none (a container, no user session) say what to run."""
    if shutil.which(argv[0]) is None:
        return {"started": False, "note": f"{argv[0]} not found: run `{' '.join(argv)}` where it is available"}
    steps = ([["systemctl", "--user", "daemon-reload"]] if reload else []) + [argv]
    for step in steps:
        try:
            subprocess.run(step, capture_output=True, text=True, errors="replace", timeout=60, check=True)
        except (OSError, subprocess.SubprocessError) as e:
            err = getattr(e, "stderr", None) or getattr(e, "stdout", None) or ""
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            why = lines[-1] if lines else (f"exit code {e.returncode}" if isinstance(e, subprocess.CalledProcessError)
                                           else f"{type(e).__name__}: {e}")
            return {"started": False, "failed": True, "note": f"`{' '.join(step)}` failed: {why}"}
    return {"started": True}


def _xml(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _systemd_quote(s: str) -> str:
    if s and all(c.isalnum() or c in "/._-=:+@" for c in s):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
