"""CLI commands for the long-running server (`serve`). Imports stay inside the command: importing
the CLI must not pull in the server's dependencies."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .base import State, command, out

if TYPE_CHECKING:
    from ..config import Settings
    from ..daemon.server import Server


def _state_dir(state: State) -> tuple[Settings, Path]:
    from ..store.vault import open_vault

    settings = state.settings(identify=False)  # the server checks each request's own identity
    return settings, open_vault(settings).state


@command("serve")
@click.option("--stop", "stop", is_flag=True, help="Stop the running server of this vault and wait until it exits.")
@click.option("--status", "show_status", is_flag=True, help="Show whether a server runs for this vault.")
@click.option("--detach", is_flag=True, help="Start the server in the background and return once it answers.")
@click.option("--list", "show_list", is_flag=True,
              help="List every hive-brain server of this user (any vault): vault, pid, memory, uptime.")
@click.option("--all", "all_servers", is_flag=True, help="With --stop: stop every hive-brain server of this user.")
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="Seconds to wait for --detach to become ready or --stop to finish.")
def serve_cmd(state: State, stop: bool, show_status: bool, detach: bool, show_list: bool, all_servers: bool,
              timeout: float, as_json: bool) -> None:
    """Run the vault's server: watches the notes, keeps the index current, answers recalls warm.

    One server per vault (a second one refuses). While it runs it is the vault's background indexer:
    an edit saved in Obsidian is searchable within about a second, vectors are computed in the
    background, and the CLI, hooks and MCP get warm answers through a Unix socket in the state dir.
    Without it everything still works in-process, only slower. Runs in the foreground until
    Ctrl-C/SIGTERM or `serve --stop`; logs go to server.log in the state dir.

    \b
    Example:
      hive-brain serve --detach      # start in the background
      hive-brain serve --status
      hive-brain serve --stop
      hive-brain serve --list        # every server of this user, any vault
      hive-brain serve --stop --all
    """
    from ..errors import UsageError

    if sum((stop, show_status, detach, show_list)) > 1:
        raise UsageError("use at most one of --stop, --status, --detach, --list")
    if all_servers and not stop:
        raise UsageError("--all goes with --stop", hint="hive-brain serve --stop --all")
    if show_list:
        from ..daemon.registry import servers

        rows = servers()
        out(as_json, {"servers": rows}, lambda c: _print_list(rows))
        return
    if stop and all_servers:
        from ..daemon.server import stop_all

        rows = stop_all(timeout=timeout)
        failed = [r for r in rows if not r["stopped"]]
        out(as_json, {"servers": rows, "stopped": len(rows) - len(failed)}, lambda c: click.echo(
            f"stopped {len(rows) - len(failed)} server(s)" if rows else "no hive-brain server running"))
        if failed:
            from ..errors import HiveBrainError

            raise HiveBrainError(f"{len(failed)} server(s) did not stop: {failed[0].get('error')}",
                                 hint=f"kill them: kill -9 {' '.join(str(r['pid']) for r in failed)}")
        return
    settings, state_dir = _state_dir(state)

    if show_status:
        from ..rpc.client import call, server_info

        res = server_info(state_dir)
        if res.get("running"):
            from ..rpc.client import ServerUnavailable

            try:
                res["status"] = call(state_dir, "status", timeout=2.0)
            except ServerUnavailable:
                pass

        def human_status(c: Any) -> None:
            if not res.get("running"):
                c.print("server not running" + (" (stale files from a crashed server)" if res.get("stale") else ""))
                return
            st = res.get("status") or {}
            sem = st.get("semantic") or {}
            c.print(f"server running, pid {res['pid']}, since {res.get('since')}\nsocket {res['socket']}", markup=False)
            if st:
                c.print(f"generation {st.get('generation')} · watcher {st.get('watcher')} · semantic "
                        f"{'on, ' + str(sem.get('pendingPassages')) + ' passages pending' if sem.get('on') else 'off'}"
                        f" · {st.get('requests')} requests", markup=False)

        out(as_json, res, human_status)
        return

    if stop:
        from ..daemon.server import stop_server

        res = stop_server(state_dir, timeout=timeout)
        out(as_json, res, lambda c: c.print(
            f"stopped the server (pid {res['pid']}, {res['method']})" if res["stopped"] else "server not running"))
        return

    if detach:
        from ..rpc.client import ensure_server, server_info

        before = server_info(state_dir)
        pong = ensure_server(settings, timeout=timeout)
        res = {**server_info(state_dir), "alreadyRunning": bool(before.get("running")), "generation": pong.get("generation")}
        out(as_json, res, lambda c: c.print(
            f"server {'already running' if res['alreadyRunning'] else 'started'}, pid {res['pid']} ({res['socket']})",
            markup=False))
        return

    from ..daemon.server import run_foreground

    def started(srv: Server) -> None:
        if not as_json:
            click.echo(f"hive-brain server for {srv.vault.root} (pid {os.getpid()}) on {srv.socket}; "
                       "Ctrl-C or `hive-brain serve --stop` stops it", err=True)

    code = run_foreground(settings, on_started=started)
    if as_json:
        out(True, {"stopped": True}, lambda c: None)
    # Everything is closed (socket, locks, log): skip the interpreter's teardown, which spent seconds
    # finalising model sessions and index handles after the server had said it stopped.
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _print_list(rows: list[dict[str, Any]]) -> None:
    from .base import duration

    if not rows:
        click.echo("no hive-brain server running")
        return
    for r in rows:
        rss = f"{r['rssBytes'] / 2**20:,.0f} MB" if r.get("rssBytes") else "? MB"
        up = duration(r["uptimeS"]) if r.get("uptimeS") is not None else "?"
        old = "" if r.get("registered") else "  (an older version)"
        click.echo(f"pid {r['pid']}  {rss}  up {up}  {r.get('vault') or '?'}{old}")
    total = sum(r.get("rssBytes") or 0 for r in rows)
    click.echo(f"{len(rows)} server(s), {total / 2**20:,.0f} MB")


@click.group("service")
def service_group() -> None:
    """Keep the vault's server running from login: a systemd user unit (Linux) or launchd agent (macOS).

    Optional: hooks and commands start the server on demand (`autostart`); a service has it warm
    before the first prompt.

    \b
    Example:
      hive-brain service install
      hive-brain service uninstall
    """


@command("install", group=service_group)
@click.option("--dry-run", is_flag=True, help="Print the service file; write and start nothing.")
@click.option("--no-start", is_flag=True, help="Write the service file but do not enable or start it.")
def service_install_cmd(state: State, dry_run: bool, no_start: bool, as_json: bool) -> None:
    """Write the user service for this vault and enable it (idempotent).

    \b
    Example:
      hive-brain service install --dry-run
      hive-brain service install
    """
    from ..daemon.service import install

    res = install(state.settings(), dry_run=dry_run, start=not no_start)

    def human(c: Any) -> None:
        if dry_run:
            click.echo(f"# {res['path']}\n{res['text']}", nl=False)
            return
        c.print(f"{'wrote' if res['changed'] else 'unchanged'} {res['path']} ({res['kind']})", markup=False)
        if res.get("started"):
            c.print(f"enabled and started {res['name']}", markup=False)
        elif res.get("note"):
            c.print(res["note"], markup=False)

    out(as_json, res, human)


@command("uninstall", group=service_group)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; change nothing.")
def service_uninstall_cmd(state: State, dry_run: bool, as_json: bool) -> None:
    """Stop, disable and remove the user service of this vault.

    \b
    Example:
      hive-brain service uninstall
    """
    from ..daemon.service import uninstall

    res = uninstall(state.settings(), dry_run=dry_run)
    out(as_json, res, lambda c: c.print(
        (f"removed {res['path']}" if res["removed"] else f"no service file at {res['path']}")
        + (f" ({res['note']})" if res.get("note") else ""), markup=False))


COMMANDS: list[click.Command] = [serve_cmd, service_group]
