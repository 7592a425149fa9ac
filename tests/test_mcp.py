"""`hive-brain mcp` over stdio with the official SDK client."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from .helpers import run  # noqa: E402


async def _session_run(env: dict[str, str], body) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"], env=env)
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await body(s)


def _text(res) -> str:
    return "".join(c.text for c in res.content if getattr(c, "type", "") == "text")


# Every tool with (read-only, destructive, idempotent): what a client may do without asking the user.
ANNOTATIONS = {
    "recall": (True, False, True), "answer": (True, False, True), "get": (True, False, True),
    "core": (True, False, True), "browse": (True, False, True), "generations": (True, False, True),
    "replay": (True, False, True), "compare": (True, False, True), "review_list": (True, False, True),
    "review_show": (True, False, True),
    "remember": (False, False, False), "evolve": (False, False, False), "batch": (False, False, False),
    "record_operation": (False, False, False), "archive": (False, False, True),
    "mine_patterns": (True, False, True), "mine_patterns_enqueue": (False, False, True),
    "record_usage": (False, False, False),
    "update": (False, True, True), "delete": (False, True, True),
}


def test_mcp_tools_identity_and_round_trip(vault_path):
    env = dict(os.environ, HIVE_AGENT_ID="codex")
    seen: dict = {}

    async def body(s: ClientSession) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == set(ANNOTATIONS)
        for name, (read_only, destructive, idempotent) in ANNOTATIONS.items():
            a = tools[name].annotations
            assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint) == (read_only, destructive, idempotent), name
        for t in tools.values():
            # Identity is the server's: no tool lets the model name an agent.
            assert not {"agent", "agent_id"} & set(t.input_schema.get("properties", {})), t.name
            assert len(t.description) < 200
        res = await s.call_tool(
            "remember",
            {
                "type": "lesson",
                "title": "Flaky CI cache",
                "content": "Clear the CI cache when the build fails with ENOSPC.",
            },
        )
        assert not res.is_error, _text(res)
        seen["remember"] = json.loads(_text(res))
        res = await s.call_tool("recall", {"query": "CI cache ENOSPC build fails"})
        seen["recall"] = json.loads(_text(res))
        res = await s.call_tool("answer", {"question": "what to do when the build fails with ENOSPC?"})
        seen["answer"] = _text(res)
        mid = seen["remember"]["id"]
        res = await s.call_tool(
            "evolve", {"memory_id": mid, "content": "Clear the CI cache and retry once on ENOSPC."}
        )
        seen["evolve"] = json.loads(_text(res))
        res = await s.call_tool("get", {"memory_id": seen["evolve"]["id"]})
        seen["get"] = json.loads(_text(res))
        res = await s.call_tool("core", {})
        seen["core"] = _text(res)
        res = await s.call_tool("get", {"memory_id": "mem-doesnotexist"})
        seen["error"] = (res.is_error, _text(res))
        res = await s.call_tool(
            "remember", {"type": "fact", "title": "Key", "content": "token: sk-proj-abcdefghijklmnopqrstuv"}
        )
        seen["secret"] = (res.is_error, _text(res))

    asyncio.run(asyncio.wait_for(_session_run(env, body), 60))
    assert (
        seen["remember"]["path"].startswith("Agents/codex/Memory/") and seen["remember"]["layer"] == "private"
    )
    assert (vault_path / seen["remember"]["path"]).is_file()
    assert seen["recall"]["hits"][0]["id"] == seen["remember"]["id"]
    from hive_brain.config import resolve
    from hive_brain.memory.operations import usage_counts
    from hive_brain.store.vault import open_vault

    # recall and answer each logged the memory they returned, as the codex agent
    assert usage_counts(open_vault(resolve()).state)[seen["remember"]["id"]]["retrieved"] == 2
    assert "ENOSPC" in json.loads(seen["answer"])["context"]
    assert (
        seen["get"]["content"].startswith("Clear the CI cache and retry") and len(seen["get"]["chain"]) == 2
    )
    assert "retry once on ENOSPC" in seen["core"]
    is_error, msg = seen["error"]
    assert is_error and "no memory with id" in msg and "\n" not in msg and "Traceback" not in msg
    is_error, msg = seen["secret"]
    assert is_error and "secret" in msg and "abcdefghijklmnop" not in msg


def test_mcp_other_agent_cannot_read_private_memory(vault_path):
    from tests.helpers import remember

    remember("Private lesson", "Only codex should see this zebra note.", "lesson", agent="codex")
    env = dict(os.environ, HIVE_AGENT_ID="claude-code")
    out: dict = {}

    async def body(s: ClientSession) -> None:
        out["recall"] = json.loads(
            _text(await s.call_tool("recall", {"query": "zebra note", "scope": "full-vault"}))
        )

    asyncio.run(asyncio.wait_for(_session_run(env, body), 60))
    assert out["recall"]["hits"] == []


def test_every_mcp_tool_once_shaped_as_the_cli(vault_path):
    """Each tool through the SDK's client over stdio, once; results are the CLI's `--json` shapes."""
    env = dict(os.environ, HIVE_AGENT_ID="codex")
    out: dict = {}

    async def body(s: ClientSession) -> None:
        init = await s.initialize()
        out["version"] = init.server_info.version

        out["tools"] = {t.name for t in (await s.list_tools()).tools}
        real_call_tool = s.call_tool

        async def call_tool(name: str, args: dict):  # every call counts: a tool never called fails the test
            called.add(name)
            return await real_call_tool(name, args)

        s.call_tool = call_tool  # type: ignore[method-assign]

        async def call(name: str, args: dict) -> dict:
            res = await s.call_tool(name, args)
            assert not res.is_error, (name, _text(res))
            text = _text(res)
            return json.loads(text) if text.startswith(("{", "[")) else {"text": text}

        mem = await call("remember", {"type": "decision", "title": "Hosting", "content": "The web app runs on Fly.io."})
        out["batch"] = await call("batch", {"records": [{"type": "fact", "title": "Port", "content": "API on 8443."},
                                                        {"type": "fact", "title": "DB", "content": "Postgres 16."}]})
        out["update"] = await call("update", {"memory_id": mem["id"], "tags": ["hosting"]})
        out["get"] = await call("get", {"memory_id": mem["id"]})
        out["recall"] = await call("recall", {"query": "where is the web app hosted"})
        out["answer"] = await call("answer", {"question": "where is the web app hosted?"})
        out["none"] = await call("answer", {"question": "how does photosynthesis work in ferns?"})
        out["browse"] = await call("browse", {"folder": "Agents"})
        gens = await call("generations", {})
        out["generations"] = gens
        first = gens["generations"][0]["id"]
        out["replay"] = await call("replay", {"query": "where is the web app hosted", "generation": first})
        out["compare"] = await call("compare", {"query": "where is the web app hosted", "a": first})
        out["review_list"] = await call("review_list", {})
        out["op"] = await call("record_operation", {"title": "Deployed", "operation_key": "deploy.web",
                                                     "outcome": "success", "task_id": "t-1"})
        out["core"] = await call("core", {})
        out["evolve"] = await call("evolve", {"memory_id": mem["id"], "content": "The web app moved to Render."})
        out["archive"] = await call("archive", {"memory_id": out["batch"]["records"][0]["id"]})
        doomed = out["batch"]["records"][1]["id"]
        refused = await s.call_tool("delete", {"memory_id": doomed})
        out["refused"] = (refused.is_error, _text(refused))
        out["delete"] = await call("delete", {"memory_id": doomed, "confirm": True})
        out["doomed"] = doomed
        res = await s.call_tool("review_show", {"review_id": "rev-nope"})
        out["review_show"] = (res.is_error, _text(res))
        for task in ("t-2", "t-3", "t-4"):
            await call("record_operation", {"title": "Deploy failed", "operation_key": "deploy.web", "outcome": "failure",
                                            "task_id": task, "failure_key": "db.migration-lock"})
        out["mine"] = await call("mine_patterns", {})
        res = await s.call_tool("mine_patterns_enqueue", {})
        out["enqueue_as_agent"] = (res.is_error, _text(res))
        out["mem"] = mem["id"]
        out["usage"] = await call("record_usage", {"memory_ids": [mem["id"]], "kind": "final-answer",
                                                   "query": "where is the web app hosted"})
        res = await s.call_tool("remember", {"type": "prefrence", "title": "Editor", "content": "We use helix."})
        out["bad_type"] = (res.is_error, _text(res))

    async def owner(s: ClientSession) -> None:
        res = await s.call_tool("mine_patterns_enqueue", {})
        assert not res.is_error, _text(res)
        out["enqueued"] = json.loads(_text(res))

    called: set[str] = set()
    asyncio.run(asyncio.wait_for(_session_run(env, body), 120))
    owner_env = {k: v for k, v in os.environ.items() if k != "HIVE_AGENT_ID"}
    asyncio.run(asyncio.wait_for(_session_run(owner_env, owner), 120))
    assert called == out["tools"] == set(ANNOTATIONS), out["tools"] ^ called
    cli_mine = run("--agent", "codex", "mine-patterns")
    assert set(out["mine"]) == set(cli_mine) and out["mine"]["dryRun"] is True
    assert [(p["kind"], p["key"]) for p in out["mine"]["patterns"]] == [("failure", "db.migration-lock")]
    is_error, msg = out["enqueue_as_agent"]
    assert is_error and "owner" in msg
    assert len(out["enqueued"]["proposed"]) == 1 and out["enqueued"]["dryRun"] is False
    assert out["usage"]["memoryIds"] == [out["mem"]] and out["usage"]["kind"] == "final-answer"
    is_error, msg = out["bad_type"]
    assert is_error and "unknown memory type 'prefrence'" in msg and "preference" in msg
    assert out["version"] and out["version"] != ""
    assert out["update"]["id"] == out["get"]["id"] and "hosting" in json.dumps(out["get"])
    assert out["recall"]["hits"][0]["title"] == "Hosting" and out["recall"]["abstained"] is False
    assert out["answer"]["abstained"] is False and "Fly.io" in out["answer"]["context"]
    assert out["none"]["abstained"] is True and out["none"]["reason"]
    assert "summary" in out["browse"] and out["generations"]["current"] >= 1
    assert "hits" in out["replay"] and out["op"]["event"]["operationKey"] == "deploy.web"
    assert isinstance(out["review_list"], list) and out["archive"]["id"]
    is_error, msg = out["refused"]
    assert is_error and "confirm" in msg
    assert out["delete"]["id"] == out["doomed"]
    assert out["review_show"][0] is True and "Traceback" not in out["review_show"][1]


# -- the tools as well made as the CLI (issue 28) ---------------------------------------------------
def _error(res) -> dict:
    """A tool error: the `--json` error shape, as the result's text."""
    assert res.is_error, _text(res)
    data = json.loads(_text(res))
    assert data["ok"] is False and "Traceback" not in _text(res)
    return data


