"""The server's socket side: accept thread, worker pool, the request protocol and its ops.

See :mod:`hive_brain.rpc.client` for the protocol. Writes (``op: write``) are handed to the indexing
thread, which owns the index writer. Reads never take the vault lock: each request
gets a View (:func:`hive_brain.search.view.assemble`) from the indexing loop's current snapshot
(tantivy, LanceDB and the ONNX session are safe to share across threads) plus a per-worker catalog
connection (SQLite connections are not).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from ..config import validate_agent_id
from ..errors import HiveBrainError, UsageError
from ..rpc.client import MAX_REQUEST, InProcessOnly, ServerNotReady, WritesRefused, encode_line
from ..store.text import clean_text

if TYPE_CHECKING:
    import logging
    from pathlib import Path

    from ..config import Settings
    from ..engine import Engine
    from ..search.recall import View
    from ..store.catalog import Catalog
    from ..store.vault import Vault


class Owner(Protocol):
    """What the socket side uses of the :class:`~.server.Server` that owns it (server.py imports this
    module, so it is named by what is used)."""

    settings: Settings
    vault: Vault
    state: Path
    socket: Path
    log: logging.Logger
    log_path: Path
    stopping: threading.Event
    indexing: Any  # its .indexing.IndexingLoop, which imports this module too
    started_at: float | None

    def request_stop(self) -> None: ...


WORKERS = 16
IDLE_CONNECTION_S = 60.0
# Passages the second model may compute inside one prompt's request: the server reads every note
# ahead (search/rerank.py), so only notes written since then are cold, each ~10 ms of model time on a
# quiet core and 100 ms on a loaded one; the rest keep their first-pass places in that answer.
PROMPT_RERANK_COLD = 6
# The same bound for a deep recall or answer (``recall --rerank``, MCP ``deep``), which reads the top 100:
# right after a start, before the read-ahead, it ran the model over all of them itself (3,077 notes,
# load 5: 5.7-7.1 s). The cold rest keep their first-pass places, marked ``rerankCold``, with a warning.
DEEP_RERANK_COLD = 20
# How long a recall or answer waits for the watcher's latest changes to be indexed (IndexingLoop.settle):
# a catch-up of a few hand-edited notes takes tens of ms; a writer holding the lock must not stall reads.
READ_SETTLE_S = 2.0
# How long a prompt waits for the writes this server answered to be indexed (a write is answered once its
# note is durable; the index follows within tens of ms): a small share of the hook's deadline.
PROMPT_SETTLE_S = 0.3
RECALL_OPTIONS = frozenset({"scope", "types", "tags", "project", "limit", "as_of", "include_operational", "detail",
                            "mode", "abstain", "drop_ratio", "pool", "now", "alternatives", "deep"})


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket; None where the OS does not say
    (then the socket's 0600 mode and its 0700 folder are the only guard)."""
    try:
        if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
            raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return int(struct.unpack("3i", raw)[1])
        if hasattr(socket, "LOCAL_PEERCRED"):  # macOS/BSD: struct xucred {version, uid, ngroups, groups[16]}
            fmt = "IIh16I"
            raw = conn.getsockopt(0, socket.LOCAL_PEERCRED, struct.calcsize(fmt))  # 0 = SOL_LOCAL
            return int(struct.unpack(fmt, raw[: struct.calcsize(fmt)])[1])
    except (OSError, struct.error):
        return None
    return None


def _agent_arg(args: dict) -> str | None:
    """The caller's own agent id, never the server's: an absent id means the shared layer only."""
    agent = args.get("agent")
    if agent is not None and not isinstance(agent, str):
        raise UsageError("args.agent must be a string (an agent id) or absent")
    return validate_agent_id(agent) if agent is not None else None


