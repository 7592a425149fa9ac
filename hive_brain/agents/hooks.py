"""Agent hooks (Claude Code, Codex): memory in on every prompt and session start, conversations out.

``hive-brain hook prompt|session-start|stop|session-end`` reads the hook JSON on stdin and is
dispatched before click is imported (``__main__`` → ``hookentry`` → :func:`dispatch`). This module
imports only the standard library at load time; everything else is imported inside the function
that needs it, on the path that needs it.

The prompt hook is sacred (DESIGN, principle 4): it never writes memory, never opens an index
writer (it appends one line to the per-device usage log: which memories it injected), asks the
warm server first and otherwise answers lexically in-process, all within a hard deadline after
which it prints nothing and exits 0. It fails closed: on any internal error no
memory is injected, the user sees one line pointing at ``hive-brain hooks status``, and the prompt
goes through (unless ``HIVE_BRAIN_HOOK_BLOCK_ON_ERROR=1``).
"""

from __future__ import annotations

import _thread
import json
import os
import sys
import time
from pathlib import Path

from ..search.prompt import PROMPT_CHARS, prompt_pack, transcript_context
from . import quick

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook's process imports this module
if TYPE_CHECKING:
    from typing import Any

    from ..config import Settings
    from ..engine import Engine
    from ..reader import Reader, Source
    from ..search.recall import View
    from ..store.vault import Vault

EVENTS = {
    "prompt": "UserPromptSubmit",
    "session-start": "SessionStart",
    "stop": "Stop",
    "session-end": "SessionEnd",
}
# The JSON envelope of the input and the answer, per agent family (``--format``): "claude" = Claude
# Code's hookSpecificOutput.additionalContext, which Codex and Gemini CLI document too; "cursor" =
# Cursor's flat additional_context (https://cursor.com/docs/agent/hooks); "cline" = Cline's
# {"cancel", "contextModification"}, its prompt under userPromptSubmit
# (https://docs.cline.bot/features/hooks/hook-reference).
FORMATS = ("claude", "cursor", "cline")
STATUS_FILE = quick.STATUS_FILE
STATUS_KEEP = quick.STATUS_KEEP
HOOK_LOCAL_RESERVE_S = quick.LOCAL_RESERVE_S  # the least of the deadline kept for the lexical answer (quick.local_reserve)
STOP_LOCK_TIMEOUT = 2.0
# An agent may run its Stop hook a moment before its transcript holds the reply it just gave (Claude Code
# under load: the first turn's Stop found "no assistant reply yet", seen in the interactive e2e run): the
# hook looks again for this long before it gives up on the turn (the next Stop or SessionEnd takes it).
STOP_FLUSH_WAIT_S = 2.0
STOP_FLUSH_STEP_S = 0.1
SESSION_START_MIN_DEADLINE = 3.0
USAGE = (
    "usage: hive-brain hook prompt|session-start|stop|session-end [--format claude|cursor|cline] < hook.json\n"
    "Reads the hook JSON an agent (Claude Code, Codex) sends on stdin and prints the hook's JSON answer.\n"
    'Example: echo \'{"prompt": "how do we deploy?"}\' | hive-brain hook prompt'
)


class _Timeout(Exception):
    pass


_site_loaded = False


def load_site() -> None:
    """Process ``site`` now when the interpreter was started with ``-S`` (the installed hook command,
    :mod:`.hookentry`): the venv's site-packages (tantivy, numpy, onnxruntime, an editable install's
    path) join ``sys.path`` exactly as a normal start would have added them. A no-op otherwise."""
    global _site_loaded
    if _site_loaded or not sys.flags.no_site:
        return
    _site_loaded = True
    import site

    site.main()


