"""`hive-brain mcp` over stdio with the official SDK client."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402


async def _session_run(env: dict[str, str], body) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"], env=env)
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await body(s)


def _text(res) -> str:
    return "".join(c.text for c in res.content if getattr(c, "type", "") == "text")


def test_mcp_tools_identity_and_round_trip(vault_path):
    env = dict(os.environ, HIVE_AGENT_ID="codex")
    seen: dict = {}

    async def body(s: ClientSession) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == {"recall", "answer", "remember", "evolve", "get", "core"}
        for name in ("recall", "answer", "get", "core"):
            assert tools[name].annotations.read_only_hint is True, name
        for name in ("remember", "evolve"):
            a = tools[name].annotations
            assert a.read_only_hint is False and a.destructive_hint is False and a.idempotent_hint is False
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
    assert "ENOSPC" in seen["answer"]
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