class SocketServer:
    """Listener, connections and ops of one :class:`~.server.Server` (which owns the lifecycle)."""

    def __init__(self, server: Owner) -> None:
        self.server = server
        self.loop = server.indexing
        self.listener: socket.socket | None = None
        self.pool: ThreadPoolExecutor | None = None
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()  # also guards stats (worker threads count concurrently)
        self._tls = threading.local()
        self.stats = {"requests": 0, "errors": 0}
        # When a request other than ping/status last came (the idle exit counts from it): `serve
        # --status`, `hooks status` and doctor only look, they do not keep a server alive.
        self.last_active = time.monotonic()

    # -- connections -----------------------------------------------------------------------------
    def listen(self, spawn: Callable[[Callable[[], None], str], None]) -> None:
        path = self.server.socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.fspath(path))
        os.chmod(path, 0o600)
        s.listen(128)
        s.settimeout(0.25)  # lets the accept loop notice a stop
        self.listener = s
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="hive-brain-req")
        spawn(self._accept_loop, "hive-brain-accept")

    def close_listener(self) -> None:
        if self.listener is not None:
            self.listener.close()
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:  # wake workers blocked reading an idle connection, so the process can exit
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def shutdown_pool(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)

    def _accept_loop(self) -> None:
        assert self.listener is not None and self.pool is not None
        stop = self.server.stopping
        while not stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if stop.is_set():
                    break
                time.sleep(0.05)
                continue
            try:
                self.pool.submit(self._serve_connection, conn)
            except RuntimeError:  # pool shut down while stopping
                conn.close()
                break

    def _serve_connection(self, conn: socket.socket) -> None:
        uid = peer_uid(conn)
        if uid is not None and uid != os.getuid():
            # The socket is 0600 in a 0700 dir; this is the check that holds if either is loosened.
            self.server.log.warning("refused a connection from uid %s (the server answers uid %s only)",
                                    uid, os.getuid())
            conn.close()
            return
        with self._conns_lock:
            self._conns.add(conn)
        try:
            self._serve_lines(conn)
        finally:
            with self._conns_lock:
                self._conns.discard(conn)

    def _serve_lines(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(IDLE_CONNECTION_S)
            f = conn.makefile("rb")
            try:
                while not self.server.stopping.is_set():
                    try:
                        line = f.readline(MAX_REQUEST + 1)
                    except OSError:
                        return
                    if not line:
                        return
                    # In flight until the answer is sent: a cycle begun at the request's end (it waits for
                    # that) shared the GIL with encoding the answer.
                    self.loop.begin_request()
                    try:
                        op, resp = self.handle(line)
                        conn.sendall(encode_line(resp))
                    except OSError:
                        return
                    finally:
                        self.loop.end_request()
                    if op == "stop" and resp.get("ok"):
                        self.server.request_stop()
                        return
                    if len(line) > MAX_REQUEST:
                        return  # the rest of that line cannot be told apart from a next request
            finally:
                f.close()

    # -- requests --------------------------------------------------------------------------------
    def handle(self, line: bytes) -> tuple[str, dict[str, Any]]:
        """One request line -> (op, response). Never raises: a bad request is an error response."""
        with self._conns_lock:
            self.stats["requests"] += 1
        self.loop.begin_request()  # also here for in-process callers (Server.handle); nested counts add up
        try:
            return self._handle(line)
        finally:
            self.loop.end_request()

    def _handle(self, line: bytes) -> tuple[str, dict[str, Any]]:
        op = ""
        try:
            if len(line) > MAX_REQUEST:
                raise UsageError(f"request line is over {MAX_REQUEST:,} bytes; the connection is closed",
                                 hint="send a shorter query")
            try:
                req = json.loads(line)
            except ValueError as e:
                raise UsageError(f"request is not JSON: {e}") from None
            if not isinstance(req, dict):
                raise UsageError("request must be a JSON object")
            if not isinstance(req.get("op"), str):
                raise UsageError("request needs an \"op\" string", hint="e.g. {\"op\": \"ping\"}")
            op = clean_text(req["op"])
            args = req.get("args") or {}
            if not isinstance(args, dict):
                raise UsageError("args must be a JSON object")
            fn = self._ops().get(op)
            if op not in ("ping", "status"):
                self.last_active = time.monotonic()
            if fn is None:
                raise UsageError(f"unknown op {op!r}", hint="one of: " + ", ".join(sorted(self._ops())))
            return op, {"ok": True, "result": fn(args)}
        except HiveBrainError as e:
            self.stats["errors"] += 1
            # The error's whole data (errors.py): the client rebuilds the same class with it. "type" is
            # the name clients before to_dict read.
            return op, {"ok": False, "error": {"type": e.kind, **e.to_dict()}}
        except Exception as e:  # noqa: BLE001 - a bug in one request must never take the server down
            self.stats["errors"] += 1
            self.server.log.exception("op %r failed", op)
            return op, {"ok": False, "error": {"type": "InternalError", "message": f"{type(e).__name__}: {e}",
                                               "hint": f"see {self.server.log_path}"}}

    def _ops(self) -> dict[str, Callable[[dict], Any]]:
        return {"ping": self.op_ping, "status": self.op_status, "recall": self.op_recall, "answer": self.op_answer,
                "prompt": self.op_prompt, "catch_up": self.op_catch_up, "stop": self.op_stop, "write": self.op_write,
                "get": self.op_get, "core": self.op_core, "vault_status": self.op_vault_status}

    def op_ping(self, args: dict) -> dict:
        snap = self.loop.snap
        return {"pong": True, "pid": os.getpid(), "ready": self.loop.ready.is_set(),
                "generation": snap.generation if snap else None, "error": self.loop.error}

    def op_stop(self, args: dict) -> dict:
        self.server.log.info("stop requested by a client")
        return {"stopping": True, "pid": os.getpid()}

    def op_status(self, args: dict) -> dict:
        srv, loop, emb = self.server, self.loop, self.loop.embedder
        snap = loop.snap
        return {
            "pid": os.getpid(), "vault": str(srv.vault.root), "stateDir": str(srv.state), "socket": str(srv.socket),
            "log": str(srv.log_path), "ready": loop.ready.is_set(), "error": loop.error,
            "started": srv.started_at, "uptimeS": round(time.time() - (srv.started_at or time.time()), 1),
            "generation": snap.generation if snap else None,
            "semantic": {"on": bool(snap and snap.embedder is not None), "offReason": snap.semantic_off if snap else None,
                         "pendingPassages": snap.pending if snap else None, "embedChunk": emb.chunk,
                         "vectorWritesSinceCompaction": emb.vec_writes,
                         # notes whose passages the reranker has still to read ahead (search/rerank.py)
                         "rerankAhead": loop.rerank_ahead, "reranker": loop.reranker_on},
            "watcher": loop.watcher, "debounceS": loop.debounce, "resyncS": loop.resync,
            "catchUps": loop.cycles, "lastCatchUp": loop.last_catch_up, "requests": self.stats["requests"],
            "errors": self.stats["errors"], "warnings": list(snap.warnings) if snap else [],
        }

    def op_catch_up(self, args: dict) -> dict:
        timeout = args.get("timeout", self.server.settings.lock_timeout)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 <= timeout <= 3600:
            raise UsageError(f"args.timeout must be a number of seconds (0-3600), not {timeout!r}")
        return self.loop.catch_up_now(float(timeout))

    def op_write(self, args: dict) -> dict:
        """A memory write (``{"op": "remember", "args": {...}, "agent": ...}``) done by the indexing
        thread: the server holds the catalog and index open, so the client pays neither."""
        settings = self.server.settings
        if settings.scoped_permissions:
            # The socket cannot tell one agent from another: in enforcement mode writes stay in the
            # caller's own process, where its identity is checked.
            raise WritesRefused("this server does not take writes in enforcement mode",
                                hint="write in-process (the CLI does so by itself)")
        if not self.loop.ready.is_set():
            raise ServerNotReady("the hive-brain server is still building its index view",
                                 hint="retry in a moment, or write in-process")
        op, call = args.get("op"), args.get("args")
        if not isinstance(op, str) or not isinstance(call, dict):
            raise UsageError("a write needs args.op (a string) and args.args (an object)")
        wait = args.get("lock_timeout", settings.lock_timeout)
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= 3600:
            raise UsageError(f"args.lock_timeout must be a number of seconds (0-3600), not {wait!r}")
        # The caller's wait for the lock, never longer than ours: the caller hears back within the time it
        # gives itself (lock wait + 10 s), so a busy vault ends as the same pending write as in-process
        # instead of an answer that came too late ("did not confirm").
        wait = min(float(wait), settings.lock_timeout)
        agent = _agent_arg(args)
        # Outside enforcement mode (the only mode that gets here) no id means the owner, as in-process.
        res = self.loop.submit_write(
            lambda eng: eng.memory.for_agent(agent, owner_verified=not agent, lock_timeout=wait).call(op, call),
            timeout=wait + 5.0)
        return {**res, "via": "server"}

    # -- read ops --------------------------------------------------------------------------------
    def _engine(self, args: dict) -> Engine:
        """An engine acting for the caller's agent on this request thread (kept per thread and agent:
        its catalog stays warm, and threads never share one SQLite handle). Outside enforcement mode
        only: no id means the owner there, as in-process."""
        if self.server.settings.scoped_permissions:
            raise InProcessOnly("this server does not answer reads of whole notes in enforcement mode",
                                hint="read in-process (the CLI does so by itself)")
        agent = _agent_arg(args)
        engines = getattr(self._tls, "engines", None)
        if engines is None or len(engines) >= 32:  # callers choose agent ids: keep the cache bounded
            engines = self._tls.engines = {}
        eng = engines.get(agent)
        if eng is None:
            from ..engine import Engine

            eng = engines[agent] = Engine(self.server.vault, self.server.settings.replace(
                agent_id=agent, owner_verified=not agent))
        return eng

    def _catalog_engine(self, args: dict) -> Engine:
        """:meth:`_engine` with its catalog brought up to date the way a write's is: only the notes the
        watcher saw change are re-read (the server's own writes refreshed theirs as they committed),
        or the vault walked when the watcher cannot say. A stat walk of every note per request was
        most of ``get``/``core``/``status`` (10k notes: ~0.2 s of each); waiting for the indexing
        loop instead would wait for the index, which these reads do not use."""
        eng = self._engine(args)
        self.loop.refresh_catalog(eng.catalog)
        return eng

    def op_get(self, args: dict) -> dict:
        """One memory with its chain (``hive-brain get``), as the caller's agent may see it."""
        mid = args.get("memory_id")
        if not isinstance(mid, str) or not mid:
            raise UsageError("args.memory_id must be a memory id")
        return self._catalog_engine(args).memory.get(mid, refresh=False)

    def op_core(self, args: dict) -> dict:
        """The core memory a session starts with (``hive-brain core``)."""
        from ..memory.core import core_pack

        budget = args.get("budget", 6000)
        if isinstance(budget, bool) or not isinstance(budget, int) or not 200 <= budget <= 100_000:
            raise UsageError("args.budget must be a whole number of characters (200-100000)")
        eng = self._catalog_engine(args)
        return core_pack(eng, eng.settings.agent_id, budget, refresh=False)

    def op_vault_status(self, args: dict) -> dict:
        """``hive-brain status``: the vault, its index and this server, as the caller's agent sees them."""
        eng = self._catalog_engine(args)
        return eng.status(refresh=False, stale=lambda gid: self.loop.stale_notes(eng.catalog, gid))

    def _catalog(self) -> Catalog:
        cat = getattr(self._tls, "catalog", None)
        if cat is None:
            from ..store.catalog import Catalog

            cat = Catalog(self.server.vault, max_note_bytes=self.server.settings.max_note_bytes)
            self._tls.catalog = cat
        return cat

    def view(self, semantic: bool) -> View:
        from ..search.view import assemble

        snap = self.loop.snap
        if snap is None or not self.loop.ready.is_set():
            raise ServerNotReady("the hive-brain server is still building its index view",
                                 hint="retry in a moment, or work in-process")
        return assemble(lexical=snap.lexical, catalog=self._catalog(), generation=snap.generation, semantic=semantic,
                        vectors=snap.vectors, embedder=snap.embedder, off_reason=snap.semantic_off,
                        pending=snap.pending, warnings=snap.warnings, state=self.server.state)

    def _caller(self, args: dict) -> str | None:
        """The agent a read is for; in enforcement mode the id is a claim and the credential (or the
        owner key) its proof."""
        agent = _agent_arg(args)
        settings = self.server.settings
        if settings.scoped_permissions:
            from ..store.identity import check_request

            check_request(settings.state_dir, agent, args.get("auth"))
        return agent

    def read_args(self, args: dict, extra: frozenset[str] = frozenset()) -> tuple[str, str | None, bool, dict]:
        query = args.get("query")
        if not isinstance(query, str):
            raise UsageError("args.query must be a string")
        if not isinstance(args.get("budget"), int | None) or isinstance(args.get("budget"), bool):
            raise UsageError("args.budget must be a whole number of characters")
        unknown = set(args) - RECALL_OPTIONS - {"query", "agent", "auth", "semantic"} - extra
        if unknown:
            raise UsageError(f"unknown recall option(s): {', '.join(sorted(unknown))}",
                             hint="one of: " + ", ".join(sorted(RECALL_OPTIONS | {'agent', 'semantic'})))
        agent = self._caller(args)
        opts = {k: v for k, v in args.items() if k in RECALL_OPTIONS and v is not None}
        if opts.get("deep") is True:
            opts["rerank_cold"] = DEEP_RERANK_COLD
        if "now" in opts:
            # The caller's clock for relative dates ("last Saturday"), sent as ISO 8601.
            try:
                opts["now"] = dt.datetime.fromisoformat(opts["now"])
            except (TypeError, ValueError):
                raise UsageError("args.now must be an ISO 8601 date-time") from None
        return query, agent, bool(args.get("semantic", True)), opts

    def _settle(self, query: str, semantic: bool, opts: dict) -> None:
        """Before a recall or answer: what changed is indexed, unless the only notes not yet indexed are
        this server's writes and they cannot change this question's hits (``search.pending``)."""

        def unaffected(paths: list[str]) -> bool:
            from ..index.indexer import written_terms
            from ..search.pending import could_change

            snap = self.loop.snap
            if snap is None:
                return False
            alts = opts.get("alternatives")
            texts = [query, *(a for a in alts if isinstance(a, str))] if isinstance(alts, list) else [query]
            try:
                written = written_terms(self.server.vault.root, self._catalog(), paths)
                return not could_change(snap.lexical, [clean_text(t) for t in texts], written, paths,
                                        now=opts.get("now"), as_of=opts.get("as_of"),
                                        vectors=semantic and snap.vectors is not None and snap.embedder is not None)
            except Exception:  # noqa: BLE001 - not known: wait (a bad option is the search's to report)
                return False

        self.loop.settle(READ_SETTLE_S, unaffected)

    def op_recall(self, args: dict) -> dict:
        from ..search.recall import search

        query, agent, semantic, opts = self.read_args(args)
        self._settle(query, semantic, opts)
        res = search(self.view(semantic), query, agent=agent, semantic=semantic, **opts)
        res["via"] = "server"
        return res

    def op_answer(self, args: dict) -> dict:
        from ..search.answer import answer_view

        query, agent, semantic, opts = self.read_args(args, frozenset({"budget"}))
        self._settle(query, semantic, opts)
        pack = answer_view(self.view(semantic), query, agent=agent, semantic=semantic, budget=args.get("budget"), **opts)
        pack["via"] = "server"
        return pack

    def op_prompt(self, args: dict) -> dict:
        """The prompt hook's answer (``search.prompt.prompt_pack``) in one request: the hook process
        then loads no ranking or transcript code and receives only the finished context."""
        from ..search.prompt import PROMPT_CHARS, prompt_pack, transcript_context
        from ..search.recall import search

        prompt, context, tp, budget = args.get("prompt"), args.get("context"), args.get("transcript_path"), args.get("budget")
        if not isinstance(prompt, str):
            raise UsageError("args.prompt must be a string")
        if not isinstance(context, str | None) or not isinstance(tp, str | None):
            raise UsageError("args.context and args.transcript_path must be strings when given")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise UsageError("args.budget must be a whole number of characters")
        unknown = set(args) - {"prompt", "context", "transcript_path", "budget", "agent", "auth"}
        if unknown:
            raise UsageError(f"unknown prompt option(s): {', '.join(sorted(unknown))}")
        agent = self._caller(args)
        t0 = time.perf_counter()
        self.loop.settle_writes(PROMPT_SETTLE_S)
        view = self.view(True)
        context = context or transcript_context(tp)
        pack = prompt_pack(lambda q, semantic=True, **o: search(view, q, agent=agent, semantic=semantic, rerank_cold=PROMPT_RERANK_COLD, **o), clean_text(prompt)[:PROMPT_CHARS],
                           clean_text(context), budget=max(500, budget), state=self.server.state, agent=agent,
                           hybrid=view.vectors is not None and view.embedder is not None)
        # What the hook uses: not the recall's hits and score details (a large line to encode and parse).
        keep = ("abstained", "reason", "context", "chars", "mode", "notice")
        out = {k: pack.get(k) for k in keep}
        out["items"] = [{k: it.get(k) for k in ("path", "id", "kind")} for it in pack.get("items") or []]
        out["via"] = "server"
        # The server's share of the hook's time (the first search's stages, and the whole op): hooks
        # status and benchmarks/hook_latency.py read it.
        out["timing"] = {**((pack.get("recall") or {}).get("timing") or {}),
                         "opMs": round((time.perf_counter() - t0) * 1000, 2)}
        return out