# ---------------------------------------------------------------------------------------------- entry
def dispatch(event: str, argv: list[str], *, stdin: str | None = None, hard_exit: bool = True,
             server_error: str | None = None, t0: float | None = None) -> int:
    """Run one hook. Returns the exit code; with ``hard_exit`` a timed-out run ends the process at once.
    ``server_error``: the fast path (:mod:`.quick`) asked the server and it failed: answer in-process
    at once instead of waiting for it a second time. ``t0``: when the hook began (the fast path's
    start): the deadline and the recorded duration count from it, so the hook has one deadline."""
    t0 = time.monotonic() if t0 is None else t0
    if event in ("-h", "--help", "help") or "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    if event not in EVENTS:
        print(
            f"hive-brain hook: unknown event {event!r} (use prompt, session-start, stop or session-end)",
            file=sys.stderr,
        )
        return 2
    fmt = _format(argv)
    if fmt not in FORMATS:
        print(f"hive-brain hook: unknown --format {fmt!r} (use {' or '.join(FORMATS)})", file=sys.stderr)
        return 2
    rec: dict[str, Any] = {"time": _now_iso(), "event": event, "ok": True, "mode": None}
    settings: Settings | None = None
    output: dict | None = None
    timed_out = False
    try:
        payload = _read_payload(stdin)
        if fmt == "cline":
            payload = _from_cline(payload, event)
        rec["session_id"] = str(payload.get("session_id") or "")[:80] or None
        settings = _settings(payload, argv)
        if server_error:
            settings.use_server = False
            rec["serverError"] = server_error
        rec["agent"] = settings.agent_id
        if event != "prompt":
            load_site()  # these read the index or write memory in-process: the installed packages
        if event == "prompt":
            output = _prompt(settings, payload, rec, t0)
        elif event == "session-start":
            output = _session_start(settings, payload, rec, t0)
        else:
            _stop(settings, payload, rec)
    except _Timeout:
        timed_out = True
        rec["mode"] = "timeout"
        output = None
        # No answer in time, maybe because no server answered: one is started (a no-op when one is
        # ready or starting) so that the next prompts are not cold too.
        rec["startServer"] = event == "prompt"
    except Exception as e:  # noqa: BLE001 - fail closed: a hook must never break the agent
        rec.update(ok=False, error=_one_line(e))
        output = None
    rec["durationMs"] = round((time.monotonic() - t0) * 1000, 1)
    start_server = bool(rec.pop("startServer", False))
    code = 0
    if not rec["ok"]:
        msg = (
            f"hive-brain {event} hook failed ({rec['error']}); no memory was used. "
            "Run `hive-brain hooks status` to see why."
        )
        # Only the prompt may be blocked: exit 2 from a Stop hook would keep the agent talking.
        block = os.environ.get("HIVE_BRAIN_HOOK_BLOCK_ON_ERROR", "").strip().lower() in (
            "1",
            "true",
            "yes",
            "on",
        )
        if block and event == "prompt":
            print(msg, file=sys.stderr)
            code = 2
        else:
            output = {"systemMessage": msg}
    if fmt != "claude":
        output = envelope(output, fmt)
    if output:
        try:
            sys.stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
        except (OSError, ValueError):
            pass  # the agent closed the pipe; nothing to tell it anymore
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if start_server and settings is not None:
        # After the answer is out, never inside the deadline: starting a server (a fork, then a
        # process loading models on the same cores) competed with this prompt's own lexical answer
        # and cost most first prompts after a restart their memory (issue 26).
        if hard_exit:
            _release_stdout()
        rec["serverStarted"] = _start_server(settings)
    _record(_status_dir(settings), rec)
    if hard_exit and (timed_out or event == "prompt"):
        # A timed-out worker may sit in native code: do not wait for it. And the prompt hook has
        # nothing left to clean up (it wrote nothing but its status file and a usage line), so it skips interpreter
        # teardown too (tens of ms of module and index-handle finalisation on every prompt).
        os._exit(code)
    return code


def _release_stdout() -> None:
    """Close the agent's pipe (the answer is written and flushed): an agent reading to the end of the
    output has it now, whatever this process does next."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def _format(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--format":
            return argv[i + 1] if i + 1 < len(argv) else ""
        if a.startswith("--format="):
            return a.split("=", 1)[1]
    return "claude"


def envelope(output: dict | None, fmt: str) -> dict | None:
    """Our answer (Claude Code's shape, or None) in the envelope agent family ``fmt`` documents.

    Neither Cursor nor Cline documents a user-visible notice for these events: a failure or a
    notice shows in `hooks status` instead.
    """
    ctx = ((output or {}).get("hookSpecificOutput") or {}).get("additionalContext")
    if fmt == "cursor":
        return {"additional_context": ctx} if ctx else ({} if output else None)
    if fmt == "cline":
        # Cline blocks the prompt on a non-zero exit or unreadable JSON: always answer, never cancel.
        return {"cancel": False, "contextModification": ctx} if ctx else {"cancel": False}
    return output


def _from_cline(payload: dict, event: str = "prompt") -> dict:
    """Cline's hook input, in the field names the hooks read (prompt, session_id, cwd, and for a task
    that ended, transcript_path: its task history, which Cline's input does not name)."""
    sub = payload.get("userPromptSubmit")
    roots = payload.get("workspaceRoots")
    out = {
        **payload,
        "prompt": sub.get("prompt") if isinstance(sub, dict) else None,
        "session_id": payload.get("taskId"),
        "cwd": roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None,
    }
    if event == "stop":
        from ..memory.conversations import cline_task_history as task_history

        out["transcript_path"] = task_history(str(payload.get("taskId") or ""))
    return out


def _read_payload(stdin: str | None) -> dict:
    if stdin is None:
        if sys.stdin is None or sys.stdin.isatty():
            return {}
        stdin = sys.stdin.read()
    if not stdin.strip():
        return {}
    try:
        data = json.loads(stdin)
    except json.JSONDecodeError as e:
        raise ValueError(f"the hook input is not JSON ({e.msg})") from None
    from ..store.text import clean_json

    # NUL or a lone surrogate from the agent (a "\ud800" escape) could reach no path, log or answer.
    return clean_json(data) if isinstance(data, dict) else {}


def derive_agent(payload: dict) -> str:
    """The agent a hook runs for when HIVE_AGENT_ID is not set (the installer sets it anyway)."""
    tp = payload.get("transcript_path")
    if isinstance(tp, str) and tp:
        return "codex" if "/.codex/" in tp.replace("\\", "/") else "claude-code"
    if os.environ.get("CODEX_HOME") or os.environ.get("CODEX_SANDBOX"):
        return "codex"
    return "claude-code"


def _settings(payload: dict, argv: list[str]) -> Settings:
    from ..config import resolve, validate_agent_id

    flags: dict[str, Any] = {}
    it = iter(argv)
    for a in it:
        if a == "--agent":
            flags["agent_id"] = next(it, "")
        elif a == "--vault":
            flags["vault"] = next(it, None)
    s = resolve(**flags)
    if s.agent_id is None:
        s.agent_id = validate_agent_id(derive_agent(payload))
    if s.scoped_permissions:
        # Enforcement mode: the hook proves its agent (the in-process fallback reads as it too); the
        # server checks the same proof. Standard library only, and skipped otherwise.
        from ..store.identity import establish

        establish(s)
    return s


def _deadline_run(fn: Any, deadline: float) -> Any:
    """Run ``fn()`` in another thread; its result, its exception, or ``_Timeout`` at the deadline.

    ``_thread``, not ``threading``: the prompt hook's process would pay ~5 ms (loaded) to import
    ``threading`` for one thread and one wait. Like a daemon thread, it is not waited for at exit."""
    box: dict[str, Any] = {}
    done = _thread.allocate_lock()
    done.acquire()

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e
        finally:
            done.release()

    _thread.start_new_thread(work, ())
    if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
        raise _Timeout()
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ---------------------------------------------------------------------------------------------- prompt
def _prompt(settings: Settings, payload: dict, rec: dict, t0: float) -> dict | None:
    deadline = t0 + float(settings.hook_deadline)
    prompt = str(payload.get("prompt") or payload.get("user_prompt") or "").strip()
    if not prompt or (prompt.startswith("/") and " " not in prompt):
        rec["mode"] = "skipped"
        return None
    tp = payload.get("transcript_path")
    budget = int(settings.hook_budget_chars)
    pack = _deadline_run(
        lambda: answer_for_hook(settings, prompt, budget=budget, deadline=deadline,
                                transcript_path=tp if isinstance(tp, str) else None), deadline
    )
    rec["mode"] = pack.get("mode")
    rec["items"] = len(pack.get("items") or [])
    if pack.get("serverError"):
        rec["serverError"] = pack["serverError"]
    if pack.get("startServer"):
        rec["startServer"] = True  # dispatch starts it once the answer is printed
    if isinstance(pack.get("timing"), dict) and "opMs" in pack["timing"]:
        rec["serverMs"] = pack["timing"]["opMs"]  # the server's share of durationMs
    if pack.get("abstained") or not pack.get("context"):
        return {"systemMessage": pack["notice"]} if pack.get("notice") else None
    name = str(payload.get("hook_event_name") or "UserPromptSubmit")
    return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": pack["context"]}}


def answer_for_hook(settings: Settings, prompt: str, context: str = "", *, budget: int, deadline: float,
                    transcript_path: str | None = None) -> dict:
    """A context pack for a prompt: the server first, else lexical in-process. Writes no memory and no
    index; the memories it injects are logged as ``retrieved`` usage (one line: :mod:`hive_brain.search.prompt`).

    ``context`` (or, when empty, the last assistant reply read from ``transcript_path``) resolves what
    the prompt refers to. With the server up the whole answer is one ``prompt`` request
    (``search.prompt.prompt_pack`` runs there): this process then loads no ranking, stemming, transcript or
    usage-log code, and receives the finished context rather than every hit's details.

    Returns the ``Engine.answer`` dict plus ``mode`` (hybrid | lexical-server | lexical | scan).
    """
    from ..reader import ServerSource
    from ..store.vault import open_vault

    vault = open_vault(settings)
    prompt = prompt[:PROMPT_CHARS]
    budget = max(500, budget)
    seen: dict[str, str] = {}
    reader = hook_reader(vault, settings, seen, deadline=deadline)

    def from_recalls(src: Source, *, local: bool) -> dict:
        return prompt_pack(lambda q, semantic=True, **o: src.recall(q, semantic=semantic and not local, **o), prompt,
                           context or transcript_context(transcript_path), budget=budget, state=vault.state,
                           agent=settings.agent_id, deadline=deadline, full_text=src.full_text if local else None,
                           local=local)

    def work(src: Source) -> dict:
        if isinstance(src, ServerSource):
            try:
                return src.prompt(prompt, context=context, transcript_path=transcript_path, budget=budget)
            except Exception as e:  # noqa: BLE001 - only an older server's refusal is handled here
                from ..errors import UsageError

                if not (isinstance(e, UsageError) and "unknown op" in e.message):
                    raise
            return from_recalls(src, local=False)  # a server older than the ``prompt`` op: its recalls
        load_site()  # the in-process answer reads tantivy: the packages `python -S` left out
        src.view(False)  # opened whatever the prompt searches: what it found (``seen``) decides a rebuild below
        return from_recalls(src, local=True)

    pack = reader.read(work, deadline=deadline)
    server_error = reader.server_error
    if pack.get("mode") in ("lexical", "scan") and server_error:
        pack["startServer"] = True  # by the caller, after the answer is given (see dispatch)
    local = seen.get("local")
    if local in ("scan", "none") and not (local == "none" and pack.get("startServer") and settings.autostart):
        # The index is missing, or its files gone or damaged: the notes were scanned for this prompt,
        # and a detached rebuild makes the next one an index answer. Not when nothing is indexed and
        # the server started after this answer builds the index on start: two indexers on two cores.
        _request_rebuild(vault.state, vault.root)
    if server_error:
        pack["serverError"] = server_error
    return pack


def _start_server(settings: Settings) -> bool:
    """Warm by default, from any prompt: a server that is gone (it crashed, the machine restarted under
    a resumed session) is started again in the background once this prompt has its lexical answer, so
    the next prompts are hybrid. At most once a minute (``client.start_in_background``); off with
    ``autostart = false``; never fails the prompt."""
    try:
        from ..rpc.client import autostart

        return autostart(settings)
    except Exception:  # noqa: BLE001 - the answer is made; a start that fails shows in server.log
        return False


def hook_reader(vault: Vault, settings: Settings, seen: dict[str, str] | None = None, *, deadline: float | None = None) -> Reader:
    """The hook process's :class:`~hive_brain.reader.Reader`: the server within the deadline, else the
    read-only lexical view; any server failure (another version, a bug) falls back to that view.
    With no index to read (none yet, the state dir deleted, another version's) a scan of the notes
    answers, bounded to fit the deadline (``deadline``: the hook's, monotonic). ``seen["local"]``: what
    the in-process view read ("index", "scan" when the index's files are gone, "none" when there is no
    index at all)."""
    from ..reader import Reader

    def local_view(semantic: bool) -> View:
        from ..errors import IndexError_
        from ..search.view import INDEX_NONE, INDEX_OTHER_VERSION, hook_scan_budget, scan_view

        why = INDEX_NONE
        try:
            view = lexical_view(vault, settings)
        except IndexError_:  # built by another version of hive-brain (an upgrade): rebuild it
            view, why = None, INDEX_OTHER_VERSION
        if seen is not None:
            seen["local"] = "none" if view is None else "scan" if view.scan is not None else "index"
        if view is None:
            view = scan_view(vault, settings, why, budget_s=hook_scan_budget(settings))
        if view.scan is not None and deadline is not None:
            # Reading stops a scan budget before the deadline: the best notes' parse, the pack and
            # the process's exit come after it (10k notes under load: 4 of 20 hooks were late without).
            view.scan.until = deadline - hook_scan_budget(settings)
        return view

    return Reader(vault.state, agent=settings.agent_id, use_server=settings.use_server, local_view=local_view,
                  fallback_on_error=True, local_reserve=quick.local_reserve(float(settings.hook_deadline)),
                  auth=settings.auth)


REBUILD_RETRY_S = 600.0


def _request_rebuild(state: Path, vault_root: Path) -> bool:
    """Start `hive-brain rebuild-index` detached, at most once per REBUILD_RETRY_S; True if started."""
    import subprocess
    from pathlib import Path

    from ..store.fsutil import due

    if not due(Path(state) / "hooks" / "rebuild-requested", REBUILD_RETRY_S):
        return False
    try:
        with open(Path(state) / "hooks" / "rebuild.log", "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "hive_brain", "--vault", str(vault_root), "rebuild-index", "--quiet"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
            )
    except OSError:
        return False
    return True


def lexical_view(vault: Vault, settings: Settings) -> View | None:
    """A read-only lexical view of the current generation, or None when nothing is indexed yet
    (:func:`~hive_brain.search.view.open_view` without catch-up: no engine, no writer imports)."""
    from ..search.view import open_view

    return open_view(vault, settings)


def hook_answer(settings: Settings, question: str, *, budget: int | None = None) -> dict:
    """``hive-brain answer --hook``: the prompt hook's answer for a question, within the hook deadline."""
    t0 = time.monotonic()
    deadline = t0 + float(settings.hook_deadline)
    b = int(budget or settings.hook_budget_chars)
    try:
        pack = _deadline_run(
            lambda: answer_for_hook(settings, question, "", budget=b, deadline=deadline), deadline
        )
        if pack.pop("startServer", False):
            pack["serverStarted"] = _start_server(settings)
        return pack
    except _Timeout:
        return {
            "abstained": True,
            "reason": f"no answer within the hook deadline ({settings.hook_deadline:g}s)",
            "context": "",
            "items": [],
            "chars": 0,
            "mode": "timeout",
        }


# ---------------------------------------------------------------------------------------------- session start
def _session_start(settings: Settings, payload: dict, rec: dict, t0: float) -> dict | None:
    deadline = t0 + max(float(settings.hook_deadline) * 2, SESSION_START_MIN_DEADLINE)
    from ..rpc.client import autostart

    try:
        # Warm by default: the session's prompts are answered by the server (hybrid, fast). Started
        # detached and not waited for; while it loads, prompts are answered lexically.
        rec["serverStarted"] = autostart(settings)
    except Exception as e:  # noqa: BLE001 - core memory still goes in; the reason is in hooks status
        rec["serverError"] = _one_line(e)

    def work() -> str:
        from ..engine import Engine
        from ..memory.core import core_text

        engine = Engine.from_settings(settings)
        _mark_session(engine, settings, payload)
        return core_text(engine, settings.agent_id)

    text = _deadline_run(work, deadline)
    rec["mode"] = "core"
    rec["chars"] = len(text or "")
    if not text:
        return None
    name = str(payload.get("hook_event_name") or "SessionStart")
    return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}


