"""The one read policy: ask the vault's warm server, else work in-process.

Every front end that reads (``Engine.recall/answer``, the prompt hook, the MCP tools) builds one
:class:`Reader` for its process and hands it the work; the server-first choice, its fallback and
what crosses the socket live here and nowhere else.

``Reader.read(work)`` runs ``work(source)`` against the server; when the server becomes unavailable
anywhere inside it (not running, hung, still starting, a server bug), ``work`` runs again against the
local source, so a multi-query operation (the hook asks twice) is answered wholly one way. A failed
server is not asked again by this process (any of its Readers of that vault) for ``RETRY_AFTER_S``:
a short process (the hook, a CLI command) chooses once; a long one (MCP) notices a server started
later.

A caller that passes its own view reads that view (it is local by definition); every read
parameter, ``now`` included, goes to the server as it would in-process.

Import-light: the prompt hook imports this module; only the standard library loads here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

# typing only for the type checker (typing.TYPE_CHECKING would import it): the prompt hook imports
# this module, and ``typing`` was one of the largest imports of its process.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from .search.recall import View

    T = TypeVar("T")

__all__ = ["LocalSource", "Reader", "ServerSource", "Source"]

RETRY_AFTER_S = 30.0
# Per process and vault (state dir): until when its server is not asked again after a failure. Shared
# by every Reader of the process, so the choice is made once however many engines a process opens.
_server_down_until: dict[str, float] = {}


class Source:
    """Where one attempt of a read goes: ``via`` is "server" or "local"."""

    via = ""

    def recall(self, query: str, *, semantic: bool = True, **opts: Any) -> dict:
        raise NotImplementedError

    def answer(self, query: str, *, budget: int | None = None, semantic: bool = True, **opts: Any) -> dict:
        raise NotImplementedError

    def view(self, semantic: bool = True) -> View | None:
        """The local view (None on the server, or when nothing is indexed yet)."""
        return None

    def full_text(self, path: str) -> str | None:
        return None


class ServerSource(Source):
    via = "server"

    def __init__(self, reader: Reader, deadline: float | None) -> None:
        self._r = reader
        self._deadline = deadline

    def _call(self, op: str, args: dict[str, Any]) -> dict:
        from .rpc import client

        timeout = self._r.timeout
        if self._deadline is not None:
            timeout = min(timeout, self._deadline - time.monotonic())
            if timeout <= 0.01:
                raise client.ServerUnavailable("no time left for the server")
        now = args.get("now")
        if now is not None and not isinstance(now, str):
            args["now"] = now.isoformat()  # a datetime; the server parses it back
        # The caller's identity and, in enforcement mode, its proof (store/identity.py): the server checks it.
        res = client.call(self._r.state, op, {**args, "agent": self._r.agent, **({"auth": self._r.auth} if self._r.auth else {})},
                          timeout=timeout)
        if (not isinstance(res, dict) or (op == "recall" and not isinstance(res.get("hits"), list))
                or (op == "prompt" and not isinstance(res.get("mode"), str))):
            raise client.ServerError(f"the server's {op} answer is malformed")
        return res

    def recall(self, query: str, *, semantic: bool = True, **opts: Any) -> dict:
        return self._call("recall", {"query": query, "semantic": semantic, **opts})

    def answer(self, query: str, *, budget: int | None = None, semantic: bool = True, **opts: Any) -> dict:
        return self._call("answer", {"query": query, "semantic": semantic, "budget": budget, **opts})

    def prompt(self, prompt: str, *, context: str = "", transcript_path: str | None = None, budget: int) -> dict:
        """The prompt hook's whole answer (``search.prompt.prompt_pack``, run by the server)."""
        return self._call("prompt", {"prompt": prompt, "context": context or None, "transcript_path": transcript_path,
                                     "budget": budget})


class LocalSource(Source):
    """In-process reads on views from the reader's view function, opened at most once per attempt."""

    via = "local"

    def __init__(self, reader: Reader) -> None:
        self._r = reader
        self._views: dict[bool, View | None] = {}

    def view(self, semantic: bool = True) -> View | None:
        if semantic not in self._views:
            self._views[semantic] = self._r.local_view(semantic)
        return self._views[semantic]

    def _view(self, semantic: bool) -> View:
        v = self.view(semantic)
        if v is None:
            from .errors import IndexError_

            raise IndexError_("nothing is indexed yet", hint="run `hive-brain rebuild-index`")
        return v

    def full_text(self, path: str) -> str | None:
        from .search.recall import _full_text

        v = next((x for x in self._views.values() if x is not None), None)
        return _full_text(v, path, self._r.agent) if v is not None else None

    def recall(self, query: str, *, semantic: bool = True, **opts: Any) -> dict:
        from .search.recall import search

        v = self._view(semantic)
        return search(v, query, agent=self._r.agent, semantic=semantic and v.vectors is not None, **opts)

    def answer(self, query: str, *, budget: int | None = None, semantic: bool = True, **opts: Any) -> dict:
        from .search.answer import answer_view

        v = self._view(semantic)
        return answer_view(v, query, agent=self._r.agent, semantic=semantic and v.vectors is not None,
                           budget=budget, **opts)


class Reader:
    """Server-first reads for one process (see the module docstring).

    ``local_view(semantic)`` opens the in-process view this front end reads when the server does not
    answer (the engine's catch-up view; the hook's read-only one). ``fallback_on_error``: also go
    local when the server answers with an error of its own (the hook: a server of another version
    must not cost the user their memory); otherwise only an unavailable server does."""

    def __init__(self, state: Path | str, *, agent: str | None, local_view: Callable[[bool], View | None],
                 use_server: bool = True, timeout: float = 60.0, fallback_on_error: bool = False,
                 local_reserve: float = 0.0, auth: dict[str, str] | None = None) -> None:
        self.state = state
        # Seconds of a read's deadline kept for the in-process answer: a server that hangs costs
        # the hook its server answer, not the prompt its memory.
        self.local_reserve = local_reserve
        self.agent = agent
        self.auth = auth or {}
        self.local_view = local_view
        self.use_server = use_server
        self.timeout = timeout
        self.fallback_on_error = fallback_on_error
        self.server_error: str | None = None  # why the last read did not come from the server

    def server_first(self) -> bool:
        if not self.use_server or time.monotonic() < _server_down_until.get(str(self.state), 0.0):
            return False
        from .rpc.client import server_ready

        if not server_ready(self.state):
            self.server_error = "the server is not running or not ready yet"
            return False
        return True

    def read(self, work: Callable[[Source], T], *, deadline: float | None = None) -> T:
        """``work(source)`` on the server, else (all of it) in-process."""
        self.server_error = None
        if self.server_first():
            from .rpc.client import ServerUnavailable

            try:
                return work(ServerSource(self, None if deadline is None else deadline - self.local_reserve))
            except ServerUnavailable as e:
                _server_down_until[str(self.state)] = time.monotonic() + RETRY_AFTER_S
                self.server_error = _one_line(e)
            except Exception as e:  # noqa: BLE001 - re-raised unless asked to fall back (fallback_on_error)
                if not self.fallback_on_error:
                    raise
                self.server_error = _one_line(e)
        return work(LocalSource(self))

    def recall(self, query: str, *, semantic: bool = True, deadline: float | None = None, **opts: Any) -> dict:
        return self.read(lambda s: s.recall(query, semantic=semantic, **opts), deadline=deadline)

    def answer(self, query: str, *, budget: int | None = None, semantic: bool = True, deadline: float | None = None,
               **opts: Any) -> dict:
        return self.read(lambda s: s.answer(query, budget=budget, semantic=semantic, **opts), deadline=deadline)


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    name = type(e).__name__
    return (f"{name}: {msg}" if name not in msg else msg)[:300]