def test_tools_are_declared_once_with_described_bounded_parameters(vault_path):
    from hive_brain.agents import mcp as mcp_module
    from hive_brain.agents.mcptools import REGISTRY

    out: dict = {}

    async def body(s: ClientSession) -> None:
        out["tools"] = {t.name: t for t in (await s.list_tools()).tools}
        out["neg"] = await s.call_tool("recall", {"query": "deploy", "limit": -5})
        out["big"] = await s.call_tool("recall", {"query": "deploy", "limit": 500})
        out["extra"] = await s.call_tool("recall", {"query": "deploy", "agent": "other"})
        out["type"] = await s.call_tool("get", {"memory_id": 7})
        out["missing"] = await s.call_tool("evolve", {"memory_id": "mem-x"})
        out["question"] = await s.call_tool("answer", {"question": "how do we deploy?"})
        out["query"] = await s.call_tool("answer", {"query": "how do we deploy?"})
        out["both"] = await s.call_tool("answer", {"query": "a", "question": "b"})
        out["confirm"] = await s.call_tool("delete", {"memory_id": "mem-nope"})
        out["nothing"] = await s.call_tool("update", {"memory_id": "mem-nope"})

    asyncio.run(asyncio.wait_for(_session_run(dict(os.environ), body), 60))
    tools = out["tools"]
    # The registry is the one declaration: every tool the client sees, nothing declared in the glue.
    assert set(tools) == set(REGISTRY) == set(ANNOTATIONS)
    from pathlib import Path

    assert "@server.tool" not in Path(mcp_module.__file__).read_text()
    for t in tools.values():
        schema = t.input_schema
        assert schema.get("additionalProperties") is False, t.name
        for name, prop in (schema.get("properties") or {}).items():
            assert prop.get("description"), (t.name, name)
    assert tools["recall"].input_schema["properties"]["limit"]["minimum"] == 1
    assert tools["recall"].input_schema["properties"]["limit"]["maximum"] == 50
    # One name for the question: recall and answer both take `query` (answer's old `question` still works).
    assert "query" in tools["answer"].input_schema["required"] and "question" not in tools["answer"].input_schema["properties"]
    for key, field in (("neg", "limit"), ("big", "limit"), ("extra", "agent"), ("type", "memory_id"),
                       ("missing", "content")):
        err = _error(out[key])
        assert err["error"] == "UsageError" and err["field"] == field and "\n" not in err["message"], err
    assert "unknown argument 'agent'" in _error(out["extra"])["message"]
    assert not out["question"].is_error and not out["query"].is_error
    assert json.loads(_text(out["question"])) == json.loads(_text(out["query"]))
    assert _error(out["both"])["error"] == "UsageError"
    # Errors name the tools' fields, never the CLI's flags.
    confirm = _error(out["confirm"])
    assert confirm["error"] == "NotConfirmed" and "confirm=true" in confirm["hint"] and "--" not in _text(out["confirm"])
    nothing = _error(out["nothing"])
    assert "--" not in nothing["hint"] and "title" in nothing["hint"] and "status" in nothing["hint"]


