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
        res = self.reader.recall(query, **opts)
        self._log_usage(res.get("hits") or [])
        return self._recall_out(res)

    def _log_usage(self, items: list[dict]) -> None:
        """The memories a tool returned, as ``retrieved`` usage (per device; never fails the call)."""
        from ..memory.operations import log_retrieved

        log_retrieved(self.engine.vault.state, items, agent=self.settings.agent_id)

    @staticmethod
    def _recall_out(res: dict) -> str:
        # The CLI's `recall --json` shape, hits slimmed (tool results go into the model's context).
        out: dict[str, Any] = {"hits": [_slim_hit(h) for h in res["hits"]], "semantic": res.get("semantic"),
                               "abstained": bool(res.get("abstained"))}
        if res.get("abstained"):
            out["reason"] = res.get("reason")
        if res.get("warnings"):
            out["warnings"] = res["warnings"]
        return _dump(out)

    def answer(self, question: str, budget: int) -> str:
        res = self.reader.answer(question, budget=budget)
        self._log_usage(res.get("items") or [])
        out = {"abstained": bool(res.get("abstained")), "context": res.get("context") or ""}
        if res.get("abstained"):
            out["reason"] = res.get("reason")
        return _dump(out)

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

    def update(self, memory_id: str, **changes: Any) -> str:
        return _dump(self.engine.memory.update(memory_id, **changes))

    def delete(self, memory_id: str, confirm: bool) -> str:
        return _dump(self.engine.memory.delete(memory_id, confirm=confirm))

    def batch(self, records: list[dict[str, Any]]) -> str:
        return _dump(self.engine.memory.batch(records))

    def browse(self, folder: str, detail: str) -> str:
        from ..search.browse import summarize

        return _dump(summarize(self.engine, folder, detail))

    def generations(self) -> str:
        return _dump(self.engine.generations())

    def replay(self, query: str, generation: int, limit: int) -> str:
        return self._recall_out(self.engine.replay(query, generation, limit=limit))

    def compare(self, query: str, a: int, b: int | None, limit: int) -> str:
        return _dump(self.engine.compare(query, a, b, limit=limit))

    def review_list(self, status: str | None) -> str:
        from ..memory.review import BrainReview

        return _dump(BrainReview(self.engine.memory).list(status))

    def review_show(self, review_id: str) -> str:
        from ..memory.review import BrainReview

        return _dump(BrainReview(self.engine.memory).show(review_id))

    def record_operation(self, title: str, content: str, operation_key: str, outcome: str, task_id: str,
                         failure_key: str | None) -> str:
        from ..memory.operations import record_operation

        return _dump(record_operation(self.engine.vault.state, title=title, content=content,
                                      operation_key=operation_key, outcome=outcome, task_id=task_id,
                                      failure_key=failure_key, agent=self.settings.agent_id))

    def mine_patterns(self, since: str | None, enqueue: bool) -> str:
        # The CLI's `mine-patterns [--enqueue] --json`: the events this identity may read, and the
        # owner-only queueing (patterns quote every agent's events) refused for an agent as there.
        from ..memory.operations import visible_events
        from ..memory.patterns import enqueue as enqueue_patterns
        from ..memory.patterns import mine, parse_since

        eng = self.engine
        report = mine(visible_events(eng.vault.state, self.settings.agent_id), since=parse_since(since))
        report["dryRun"] = not enqueue
        if enqueue:
            report.update(enqueue_patterns(eng.memory, report))
        return _dump(report)

    def record_usage(self, memory_ids: list[str], kind: str, query: str | None) -> str:
        from ..memory.operations import record_usage

        return _dump(record_usage(self.engine.vault.state, list(memory_ids), kind, agent=self.settings.agent_id,
                                  query=query))

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
    from importlib.metadata import PackageNotFoundError, version

    from ..errors import HiveBrainError

    MCPServer, ToolError = _server_classes()
    tools = Tools(settings)
    try:
        ours = version("hive-brain")
    except PackageNotFoundError:  # running from a source tree that was never installed
        ours = "0+unknown"
    server = MCPServer("hive-brain", instructions=INSTRUCTIONS, log_level="WARNING", version=ours)

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
        "procedure, fact, ...; an unknown one is refused with the list). No secrets.",
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
        description="Fix a memory in place (wording, tags, project, confidence). Truth changes: use evolve.",
        annotations=_annotations(False, destructive=True, idempotent=True),
        structured_output=False,
    )
    async def update(memory_id: str, title: str | None = None, content: str | None = None,
                     tags: list[str] | None = None, project: str | None = None,
                     confidence: float | None = None) -> str:
        return await call(lambda: tools.update(memory_id, title=title, content=content, tags=tags, project=project,
                                               confidence=confidence))

    @server.tool(
        description="Archive a memory that no longer applies (kept as history; reversible with update).",
        annotations=_annotations(False, idempotent=True),
        structured_output=False,
    )
    async def archive(memory_id: str) -> str:
        return await call(lambda: tools.update(memory_id, status="archived"))

    @server.tool(
        description="Delete a memory note for good. Needs confirm=true; prefer archive.",
        annotations=_annotations(False, destructive=True, idempotent=True),
        structured_output=False,
    )
    async def delete(memory_id: str, confirm: bool = False) -> str:
        return await call(lambda: tools.delete(memory_id, confirm))

    @server.tool(
        description="Remember up to 25 memories at once ({type, title, content, tags?, ...}); all or nothing.",
        annotations=_annotations(False),
        structured_output=False,
    )
    async def batch(records: list[dict[str, Any]]) -> str:
        return await call(lambda: tools.batch(records))

    @server.tool(
        description="What a vault folder holds (e.g. Projects; empty: the whole vault).",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def browse(folder: str = "", detail: Literal["abstract", "overview"] = "abstract") -> str:
        return await call(lambda: tools.browse(folder, detail))

    @server.tool(
        description="The index's generations (versions of memory), newest last.",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def generations() -> str:
        return await call(tools.generations)

    @server.tool(
        description="Recall as memory stood at generation G.",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def replay(query: str, generation: int, limit: int = 8) -> str:
        return await call(lambda: tools.replay(query, generation, max(1, min(limit, 50))))

    @server.tool(
        description="How a question's answer changed between generations a and b (b: now).",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def compare(query: str, a: int, b: int | None = None, limit: int = 8) -> str:
        return await call(lambda: tools.compare(query, a, b, max(1, min(limit, 50))))

    @server.tool(
        description="Brain Review proposals (status: pending, approved, rejected, applied).",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def review_list(status: str | None = None) -> str:
        return await call(lambda: tools.review_list(status))

    @server.tool(
        description="One Brain Review proposal with its content.",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def review_show(review_id: str) -> str:
        return await call(lambda: tools.review_show(review_id))

    @server.tool(
        description="Log a routine completion, handoff or retry (outcome: success|failure); not memory.",
        annotations=_annotations(False),
        structured_output=False,
    )
    async def record_operation(title: str, operation_key: str, outcome: Literal["success", "failure"], task_id: str,
                               content: str = "", failure_key: str | None = None) -> str:
        return await call(lambda: tools.record_operation(title, content, operation_key, outcome, task_id, failure_key))

    @server.tool(
        description="Suggest recurring failures, workflows and routines from logged operations (dry run).",
        annotations=_annotations(True, idempotent=True),
        structured_output=False,
    )
    async def mine_patterns(since: str | None = None) -> str:
        return await call(lambda: tools.mine_patterns(since, enqueue=False))

    @server.tool(
        description="Queue mine_patterns' new suggestions as Brain Review proposals (the vault owner only).",
        annotations=_annotations(False, idempotent=True),
        structured_output=False,
    )
    async def mine_patterns_enqueue(since: str | None = None) -> str:
        return await call(lambda: tools.mine_patterns(since, enqueue=True))

    @server.tool(
        description="Log which memories a recall retrieved or an answer used (kind: retrieved|final-answer).",
        annotations=_annotations(False),
        structured_output=False,
    )
    async def record_usage(memory_ids: list[str], kind: Literal["retrieved", "final-answer"],
                           query: str | None = None) -> str:
        return await call(lambda: tools.record_usage(memory_ids, kind, query))

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
