"""Enforcement mode: the isolation matrix (issue 12).

Callers: agent a and agent b (each with its own credential), no id, an empty id, a spoofed id (b's
credential claiming a; a's id with no credential), Claude Code's shell without an id, and the owner
(its key). Commands: every read and write command of the CLI, and the server socket. Each caller may
see only what its layers hold: a's private words never reach anyone but a, b's never anyone but b,
and a caller that proves nothing is refused before it reads or writes anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.config import resolve
from hive_brain.rpc import client
from hive_brain.store.vault import open_vault

from .helpers import credentials

A_WORD, B_WORD = "aardvarkplan", "bisonplan"


def _invoke(args: list[str], env: dict[str, str | None], stdin: str | None = None) -> tuple[int, str]:
    full = {"HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS": "1", "HIVE_AGENT_ID": None, "HIVE_AGENT_CREDENTIAL": None,
            "HIVE_BRAIN_OWNER_KEY": None, "CLAUDECODE": None, **env}
    res = CliRunner().invoke(main, [*args, "--json"], env=full, input=stdin, catch_exceptions=False)
    return res.exit_code, res.output


def _refused(out: str) -> bool:
    return json.loads(out).get("error") in ("PermissionDenied", "InvalidAgentId")


def _vault_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.md"))}


@pytest.fixture
def seeded(vault_path):
    """A shared memory, one private memory of a and one of b, written through the CLI as each of them."""
    owner, a, b = credentials(None), credentials("a"), credentials("b")
    ids = {}
    for who, env, title, content in (
        ("owner", owner, "Deploy day", "We deploy on Tuesdays after the standup."),
        ("a", {"HIVE_AGENT_ID": "a", **a}, "Aardvark plan", f"The {A_WORD} moves the cache to Redis."),
        ("b", {"HIVE_AGENT_ID": "b", **b}, "Bison plan", f"The {B_WORD} moves logs to Loki."),
    ):
        code, out = _invoke(["remember", "--type", "lesson", "--title", title, "--content", content], env)
        assert code == 0, out
        ids[who] = json.loads(out)["id"]
    # A note of b's that does not parse: doctor names broken notes, but only to those who may read them.
    (vault_path / "Agents" / "b" / "Memory" / "bison-broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n")
    spoof_token = Path(b["HIVE_AGENT_CREDENTIAL"])  # b's credential, presented as a's
    callers: dict[str, dict[str, str | None]] = {
        "a": {"HIVE_AGENT_ID": "a", **a},
        "b": {"HIVE_AGENT_ID": "b", **b},
        "no id": {},
        "empty id": {"HIVE_AGENT_ID": ""},
        "spoofed id": {"HIVE_AGENT_ID": "a", "HIVE_AGENT_CREDENTIAL": str(spoof_token)},
        "id without credential": {"HIVE_AGENT_ID": "a"},
        "claude code shell": {"CLAUDECODE": "1"},
        "owner": owner,
    }
    return ids, callers


# What each caller may read: a its private word, b its own, the owner the shared layer only.
MAY_READ = {"a": {A_WORD}, "b": {B_WORD}, "owner": set()}
READS = [
    ["recall", "plan moves cache logs", "--scope", "full-vault"],
    ["recall", "Redis cache"], ["recall", "Loki logs"],
    ["answer", "what does the plan move?"],
    ["browse", "--detail", "overview"], ["browse", "--path", "Agents", "--detail", "overview"],
    ["generations"], ["compare", "plan", "--from-generation", "1"], ["replay", "plan moves", "--generation", "3"],
    ["health"], ["status"], ["doctor"], ["core", "--budget", "4000"], ["review", "list"],
]


def test_isolation_matrix_reads(seeded, vault_path):
    ids, callers = seeded
    cases = 0
    for name, env in callers.items():
        allowed = MAY_READ.get(name, set())
        # Naming another agent on the command line is a claim like any other (the owner alone may act as
        # an agent it names: checked in test_owner_acts_as_an_agent_it_names).
        # ("spoofed id" holds b's own credential: with --agent b it simply is b.)
        as_other = [] if name in ("owner", "spoofed id") else [["--agent", "b", "core"],
                                                               ["--agent", "b", "recall", "Loki logs"]]
        for args in [*READS, ["get", "--memory-id", ids["a"]], ["get", "--memory-id", ids["b"]], *as_other]:
            code, out = _invoke(args, env)
            cases += 1
            low = out.lower()
            for word, title in ((A_WORD, "aardvark"), (B_WORD, "bison")):
                if name == "owner" and args == ["doctor"]:
                    assert word not in low  # the owner's doctor names every broken note, and no content
                    continue
                if word not in allowed:
                    assert word not in low and title not in low, (name, args, out[:600])
            if name not in MAY_READ:  # proves nothing: refused before anything is read
                assert code != 0 and _refused(out), (name, args, out[:400])
            if name == "b" and args[:2] == ["--agent", "b"]:
                assert code == 0, out
        if allowed:  # and what it may read, it does read
            code, out = _invoke(["recall", {"a": "Redis cache", "b": "Loki logs"}[name]], env)
            assert code == 0 and next(iter(allowed)) in out, out
    assert cases == len(callers) * (len(READS) + 4) - 4


def test_owner_acts_as_an_agent_it_names(seeded):
    _ids, callers = seeded
    code, out = _invoke(["--agent", "b", "recall", "Loki logs"], callers["owner"])
    assert code == 0 and B_WORD in out and A_WORD not in out


def test_isolation_matrix_writes(seeded, vault_path):
    ids, callers = seeded
    for name, env in callers.items():
        own = {"a": ids["a"], "b": ids["b"]}.get(name)
        for target_owner, target in (("owner", ids["owner"]), ("a", ids["a"]), ("b", ids["b"])):
            if target == own:
                continue
            for args in (
                ["update", "--memory-id", target, "--tags", "x"],
                ["update", "--memory-id", target, "--status", "archived"],
                ["evolve", "--memory-id", target, "--content", "changed by someone else"],
                ["delete", "--memory-id", target, "--confirm", "--force"],
            ):
                if name == "owner" and target_owner == "owner":
                    continue  # the owner's own maintenance of shared memory is allowed
                before = _vault_bytes(vault_path)
                code, out = _invoke(args, env)
                assert code != 0, (name, args, out[:400])
                assert _vault_bytes(vault_path) == before, (name, args)
        if name in MAY_READ:
            continue
        before = _vault_bytes(vault_path)
        batch = json.dumps([{"type": "fact", "title": "Sneaky", "content": "A sneaky write."}])
        for args, stdin in (
            (["remember", "--type", "fact", "--title", "Sneaky", "--content", "A sneaky write."], None),
            (["remember", "--type", "fact", "--title", "Sneaky", "--content", "A sneaky write.",
              "--memory-scope", "hive"], None),
            (["batch", "--file", "-"], batch),
            (["rebuild-index", "--lexical-only", "--quiet"], None),
            (["generations", "--prune", "--keep", "1"], None),
            (["owner", "issue", "--agent", "a"], None),
            (["hooks", "install", "--agent", "codex"], None),
        ):
            code, out = _invoke(args, env, stdin)
            assert code != 0 and _refused(out), (name, args, out[:400])
        assert _vault_bytes(vault_path) == before, name
    # Owner-only maintenance stays the owner's even for a proved agent.
    for args in (["rebuild-index", "--lexical-only", "--quiet"], ["generations", "--prune", "--keep", "1"],
                 ["owner", "issue", "--agent", "a"], ["hooks", "install", "--agent", "codex"]):
        code, out = _invoke(args, callers["a"])
        assert code != 0 and "PermissionDenied" in out, (args, out[:400])
    code, out = _invoke(["rebuild-index", "--lexical-only", "--quiet"], callers["owner"])
    assert code == 0, out


def test_isolation_matrix_server_socket(seeded, vault_path, tmp_path):
    """The server checks each request's proof in enforcement mode; a bare `agent` field proves nothing."""
    ids, callers = seeded
    state = open_vault(resolve()).state
    env = {**os.environ, "HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hive_brain", "serve"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        client.wait_ready(state, 30.0, proc=proc)
        tok = {who: Path(str(callers[who]["HIVE_AGENT_CREDENTIAL"])).read_text().strip() for who in ("a", "b")}
        owner_key = Path(str(callers["owner"]["HIVE_BRAIN_OWNER_KEY"])).read_text().strip()

        def ask(args: dict) -> tuple[bool, str]:
            try:
                res = client.call(state, "recall", {"query": "plan moves Redis Loki", "scope": "full-vault", **args},
                                  timeout=10)
            except Exception as e:  # noqa: BLE001 - the refusal is the answer here
                return False, f"{type(e).__name__}: {e}"
            return True, json.dumps(res).lower()

        refused = [
            {}, {"agent": "a"}, {"agent": "a", "auth": {"credential": tok["b"]}}, {"agent": 123}, {"agent": True},
            {"agent": ""}, {"agent": "a", "auth": {"credential": ""}}, {"agent": "a", "auth": "x"},
            {"agent": "a", "auth": {"ownerKey": "hbo_guess"}}, {"auth": {"credential": tok["a"]}},
        ]
        for args in refused:
            ok, text = ask(args)
            assert not ok and A_WORD not in text and B_WORD not in text, (args, text[:300])
        ok, text = ask({"agent": "a", "auth": {"credential": tok["a"]}})
        assert ok and A_WORD in text and B_WORD not in text
        ok, text = ask({"agent": "b", "auth": {"credential": tok["b"]}})
        assert ok and B_WORD in text and A_WORD not in text
        ok, text = ask({"auth": {"ownerKey": owner_key}})
        assert ok and A_WORD not in text and B_WORD not in text  # the owner reads the shared layer
        # The CLI and the hook go through the server with their own proof.
        code, out = _invoke(["recall", "Redis cache"], callers["a"])
        assert code == 0 and A_WORD in out and '"via": "server"' in out
    finally:
        proc.terminate()
        proc.wait(15)


def test_installed_hook_proves_its_agent_and_a_spoof_gets_nothing(vault_path, tmp_path):
    """`hooks install` (by the owner) issues claude-code's credential into the hook command; the hook then
    reads claude-code's private memory. The same hook with only HIVE_AGENT_ID set injects nothing."""
    owner = credentials(None)
    code, out = _invoke(["hooks", "install", "--agent", "claude-code"], owner)
    assert code == 0, out
    settings = json.loads((Path(os.environ["HOME"]) / ".claude" / "settings.json").read_text())
    cmd = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert "HIVE_AGENT_CREDENTIAL=" in cmd and settings["env"]["HIVE_AGENT_ID"] == "claude-code"
    claude = {"HIVE_AGENT_ID": "claude-code", "HIVE_AGENT_CREDENTIAL": settings["env"]["HIVE_AGENT_CREDENTIAL"]}
    code, out = _invoke(["remember", "--type", "lesson", "--title", "Aardvark plan",
                         "--content", f"The {A_WORD} moves the cache to Redis."], claude)
    assert code == 0 and json.loads(out)["layer"] == "private", out
    prompt = json.dumps({"prompt": "where does the plan move the Redis cache?"})
    env = {k: v for k, v in os.environ.items() if k != "HIVE_BRAIN_VAULT"}
    env["HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS"] = "1"
    p = subprocess.run(["/bin/sh", "-c", cmd], input=prompt, capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=60)
    assert p.returncode == 0 and A_WORD in p.stdout, (p.stdout, p.stderr)
    spoof = {**env, "HIVE_AGENT_ID": "claude-code", "HIVE_BRAIN_VAULT": str(vault_path)}
    p = subprocess.run([sys.executable, "-m", "hive_brain", "hook", "prompt"], input=prompt, capture_output=True,
                       text=True, env=spoof, cwd=tmp_path, timeout=60)
    assert A_WORD not in p.stdout and "credential" in p.stdout, (p.stdout, p.stderr)


def test_mcp_in_enforcement_mode(seeded, vault_path):
    """The MCP server proves its agent once at start, reads through the warm server with that proof,
    opens no other agent's memory by id, and does not start for a caller that proves nothing."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import ClientSession, StdioServerParameters, stdio_client

    ids, callers = seeded
    state = open_vault(resolve()).state
    base = {**os.environ, "HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hive_brain", "serve"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=base)
    seen: dict = {}

    async def session(env: dict) -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"], env=env)
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("recall", {"query": "plan moves Redis Loki cache logs"})
            seen["recall"] = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
            res = await s.call_tool("get", {"memory_id": ids["b"]})
            seen["get"] = (res.is_error, "".join(c.text for c in res.content if getattr(c, "type", "") == "text"))

    try:
        client.wait_ready(state, 30.0, proc=proc)
        env_a = {**base, **{k: str(v) for k, v in callers["a"].items() if v is not None}}
        before = client.call(state, "status", timeout=10)
        asyncio.run(asyncio.wait_for(session(env_a), 60))
        after = client.call(state, "status", timeout=10)
        # Answered by the server (the MCP output is slim and does not say), which accepted its proof.
        assert after["requests"] > before["requests"] + 1 and after["errors"] == before["errors"]
        assert A_WORD in seen["recall"] and B_WORD not in seen["recall"], seen["recall"]
        assert seen["get"][0] and B_WORD not in seen["get"][1]
        for name in ("no id", "spoofed id", "id without credential"):
            env = {**base, **{k: str(v) for k, v in callers[name].items() if v is not None}}
            p = subprocess.run([sys.executable, "-m", "hive_brain", "mcp"], input="", capture_output=True,
                               text=True, env=env, timeout=60)
            assert p.returncode != 0 and "PermissionDenied" not in p.stdout and "credential" in (p.stderr + p.stdout).lower(), (
                name, p.stdout[:300], p.stderr[:300])
    finally:
        proc.terminate()
        proc.wait(15)


def test_a_running_mcp_server_stops_answering_once_its_credential_is_revoked_rotated_or_expired(seeded, vault_path):
    """An MCP server lives as long as the agent's session; it proved its agent once at start. Revoking,
    rotating or expiring that credential must stop it at its next tool call, server or no server
    (issue 28: without a server it went on answering from its own process with the dead credential)."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import ClientSession, StdioServerParameters, stdio_client

    ids, callers = seeded
    state = open_vault(resolve()).state
    base = {**os.environ, "HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS": "1"}
    owner = callers["owner"]

    def as_owner(*args: str) -> dict:
        code, out = _invoke(["owner", *args], owner)
        assert code == 0, out
        return dict(json.loads(out))

    def expire(agent: str) -> None:
        reg = Path(str(callers[agent]["HIVE_AGENT_CREDENTIAL"])).parent.parent / "identity.json"
        data = json.loads(reg.read_text())
        data["agents"][agent]["expires"] = "2020-01-01T00:00:00Z"
        reg.write_text(json.dumps(data))

    async def session(who: str, env: dict, word: str, cut: Callable[[], None]) -> tuple[str, tuple[bool, str]]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"],
                                       env={**env, **{k: str(v) for k, v in callers[who].items() if v is not None}})
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("recall", {"query": "plan moves Redis Loki cache logs"})
            first = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
            assert not res.is_error and word in first, first
            cut()
            res = await s.call_tool("recall", {"query": "plan moves Redis Loki cache logs"})
            return first, (bool(res.is_error), "".join(c.text for c in res.content if getattr(c, "type", "") == "text"))

    # No server: the MCP process reads in-process.
    alone = {**base, "HIVE_BRAIN_USE_SERVER": "0", "HIVE_BRAIN_AUTOSTART": "0"}
    _, (err, text) = asyncio.run(asyncio.wait_for(session("a", alone, A_WORD, lambda: expire("a")), 90))
    assert err and A_WORD not in text and "expired" in text, text
    _, (err, text) = asyncio.run(asyncio.wait_for(
        session("b", alone, B_WORD, lambda: as_owner("revoke", "b")), 90))
    assert err and B_WORD not in text and "revoked" in text, text
    # Through the warm server: a rotated-out token is refused there.
    as_owner("issue", "--agent", "a", "--rotate")  # a working token again (its file is rewritten in place)
    proc = subprocess.Popen([sys.executable, "-m", "hive_brain", "serve"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=base)
    try:
        client.wait_ready(state, 30.0, proc=proc)
        cred = Path(str(callers["a"]["HIVE_AGENT_CREDENTIAL"]))
        kept = cred.read_text()

        def rotate() -> None:
            as_owner("issue", "--agent", "a", "--rotate")
            assert cred.read_text() != kept

        _, (err, text) = asyncio.run(asyncio.wait_for(session("a", base, A_WORD, rotate), 90))
        assert err and A_WORD not in text and "credential" in text, text
    finally:
        proc.terminate()
        proc.wait(15)