def test_a_lone_surrogate_in_a_request_still_gets_an_answer(vault_path):
    """JSON may escape a lone surrogate ("\\ud800"); the SDK's parser refuses such a message and, with no
    id to answer, used to drop it: the agent waited forever. Raw JSON-RPC over stdio, as a client sends it."""
    import subprocess
    import threading

    proc = subprocess.Popen([sys.executable, "-m", "hive_brain", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=dict(os.environ))
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: str) -> None:
        proc.stdin.write(line.encode("ascii") + b"\n")
        proc.stdin.flush()

    answers: dict[int, dict] = {}
    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}))
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        calls = {2: ("recall", {"query": "deploy \ud800 now"}),
                 3: ("remember", {"type": "fact", "title": "T\ud800", "content": "c"}),
                 4: ("batch", {"records": [{"type": "fact", "title": "A", "content": "x\udc00"}]}),
                 5: ("recall", {"query": "pair \ud83d\ude00 kept"})}
        for i, (name, args) in calls.items():
            send(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}))
        # Blocking reads (select would miss lines already in the reader's buffer), bounded by a timer.
        timer = threading.Timer(60, proc.kill)
        timer.start()
        try:
            while len(answers) < 5:
                line = proc.stdout.readline()
                if not line:
                    break
                msg = json.loads(line)
                answers[msg["id"]] = msg
        finally:
            timer.cancel()
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(10)
    assert set(answers) == {1, 2, 3, 4, 5}, answers
    texts = {i: answers[i]["result"]["content"][0]["text"] for i in calls}
    assert not answers[2]["result"]["isError"] and json.loads(texts[2])["abstained"] is True
    # A write refuses it as the CLI does, naming the field; nothing is stored.
    err = json.loads(texts[3])
    assert err["error"] == "InvalidText" and "title" in err["message"] and "surrogate" in err["message"]
    refused = json.loads(texts[4])
    assert refused["error"] == "Refused" and refused["records"][0]["error"] == "InvalidText"
    assert not answers[5]["result"]["isError"]
    assert not list((vault_path / "Memory").rglob("t-*.md"))


def test_mcp_remember_keeps_where_it_was_learned(vault_path, tmp_path):
    """MCP `remember` takes the conversation it was learned in (from_conversation, excerpt): the
    evidence is checked against the transcript and kept with the memory (issue 28)."""
    rows = [{"type": "user", "sessionId": "sess-mcp-1", "timestamp": "2026-03-01T10:00:00Z",
             "message": {"role": "user", "content": [{"type": "text", "text": "Why is CI red?"}]}},
            {"type": "assistant", "sessionId": "sess-mcp-1", "timestamp": "2026-03-01T10:00:05Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "The cache volume is full (ENOSPC)."}]}}]
    t = tmp_path / "sess.jsonl"
    t.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = dict(os.environ, HIVE_AGENT_ID="codex")
    out: dict = {}

    async def body(s: ClientSession) -> None:
        base = {"type": "lesson", "title": "CI cache fills up", "content": "Clear the CI cache on ENOSPC."}
        out["ok"] = json.loads(_text(await s.call_tool("remember", {**base, "from_conversation": str(t),
                                                                      "excerpt": "cache volume is full"})))
        out["bad"] = await s.call_tool("remember", {**base, "title": "Other", "from_conversation": str(t),
                                                    "excerpt": "never said"})

    asyncio.run(asyncio.wait_for(_session_run(env, body), 60))
    meta = run("--agent", "codex", "get", out["ok"]["id"])["meta"]
    assert meta["evidence"]["turn"] == 1 and meta["evidence"]["excerpt"] == "cache volume is full", meta
    assert out["bad"].is_error and "not in that conversation" in _text(out["bad"])