def _mark_session(engine: Engine, settings: Settings, payload: dict) -> None:
    """This session runs with this vault's hooks: its server then captures the session's transcript
    if it goes quiet without a stop hook having captured it (memory/conversations.capture_quiet)."""
    from ..memory.conversations import mark_session

    try:
        mark_session(engine.vault.state, settings.agent_id, payload.get("session_id"), payload.get("transcript_path"))
    except OSError:
        pass  # only the server's safety net is missing; the hook's own work goes on


# ---------------------------------------------------------------------------------------------- stop
def _stop(settings: Settings, payload: dict, rec: dict) -> None:
    from ..engine import Engine
    from ..errors import LockTimeout
    from ..memory.conversations import capture, queue_pending

    tp = payload.get("transcript_path")
    if not tp or not isinstance(tp, str):
        rec["mode"] = "no-transcript"
        return
    agent = settings.agent_id
    assert agent is not None  # _settings() derives one from the payload when none is set
    engine = Engine.from_settings(settings)
    _mark_session(engine, settings, payload)
    sid = payload.get("session_id")
    cwd = payload.get("cwd")
    flushed_by = time.monotonic() + STOP_FLUSH_WAIT_S
    try:
        while True:
            res = capture(
                engine,
                tp,
                agent=agent,
                session_id=sid,
                cwd=cwd,
                lock_timeout=min(STOP_LOCK_TIMEOUT, float(settings.lock_timeout)),
                publish=False,
                non_interactive=True,  # `claude -p`, `codex exec`, `gemini -p`: the user's session all the same
            )
            if not res.get("unwritten") or time.monotonic() >= flushed_by:
                break
            time.sleep(STOP_FLUSH_STEP_S)
    except LockTimeout:
        queue_pending(
            engine.vault.state,
            {
                "transcript_path": str(tp),
                "session_id": sid,
                "cwd": cwd,
                "agent": settings.agent_id,
                "queued": _now_iso(),
                "non_interactive": True,
            },
        )
        rec["mode"] = "queued"
        return
    rec["mode"] = res["status"]
    if res.get("path"):
        rec["path"] = res["path"]
    if res.get("reason"):
        rec["reason"] = res["reason"]


# ---------------------------------------------------------------------------------------------- status
_now_iso = quick.now_iso


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    name = type(e).__name__
    return (f"{name}: {msg}" if name not in msg else msg)[:300]


def _status_dir(settings: Settings | None) -> Path:
    if settings is not None:
        return Path(settings.state_dir) / "hooks"
    env = os.environ.get("HIVE_BRAIN_STATE_DIR")
    if env:
        return Path(os.path.expanduser(env)) / "hooks"
    from ..config import _user_data_dir

    return _user_data_dir() / "hooks"


def status_path(state_dir: Path) -> Path:
    return Path(state_dir) / "hooks" / STATUS_FILE


def read_status(state_dir: Path) -> dict:
    try:
        return quick.load_status(str(status_path(state_dir)))
    except (OSError, ValueError):
        return {}


def _record(folder: Path, rec: dict) -> None:
    quick.record(str(folder), rec)
