"""One truth on every surface (issue 28): the same operations through the CLI in-process
(``HIVE_BRAIN_USE_SERVER=0``), the CLI through a running server, and MCP (the SDK's stdio client),
each on a vault of its own, give the same results and the same errors, type and data.

Real processes throughout: the server is ``hive-brain serve``, MCP is ``hive-brain mcp``, the lock
holder of the pending write is another process.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.config import resolve
from hive_brain.rpc import client
from hive_brain.store.vault import init_vault, open_vault

from .test_server import START_TIMEOUT, _serve, _stop
from .test_writes import _holder, _kill

CATALAN = "cafe.md"
LATIN_ID = "mem-01latin1note000000000000"


# ---------------------------------------------------------------------------------------------- surfaces
class Cli:
    """``hive-brain ... --json`` in this process; an error is its --json error object."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env

    def __call__(self, op: str, args: dict[str, Any], env: dict[str, str] | None = None) -> dict:
        argv = self.argv(op, args)
        res = CliRunner().invoke(main, [*argv, "--json"], env={**self.env, **(env or {})}, catch_exceptions=False)
        data = json.loads(res.output)
        if isinstance(data, dict) and data.get("ok") is False:
            assert res.exit_code in (1, 2), res.output
        else:
            assert res.exit_code == 0, res.output
        return data

    def argv(self, op: str, a: dict[str, Any]) -> list[str]:
        if op == "remember":
            return ["remember", "--type", a["type"], "--title", a["title"], "--content", a["content"]]
        if op == "evolve":
            return ["evolve", a["memory_id"], "--content", a["content"]]
        if op == "update":
            return ["update", a["memory_id"], "--tags", ",".join(a["tags"])]
        if op == "batch":
            f = self.tmp / "batch.json"
            f.write_text(json.dumps(a["records"]))
            return ["batch", "--file", str(f)]
        if op in ("recall", "answer"):
            return [op, a["query"], "--lexical"] if op == "recall" else [op, a["query"]]
        if op == "get":
            return ["get", a["memory_id"]]
        if op == "delete":
            return ["delete", a["memory_id"], *(["--confirm"] if a.get("confirm") else [])]
        raise AssertionError(op)


class Mcp:
    """One ``hive-brain mcp`` session (the SDK's client) driven from this thread."""

    def __init__(self, env: dict[str, str]) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        ready: asyncio.Future = self.loop.create_future()
        self.done = asyncio.Event()

        async def session() -> None:
            params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"], env=env)
            async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                self.session = s
                ready.set_result(True)
                await self.done.wait()

        self.task = asyncio.run_coroutine_threadsafe(session(), self.loop)
        asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(ready), 60), self.loop).result(70)

    def __call__(self, op: str, args: dict[str, Any], env: dict[str, str] | None = None) -> dict:
        res = asyncio.run_coroutine_threadsafe(self.session.call_tool(op, args), self.loop).result(120)
        text = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
        data = json.loads(text)
        assert res.is_error == (isinstance(data, dict) and data.get("ok") is False), text
        return data

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.done.set)
        try:
            self.task.result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


# ---------------------------------------------------------------------------------------------- the operations
def scenario(do: Callable[..., dict], vault: Path, hold_lock: Callable[[], Any]) -> dict[str, dict]:
    """The same operations with the same inputs; returns each one's raw result."""
    out: dict[str, dict] = {}
    out["remember"] = first = do("remember", {"type": "decision", "title": "Hosting",
                                              "content": "The web app is deployed on Heroku."})
    out["evolve"] = ev = do("evolve", {"memory_id": first["id"], "content": "The web app is deployed on Fly.io."})
    out["update"] = do("update", {"memory_id": ev["id"], "tags": ["hosting"]})
    out["batch"] = do("batch", {"records": [{"type": "fact", "title": "Port", "content": "The API listens on 8443."},
                                            {"type": "fact", "title": "Broken"}]})
    out["recall"] = do("recall", {"query": "where is the web app deployed"})
    out["answer"] = do("answer", {"query": "where is the web app deployed?"})
    out["get"] = do("get", {"memory_id": ev["id"]})
    out["get_missing"] = do("get", {"memory_id": "mem-doesnotexist"})
    doomed = do("remember", {"type": "fact", "title": "Temporary", "content": "A note to delete."})
    out["delete_unconfirmed"] = do("delete", {"memory_id": doomed["id"]})
    out["delete"] = do("delete", {"memory_id": doomed["id"], "confirm": True})
    # A note an older editor saved as CP-1252: read, never rewritten (a NoteError with its path).
    p = vault / "Memory" / "Distillations" / "Agent Memory" / CATALAN
    p.write_bytes((f"---\nid: {LATIN_ID}\ntype: fact\ntitle: Café order\n---\n\n"
                   "The café takes the crème brûlée order at noon.\n").encode("cp1252"))
    out["note_error"] = do("update", {"memory_id": LATIN_ID, "tags": ["food"]})
    with hold_lock():
        out["pending"] = do("remember", {"type": "fact", "title": "Queued", "content": "Kept while the vault was busy."},
                            env={"HIVE_BRAIN_LOCK_TIMEOUT": "0.5"})
    return out


