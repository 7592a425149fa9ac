"""``hive-brain mcp``: the memory tools over MCP (stdio), for agents without hooks (Codex) and besides them.

Identity is the server's: the agent id it was started with (``--agent`` / ``HIVE_AGENT_ID``), never a
tool argument, so a model cannot read or write as another agent by asking. Tool definitions stay
small (they are sent with every request); results are compact JSON or plain text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..engine import Engine
    from ..reader import Reader

INSTRUCTIONS = (
    "Long-term memory of the user's hive-brain vault. Call `core` at the start of a session. Use `answer` or "
    "`recall` before work that past decisions, preferences or lessons may affect. Store durable facts with "
    "`remember`; when one changed, `evolve` it (never store secrets)."
)
RECALL_TEXT_CHARS = 600
SERVER_TIMEOUT = 5.0
# Module level: the SDK evaluates the tools' (string) annotations in this module's namespace.
Scope = Literal["tiered", "agent-memory", "full-vault"]
MemoryScope = Literal["private", "hive"]


def _annotations(read_only: bool, destructive: bool = False, idempotent: bool = False) -> Any:
    from mcp.types import ToolAnnotations

    return ToolAnnotations.model_validate(
        {
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": idempotent,
            "openWorldHint": False,
        }
    )


def _server_classes() -> tuple[Any, type[Exception]]:
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef,attr-defined]
        from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
    return MCPServer, ToolError


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def _slim_hit(h: dict) -> dict:
    text = (h.get("passage") or {}).get("text") or ""
    out = {
        "id": h.get("id"),
        "title": h.get("title"),
        "type": h.get("type") or h.get("kind"),
        "path": h.get("path"),
        "score": round(float(h.get("score") or 0), 4),
        "text": text[:RECALL_TEXT_CHARS],
    }
    if h.get("status") not in (None, "active"):
        out["status"] = h["status"]
    if h.get("evolutionChain"):
        out["supersedes"] = [c["id"] for c in h["evolutionChain"]]
    return {k: v for k, v in out.items() if v not in (None, "")}


class Tools:
    """The tool bodies, run on one worker thread (the engine's sqlite handles belong to one thread)."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self._engine: Engine | None = None
        self._reader: Reader | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hive-brain-mcp")

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            from ..engine import Engine

            self._engine = Engine.from_settings(self.settings)
        return self._engine

    async def run(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    @property
    def reader(self) -> Reader:
        """This process's reads: the warm server (hybrid, no model load here), else the engine's view
        with a short embedding budget (a tool call must not stall on a backlog of passages)."""
        if self._reader is None:
            from ..reader import Reader

            eng = self.engine
            semantic = bool(self.settings.semantic)
            self._reader = Reader(
                eng.vault.state,
                agent=self.settings.agent_id,
                use_server=self.settings.use_server,
                timeout=SERVER_TIMEOUT,
                local_view=lambda s: eng.view(semantic=semantic and s, embed_budget_s=2.0),
                auth=self.settings.auth,
            )
        return self._reader

    def recall(
        self,
        query: str,
        limit: int,
        scope: str,
        types: list[str] | None,
        project: str | None,
        as_of: str | None,
    ) -> str:
        opts: dict[str, Any] = {"limit": limit, "scope": scope, "types": types or None, "project": project, "as_of": as_of}
        return self._recall_out(self.reader.recall(query, **opts))

    @staticmethod
    def _recall_out(res: dict) -> str:
        out: dict[str, Any] = {"hits": [_slim_hit(h) for h in res["hits"]], "semantic": res.get("semantic")}
        if res.get("abstained"):
            out["abstained"] = res.get("reason")
        if res.get("warnings"):
            out["warnings"] = res["warnings"]
        return _dump(out)

    def answer(self, question: str, budget: int) -> str:
        res = self.reader.answer(question, budget=budget)
        if res.get("abstained"):
            return f"No grounded answer in memory: {res.get('reason')}."
        return res["context"]

    def remember(
        self,
        type_: str,
        title: str,
        content: str,
        tags: list[str] | None,
        project: str | None,
        scope: str | None,
        confidence: float | None,
    ) -> str:
        from ..memory.store import MemoryInput

        inp = MemoryInput(
            type=type_,
            title=title,
            content=content,
            tags=list(tags or []),
            project=project,
            scope=scope,
            confidence=confidence,
        )
        return _dump(self.engine.memory.remember(inp))

    def evolve(self, memory_id: str, content: str, title: str | None) -> str:
        return _dump(self.engine.memory.evolve(memory_id, content, title))

    def get(self, memory_id: str) -> str:
        res = self.engine.memory.get(memory_id)
        meta = {
            k: v
            for k, v in res["meta"].items()
            if k
            in (
                "type",
                "title",
                "status",
                "layer",
                "agent",
                "project",
                "tags",
                "updated",
                "supersedes",
                "superseded_by",
            )
        }
        return _dump(
            {
                "id": res["id"],
                "path": res["path"],
                **meta,
                "status": res["status"],  # derived from the chain: a note restored by a sync says "active"
                "syncConflicts": res["syncConflicts"] or None,
                "content": res["content"],
                "chain": [c["id"] for c in res["chain"]] if len(res["chain"]) > 1 else None,
            }
        )

    def core(self, budget: int) -> str:
        from ..memory.core import core_text

        return (
            core_text(self.engine, self.settings.agent_id, budget=budget)
            or "The vault holds no core memory yet."
        )


def build_server(settings: Any) -> Any:
    """The MCP server for ``settings`` (its ``agent_id`` is the identity of every call)."""
    from ..errors import HiveBrainError

    MCPServer, ToolError = _server_classes()
    tools = Tools(settings)
    server = MCPServer("hive-brain", instructions=INSTRUCTIONS, log_level="WARNING")

    async def call(fn: Callable[[], Any]) -> Any:
        try:
            return await tools.run(fn)
        except HiveBrainError as e:
            raise ToolError(" ".join(str(e).split())) from None
        except Exception as e:  # noqa: BLE001 - the model gets one line, not a traceback
            raise ToolError(f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]) from None

    @server.tool(
        description="Search memory and notes; ranked hits with ids and text.",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def recall(
        query: str,
        limit: int = 8,
        scope: Scope = "tiered",
        types: list[str] | None = None,
        project: str | None = None,
        as_of: str | None = None,
    ) -> str:
        return await call(lambda: tools.recall(query, max(1, min(limit, 50)), scope, types, project, as_of))

    @server.tool(
        description="Grounded context pack for a question, or an abstention.",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def answer(question: str, budget: int = 8000) -> str:
        return await call(lambda: tools.answer(question, max(500, min(budget, 60_000))))

    @server.tool(
        description="Store a new typed memory (type: preference, instruction, decision, lesson, "
        "procedure, fact, quirk). No secrets.",
        annotations=_annotations(False),
        structured_output=False,
    )
    async def remember(
        type: str,
        title: str,
        content: str,
        tags: list[str] | None = None,  # noqa: A002
        project: str | None = None,
        scope: MemoryScope | None = None,
        confidence: float | None = None,
    ) -> str:
        return await call(lambda: tools.remember(type, title, content, tags, project, scope, confidence))

    @server.tool(
        description="Replace what a memory says; the old version is kept as superseded.",
        annotations=_annotations(False),
        structured_output=False,
    )
    async def evolve(memory_id: str, content: str, title: str | None = None) -> str:
        return await call(lambda: tools.evolve(memory_id, content, title))

    @server.tool(
        description="One memory by id, with its evolution chain.",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def get(memory_id: str) -> str:
        return await call(lambda: tools.get(memory_id))

    @server.tool(
        description="Core memory: the user's standing rules and context. Call at session start.",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def core(budget: int = 6000) -> str:
        return await call(lambda: tools.core(max(500, min(budget, 30_000))))

    return server


def run(settings: Any) -> None:
    """Serve on stdio until the client closes the pipe."""
    build_server(settings).run("stdio")
