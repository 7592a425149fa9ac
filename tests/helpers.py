"""Small helpers shared by tests (not fixtures)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from hive_brain.cli.app import main


def run(*args: str, input: str | None = None, ok: bool = True) -> Any:
    """Run the CLI with --json; return the parsed JSON (and check the exit code)."""
    res = CliRunner().invoke(main, [*args, "--json"], input=input, catch_exceptions=False)
    if ok:
        assert res.exit_code == 0, res.output
    try:
        data = json.loads(res.output)
    except ValueError:
        data = {"raw": res.output}
    if not ok:
        data["_exit"] = res.exit_code
    return data


def remember(title: str, content: str, type_: str = "preference", *extra: str, agent: str | None = None) -> dict:
    """`hive-brain remember` through the CLI (as `agent` when given)."""
    who = ("--agent", agent) if agent else ()
    res = run(*who, "remember", "--type", type_, "--title", title, "--content", content, *extra)
    assert "indexWarning" not in res, res["indexWarning"]  # every write must publish its generation
    return res


def credentials(agent: str | None) -> dict[str, str]:
    """The environment that proves ``agent`` (an issued credential) or, for None, the owner (its key)."""
    import os
    from pathlib import Path

    from hive_brain.store import identity

    state = Path(os.environ["HIVE_BRAIN_STATE_DIR"])
    if agent is None:
        key = Path(os.environ["HOME"]) / "owner.key"
        identity.init_owner(state, key)
        return {"HIVE_BRAIN_OWNER_KEY": str(key)}
    return {"HIVE_AGENT_CREDENTIAL": str(identity.issue_agent_credential(state, agent))}


def cli_as(*args: str, agent: str | None = None, enforce: bool = False, ok: bool = True) -> Any:
    """Run the CLI with --json as an agent (and optionally in enforcement mode); adds `_exit`."""
    env = {"HIVE_AGENT_ID": agent} if agent is not None else {}
    if enforce:
        env["HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS"] = "1"
        env.update(credentials(agent))
    res = CliRunner().invoke(main, [*args, "--json"], env=env, catch_exceptions=False)
    if ok:
        assert res.exit_code == 0, res.output
    data = json.loads(res.output) if res.output.strip() else {}
    if isinstance(data, dict):
        data["_exit"] = res.exit_code
    return data


def doctor() -> dict:
    """`hive-brain doctor --json`, checking its exit code: 1 exactly when it found something to fix."""
    res = run("doctor", ok=False)
    found = bool(res["problems"] or res["conflicts"] or res["damagedNow"])
    assert res["_exit"] == (1 if found else 0), res
    return res


@contextmanager
def hung_server(state: Path) -> Iterator[list[object]]:
    """A listener at the vault's server socket that accepts and never answers, behind a ready marker
    naming this (live) process: a hung server. Yields the connections it accepted; closed on exit."""
    import os
    import socket
    import threading

    from hive_brain.rpc import client

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(client.socket_path(state)))
    listener.listen(8)
    (state / client.READY_NAME).write_text(f"{os.getpid()}\n")
    accepted: list[object] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)  # and never answer

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield accepted
    finally:
        listener.close()


def count_calls(monkeypatch: Any, owner: Any, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (still made) for this test: ``[n]``, read after the fact."""
    calls = [0]
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls
