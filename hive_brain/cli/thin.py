"""The thin client: the everyday commands answered by the vault's ready server from a process that
imports neither click nor rich nor any engine code (the prompt hook's fast path, ``agents/quick.py``,
generalised to the CLI).

``hive-brain remember / evolve / update / get / recall / answer / core / status`` parse their arguments here (:data:`COMMANDS`: the same
options, names and defaults as the click commands, which ``tests/test_thin_client.py`` checks), make
one request over the socket, and print what the full CLI prints (:mod:`.text`; plain, with a little
ANSI style on a terminal). Anything else raises :class:`Fallback` before a byte is printed or a write
is sent, and ``__main__`` runs the full CLI as before: ``--help``, an option or value this parser does
not take (click then says what is wrong), no ready server, enforcement mode, ``--owner-key``, an
operational recall, a server that cannot answer a read. A write the server took but did not confirm is
never handed on (it may have been applied): it is reported as the full CLI reports it.
"""

from __future__ import annotations

import os
import sys
import time

from .. import config
from ..agents import quick
from ..errors import HiveBrainError
from . import text

TYPE_CHECKING = False  # typing for the type checker only
if TYPE_CHECKING:
    from typing import Any

__all__ = ["COMMANDS", "EVERY", "GLOBAL", "Fallback", "main", "recall_args"]

RECALL_TIMEOUT_S = 60.0  # the Reader's own (reader.Reader.timeout)
NOTHING_FOUND_EXIT = 3  # as cli/search.py: 1 is a refusal or failure, 2 a usage error

# option -> (parameter name, kind, default). Kinds: str, int, float, flag, multi (repeatable), "a|b|c" (a
# choice), "int:1:100" (a range). A value this table refuses goes to click, which words the error.
GLOBAL: dict[str, tuple[str, str, Any]] = {
    "--vault": ("vault", "str", None), "--agent": ("agent", "str", None), "--no-color": ("no_color", "flag", False),
}
# Options every command takes after its name as well (cli.base.command adds them).
EVERY: dict[str, tuple[str, str, Any]] = {"--no-color": ("no_color_", "flag", False)}
_RECALL: dict[str, tuple[str, str, Any]] = {
    "--scope": ("scope", "tiered|agent-memory|full-vault", "tiered"),
    "--type": ("types", "multi", ()),
    "--tags": ("tags", "str", None),
    "--project": ("project", "str", None),
    "--limit": ("limit", "int:1:100", 10),
    "--as-of": ("as_of", "str", None),
    "--include-operational": ("include_operational", "flag", False),
    "--detail": ("detail", "abstract|overview|full", "full"),
    "--mode": ("mode", "flat|hierarchical", "flat"),
    "--lexical": ("lexical", "flag", False),
    "--rerank": ("rerank", "flag", False),
    "--exit-status": ("exit_status", "flag", False),
    "--json": ("as_json", "flag", False),
}
_ID: dict[str, tuple[str, str, Any]] = {"--memory-id": ("memory_id", "str", None)}
_JSON: dict[str, tuple[str, str, Any]] = {"--json": ("as_json", "flag", False)}
COMMANDS: dict[str, tuple[str | None, dict[str, tuple[str, str, Any]]]] = {
    "remember": (None, {
        "--type": ("mem_type", "str", None), "--title": ("title", "str", None), "--content": ("content", "str", None),
        "--memory-key": ("memory_key", "str", None), "--project": ("project", "str", None),
        "--tags": ("tags", "str", None), "--aliases": ("aliases", "str", None),
        "--question": ("questions", "multi", ()), "--confidence": ("confidence", "float", None),
        "--memory-scope": ("memory_scope", "hive|private|task", None), "--task": ("task", "str", None),
        "--overrides": ("overrides", "str", None), "--from-conversation": ("conversation", "str", None),
        "--excerpt": ("excerpt", "str", None), "--turn": ("turn", "int:1:1000000", None), **_JSON,
    }),
    "evolve": ("memory_id_arg", {**_ID, "--content": ("content", "str", None), "--title": ("title", "str", None),
                                 "--aliases": ("aliases", "str", None), "--question": ("questions", "multi", ()),
                                 **_JSON}),
    "update": ("memory_id_arg", {
        **_ID, "--title": ("title", "str", None), "--content": ("content", "str", None),
        "--tags": ("tags", "str", None), "--project": ("project", "str", None),
        "--confidence": ("confidence", "float", None), "--status": ("status", "archived|active", None), **_JSON,
    }),
    "get": ("memory_id_arg", {**_ID, **_JSON}),
    "recall": ("question", _RECALL),
    "answer": ("question", {"--budget": ("budget", "int", None), "--hook": ("hook_mode", "flag", False), **_RECALL,
                            "--detail": ("detail", "abstract|overview|full", "overview")}),
    "core": (None, {"--agent": ("agent_id", "str", None), "--budget": ("budget", "int:200:100000", 6000), **_JSON}),
    "status": (None, _JSON),
}


class Fallback(Exception):
    """The thin client does not answer this command: the full CLI does, from the start."""


# ---------------------------------------------------------------------------------------------- parsing
def _value(kind: str, raw: str) -> Any:
    if kind in ("str", "multi"):
        return raw
    try:
        if kind == "float":
            return float(raw)
        if kind.startswith("int"):
            v = int(raw)
            if kind != "int":
                _, lo, hi = kind.split(":")
                if not int(lo) <= v <= int(hi):
                    raise Fallback(f"{raw} out of range")
            return v
    except ValueError:
        raise Fallback(f"not a number: {raw!r}") from None
    if raw not in kind.split("|"):
        raise Fallback(f"not a choice: {raw!r}")
    return raw


def _options(tokens: list[str], spec: dict[str, tuple[str, str, Any]], positional: str | None,
             *, stop_at_command: bool = False) -> tuple[dict[str, Any], list[str]]:
    """``tokens`` against ``spec``: (values by parameter name, the tokens left after a command word when
    ``stop_at_command``). Whatever click would take another way (help, ``--``, short options, an
    unknown option) is not parsed here."""
    got: dict[str, Any] = {name: default for name, _kind, default in spec.values()}
    if positional is not None:
        got[positional] = None  # an argument click makes optional (the id may come as --memory-id instead)
    seen_positional = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and tok != "-":
            flag, eq, raw = tok.partition("=")
            if flag not in spec:
                raise Fallback(f"option {flag}")
            name, kind, _default = spec[flag]
            if kind == "flag":
                if eq:
                    raise Fallback(f"{flag}=")
                got[name] = True
                i += 1
                continue
            if not eq:
                if i + 1 >= len(tokens):
                    raise Fallback(f"{flag} needs a value")
                raw = tokens[i + 1]
                i += 1
            value = _value(kind, raw)
            got[name] = (*got[name], value) if kind == "multi" else value
            i += 1
            continue
        if stop_at_command:
            return got, tokens[i:]
        if positional is None or seen_positional:
            raise Fallback(f"argument {tok!r}")
        got[positional] = tok
        seen_positional = True
        i += 1
    if stop_at_command:
        raise Fallback("no command")
    return got, []


def parse(argv: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(command, its values, the global options' values) of a command line the thin client takes."""
    if any(a in ("-h", "--help", "--version", "--") for a in argv):
        raise Fallback("help")
    glob, rest = _options(argv, GLOBAL, None, stop_at_command=True)
    cmd = rest[0]
    if cmd not in COMMANDS:
        raise Fallback(f"command {cmd!r}")
    positional, spec = COMMANDS[cmd]
    got, _ = _options(rest[1:], {**spec, **EVERY}, positional)
    if got.pop("no_color_"):
        glob["no_color"] = True
    return cmd, got, glob


# ---------------------------------------------------------------------------------------------- requests
def recall_args(types: Any, tags: str | None, project: str | None, limit: int, as_of: str | None,
                include_operational: bool, detail: str, mode: str, scope: str, rerank: bool = False) -> dict[str, Any]:
    """``recall``/``answer``'s options as the reader takes them (the click commands build them here too).
    ``deep`` only when asked: a server of an older version refuses an option it does not know."""
    return {"types": list(types) or None, "tags": text.split_tags(tags), "project": project, "limit": limit,
            "as_of": as_of, "include_operational": include_operational, "detail": detail,
            "mode": None if mode == "flat" else mode, "scope": scope, **({"deep": True} if rerank else {})}


def _remember(v: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if v["mem_type"] is None or v["title"] is None or v["content"] is None:
        raise Fallback("a required option is missing")  # click says which
    if v["conversation"] is None and (v["excerpt"] is not None or v["turn"] is not None):
        raise Fallback("--excerpt/--turn without --from-conversation")  # the full CLI says what is wrong
    inp = {"type": v["mem_type"], "title": v["title"], "content": v["content"], "memory_key": v["memory_key"],
           "project": v["project"], "tags": text.split_tags(v["tags"]) or [],
           "aliases": text.split_tags(v["aliases"]) or [], "questions": list(v["questions"]), "confidence": v["confidence"],
           "scope": v["memory_scope"], "task": v["task"], "overrides": v["overrides"],
           **text.evidence_arg(v["conversation"], v["excerpt"], v["turn"])}
    return "remember", {"inp": inp}


def _memory_id(v: dict[str, Any]) -> str:
    mid = v["memory_id_arg"] or v["memory_id"]
    if not mid or (v["memory_id_arg"] and v["memory_id"] and v["memory_id_arg"] != v["memory_id"]):
        raise Fallback("the memory id is missing or given twice")  # click's command says which
    return str(mid)


def _evolve(v: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    mid = _memory_id(v)
    if v["content"] is None:
        raise Fallback("--content is missing")
    return "evolve", {"memory_id": mid, "content": v["content"], "title": v["title"],
                      **text.evolve_names(v["aliases"], v["questions"])}


def _update(v: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "update", {"memory_id": _memory_id(v), "title": v["title"], "content": v["content"],
                      "tags": text.split_tags(v["tags"]), "project": v["project"], "confidence": v["confidence"],
                      "status": v["status"]}


WRITES = {"remember": (_remember, text.remember_line), "evolve": (_evolve, text.evolve_line),
          "update": (_update, text.update_line)}


def _search(op: str, v: dict[str, Any]) -> dict[str, Any]:
    question = v["question"]
    if question is None or not question.strip() or v["include_operational"] or v.get("hook_mode"):
        # The full CLI words the error, reads this device's journal, or runs the hook's own path.
        raise Fallback("an empty question, operational events, or hook mode")
    args = {"query": question, "semantic": not v["lexical"],
            **recall_args(v["types"], v["tags"], v["project"], v["limit"], v["as_of"], v["include_operational"],
                          v["detail"], v["mode"], v["scope"], v["rerank"])}
    if op == "answer":
        args["budget"] = v["budget"]
    return args


# command -> (the server's op, its arguments from the command's values, a check of the answer's shape)
READS: dict[str, tuple[str, Any, Any]] = {
    "recall": ("recall", lambda v: _search("recall", v), lambda r: isinstance(r.get("hits"), list)),
    "answer": ("answer", lambda v: _search("answer", v), lambda r: isinstance(r.get("abstained"), bool)),
    "get": ("get", lambda v: {"memory_id": _memory_id(v)}, lambda r: isinstance(r.get("meta"), dict)),
    "core": ("core", lambda v: {"budget": v["budget"]}, lambda r: isinstance(r.get("text"), str)),
    "status": ("vault_status", lambda v: {}, lambda r: isinstance(r.get("semantic"), dict)),
}


def _human(cmd: str, res: dict[str, Any], style: Any) -> str:
    """What the full CLI prints for people (the same lines, :mod:`.text`)."""
    if cmd == "recall":
        return "\n".join(text.recall_lines(res, style))
    if cmd == "answer":
        return "\n".join(text.answer_lines(res)) if res["abstained"] else str(res.get("context") or "")
    if cmd == "get":
        return "\n".join(text.get_lines(res, style))
    if cmd == "core":
        return str(res["text"] or text.NO_CORE)
    return "\n".join(text.status_lines(res, style))


# ---------------------------------------------------------------------------------------------- settings
def _settings(glob: dict[str, Any]) -> tuple[str, str, str | None, float]:
    """(the vault's root, its state dir, the agent id, the lock timeout), resolved as ``config.resolve``,
    ``store.vault.open_vault`` and ``store.identity.establish`` resolve them, for a caller the server can
    serve without proofs."""
    try:
        got, src = config.values(("vault", "state_dir", "agent_id", "use_server", "scoped_permissions",
                                  "lock_timeout"), vault=glob["vault"], agent_id=glob["agent"])
        if not got.get("use_server", config.default("use_server")):
            raise Fallback("use_server is off")
        if got.get("scoped_permissions") or os.environ.get("HIVE_BRAIN_OWNER_KEY"):
            raise Fallback("enforcement mode: the caller proves who it is in-process")
        vault = got.get("vault")
        if vault is None or str(src.get("vault", "")).startswith("config:"):
            # The vault you stand in, then the config file's (open_vault).
            vault = quick.find_vault(os.getcwd()) or vault
        if vault is None:
            raise Fallback("no vault")  # the full CLI says so
        agent = got.get("agent_id")
        if agent is None:
            agent = config.agent_from_environment(os.environ)
        if agent is not None:
            agent = config.validate_agent_id(agent)
        state = quick._vault_state(vault, got.get("state_dir") or config.data_dir())
        root = os.path.realpath(os.path.expanduser(vault))
        return root, state, agent, float(got.get("lock_timeout", config.default("lock_timeout")))
    except (HiveBrainError, quick.Fallback) as e:
        raise Fallback(str(e)) from None


# ---------------------------------------------------------------------------------------------- the exchange
def _ask(state: str, request: dict[str, Any], timeout: float, *, write: bool) -> dict[str, Any]:
    """One request to the ready server: its answer (``ok`` and ``result`` or ``error``). Fallback when
    nothing was sent; a write sent but not answered is :func:`..writer.unconfirmed`."""
    from ..rpc import wire

    if not os.path.exists(os.path.join(state, wire.READY_NAME)):
        raise Fallback("the server is not ready")
    path = wire.socket_path(state)
    if not wire.usable(path):
        raise Fallback("a socket folder that is not ours alone")
    line = quick.dumps(request).encode("utf-8") + b"\n"
    try:
        reply = wire.exchange(path, line, time.monotonic() + timeout, max_line=wire.MAX_LINE)
        resp = quick.loads(reply.decode("utf-8"))
    except wire.NotSent:
        raise Fallback("no server listening") from None
    except (OSError, ValueError) as e:
        if not write:
            raise Fallback(f"{type(e).__name__}: {e}") from None
        from ..writer import unconfirmed

        why = f"the hive-brain server did not answer {request['args']['op']!r} within {timeout:g}s" if isinstance(
            e, TimeoutError) else f"{type(e).__name__}: {e}"
        return {"ok": False, "error": unconfirmed(request["args"]["op"], why).to_dict()}
    if not isinstance(resp, dict):
        raise Fallback("a malformed answer")
    return resp


def _error(resp: dict[str, Any], *, write: bool) -> HiveBrainError:
    payload = resp.get("error")
    if not isinstance(payload, dict):
        raise Fallback("an error without its data")
    err = HiveBrainError.from_dict(payload)
    from ..errors import UsageError

    # As the full path treats them: a server that cannot answer is not an answer (reads go local, a
    # write it never took is done in-process); an older server without the op, likewise.
    if err.kind in ("ServerUnavailable", "ServerNotReady", "ServerError", "WritesRefused", "InProcessOnly") and (
            not write or err.kind != "ServerError"):
        raise Fallback(err.message)
    if isinstance(err, UsageError) and err.message.startswith("unknown op"):
        raise Fallback(err.message)
    return err


# ---------------------------------------------------------------------------------------------- output
_ANSI = {"bold": "1", "dim": "2", "yellow": "33", "red": "31"}


def _ansi(style: str, s: str) -> str:
    return f"\x1b[{_ANSI[style]}m{s}\x1b[0m"


def _dump(data: Any) -> str:
    return quick.pretty(data)  # as cli.base._dump, without importing json


def _print_error(err: HiveBrainError, as_json: bool) -> int:
    if as_json:
        sys.stdout.write(_dump({"ok": False, **err.to_dict()}) + "\n")
    else:
        sys.stderr.write(f"error: {err}\n")
    return err.exit_code


def _print_write(res: dict[str, Any], line: Any, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(_dump(res) + "\n")
        return
    sys.stdout.write((text.pending_line(res) if res.get("status") == "pending" else line(res)) + "\n")
    if res.get("indexWarning") and res.get("status") != "pending":
        sys.stderr.write(f"warning: {res['indexWarning']}\n")


def _styled(glob: dict[str, Any]) -> bool:
    return not glob["no_color"] and not os.environ.get("NO_COLOR") and sys.stdout.isatty()


# ---------------------------------------------------------------------------------------------- main
def run(argv: list[str]) -> int:
    """Answer ``argv`` (the arguments after ``hive-brain``) through the server; Fallback when this
    client does not take it (nothing was printed or sent then)."""
    cmd, v, glob = parse(argv)
    if cmd == "core" and v["agent_id"] is not None:
        glob = {**glob, "agent": v["agent_id"]}  # core's own --agent names whose core memory
    root, state, agent, lock_timeout = _settings(glob)
    as_json = bool(v["as_json"])
    if cmd in WRITES:
        build, line = WRITES[cmd]
        if v.get("content") == "-":
            raise Fallback("content from standard input")  # the full CLI reads it
        op, args = build(v)
        from ..writer import SERVER_MARGIN_S, request

        resp = _ask(state, {"op": "write", "args": request(op, args, agent=agent, lock_timeout=lock_timeout)},
                    lock_timeout + SERVER_MARGIN_S, write=True)
        if not resp.get("ok"):
            return _print_error(_error(resp, write=True), as_json)
        res = resp.get("result")
        if not isinstance(res, dict):
            raise Fallback("a malformed answer")
        _print_write(res, lambda r: line(r, lambda rel: os.path.join(root, rel)), as_json)
        return 0
    op, build_args, well_formed = READS[cmd]
    resp = _ask(state, {"op": op, "args": {**build_args(v), "agent": agent}}, RECALL_TIMEOUT_S, write=False)
    if not resp.get("ok"):
        return _print_error(_error(resp, write=False), as_json)
    res = resp.get("result")
    if not isinstance(res, dict) or not well_formed(res):
        raise Fallback("a malformed answer")  # as reader.ServerSource checks it
    if as_json:
        sys.stdout.write(_dump(res) + "\n")
    else:
        sys.stdout.write(_human(cmd, res, _ansi if _styled(glob) else text.no_style) + "\n")
        if cmd == "core":
            for w in res.get("warnings") or []:
                sys.stderr.write(f"warning: {w}\n")
    if v.get("exit_status") and (res.get("abstained") or not (res.get("hits") or res.get("context"))):
        return NOTHING_FOUND_EXIT
    return 0


def main(argv: list[str]) -> int:
    """``run``, with the output flushed (a closed pipe is not an error of ours)."""
    code = run(argv)
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    return code