_IDS = re.compile(r"\b(mem|pw)-[0-9a-z]{26}\b")
_PID = re.compile(r"pid \d+ \(([^,]+), since [^)]+\)")


def _mask(v: Any) -> Any:
    if isinstance(v, str):
        v = _PID.sub(r"pid N (\1)", _IDS.sub(lambda m: m.group(1) + "-*", v))
        return re.sub(r"-[0-9a-z]{6}\.md\b", "-*.md", v)  # the id's tail in a note's file name
    if isinstance(v, list):
        return [_mask(x) for x in v]
    if isinstance(v, dict):
        return {k: _mask(x) for k, x in v.items()}
    return v


def _error(res: dict, *, with_hint: bool) -> dict:
    keep = {k: v for k, v in res.items() if k != "hint" or with_hint}
    return _mask(keep)


def _write(res: dict) -> dict:
    # What a write reports, the same everywhere but for which process did it.
    return _mask({k: v for k, v in res.items() if k not in ("via", "serverStarted")})


def _recall(res: dict) -> list[tuple]:
    return [(h["title"], _mask(h["path"])) for h in res["hits"]]


def _get(res: dict) -> dict:
    chain = res["chain"] or []
    return _mask({"id": res["id"], "path": res["path"], "status": res["status"], "content": res["content"],
                  "chain": [c if isinstance(c, str) else c["id"] for c in chain]})


@pytest.mark.slow
def test_the_same_operations_give_the_same_results_and_errors_on_every_surface(tmp_path, monkeypatch):
    pytest.importorskip("mcp")
    results: dict[str, dict[str, dict]] = {}

    def vault_for(name: str) -> tuple[Path, dict[str, str]]:
        root, state = tmp_path / name / "vault", tmp_path / name / "state"
        env = {"HIVE_BRAIN_VAULT": str(root), "HIVE_BRAIN_STATE_DIR": str(state)}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        init_vault(root, resolve())
        return root, env

    def holder_for() -> Callable[[], Any]:
        state = open_vault(resolve()).state

        class Hold:
            def __enter__(self) -> None:
                self.p = _holder(state / "lock")

            def __exit__(self, *exc: Any) -> None:
                _kill(self.p)

        return Hold

    # 1. CLI in-process
    root, env = vault_for("inproc")
    results["inproc"] = scenario(Cli(tmp_path, {**env, "HIVE_BRAIN_USE_SERVER": "0"}), root, holder_for())

    # 2. CLI through the server (started with the default lock timeout: the caller's shorter wait counts)
    root, env = vault_for("server")
    proc = _serve(tmp_path)
    try:
        client.wait_ready(open_vault(resolve()).state, START_TIMEOUT, proc=proc)
        results["server"] = scenario(Cli(tmp_path, env), root, holder_for())
    finally:
        _stop(proc)

    # 3. MCP (its writes go by the CLI's policy; here in-process: no server runs for this vault)
    root, env = vault_for("mcp")
    full_env = {**os.environ, **env, "HIVE_BRAIN_LOCK_TIMEOUT": "0.5"}
    session = Mcp(full_env)
    try:
        results["mcp"] = scenario(session, root, holder_for())
    finally:
        session.close()

    inproc, server, mcp = results["inproc"], results["server"], results["mcp"]
    assert server["remember"]["via"] == "server" and inproc["remember"]["via"] == "local"
    for op in ("remember", "evolve", "update", "delete", "pending"):
        assert _write(inproc[op]) == _write(server[op]) == _write(mcp[op]), op
    assert inproc["pending"]["status"] == "pending" and inproc["pending"]["id"].startswith("pw-")
    assert "Pending" not in json.dumps(inproc["remember"])

    # Errors: the same type, message and data; the hint too between the CLI's two paths (MCP words its
    # hints in tool fields, tested in test_mcp.py).
    for op in ("batch", "get_missing", "delete_unconfirmed", "note_error"):
        a, b, c = inproc[op], server[op], mcp[op]
        assert a["ok"] is False, (op, a)
        assert _error(a, with_hint=True) == _error(b, with_hint=True), op
        assert _error(a, with_hint=False) == _error(c, with_hint=False), op
    assert inproc["batch"]["error"] == "Refused"
    assert [(r["index"], r["status"], r.get("error")) for r in mcp["batch"]["records"]] == [
        (0, "ok", None), (1, "refused", "UsageError")]
    assert "content" in mcp["batch"]["records"][1]["message"]
    assert inproc["get_missing"]["error"] == "NotFound" and inproc["delete_unconfirmed"]["error"] == "NotConfirmed"
    note = server["note_error"]
    assert note["error"] == "NoteError" and note["path"].endswith(CATALAN) and "cp1252" in note["problem"]

    # Reads: the same hits, the same answer, the same memory.
    assert _recall(inproc["recall"]) == _recall(server["recall"]) == _recall(mcp["recall"])
    assert inproc["recall"]["hits"][0]["title"] == "Hosting"
    for s in (inproc, server, mcp):
        assert s["answer"]["abstained"] is False and "Fly.io" in s["answer"]["context"]
    assert _get(inproc["get"]) == _get(server["get"]) == _get(mcp["get"])
    assert len(_get(inproc["get"])["chain"]) == 2
