"""Finished agent conversations → one redacted note each under ``Memory/Conversations/<agent>/``.

Reads Claude Code transcripts (JSONL, one entry per line), Codex rollouts (JSONL, ``session_meta``
/ ``response_item`` envelopes, or the older bare ``message`` lines) and Gemini CLI chats (JSONL: a
``sessionId``/``projectHash`` header, then ``user``/``gemini`` messages and ``$set`` patches). Only the words people read are
kept: user prompts and assistant text. Tool calls, tool results, thinking, system and meta entries
are dropped, and secrets and ``<private>`` spans are redacted before anything is written.

Import-light at module level (the prompt hook reads transcript tails through this module); the
writing side imports the vault machinery lazily.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .ports import EngineLike

if TYPE_CHECKING:
    from ..store.vault import Vault

TAIL_BYTES = 64 * 1024
MAX_TURN_CHARS = 12_000
MAX_NOTE_CHARS = 600_000
TITLE_CHARS = 80
PENDING_FILE = "pending-conversations.jsonl"

# User "messages" that are machinery, not something a person typed.
_MACHINE_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "Caveat: The messages below",
    "[Request interrupted",
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<user-prompt-submit-hook>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "This session is being continued from a previous conversation",
    "<session_context>",
)
# Context an agent's hooks added to the prompt (ours among them): Claude Code's reminders, and what
# Gemini CLI puts around a SessionStart/BeforeAgent hook's additionalContext in the user's message.
_REMINDER = re.compile(r"<system-reminder>[\s\S]*?(?:</system-reminder>|\Z)|<hook_context>[\s\S]*?(?:</hook_context>|\Z)",
                       re.I)
SUBAGENT = "sub-agent transcript"


@dataclass
class Transcript:
    turns: list[tuple[str, str]] = field(default_factory=list)  # (role, text), consecutive roles merged
    session_id: str = ""
    cwd: str = ""
    started: str = ""  # ISO timestamp of the first turn (or "")
    ended: str = ""
    fmt: str = "claude"  # "claude" | "codex" | "gemini" | "cline"
    automation: str | None = None  # why this looks like a non-interactive run


# ---------------------------------------------------------------------------------------------- parsing
def _blocks_text(content: Any, kinds: tuple[str, ...]) -> tuple[str, bool]:
    """(text of the text blocks, whether there were only non-text blocks such as tool results)."""
    if isinstance(content, str):
        return content, False
    if not isinstance(content, list):
        return "", False
    texts, other = [], 0
    for b in content:
        if isinstance(b, str):
            texts.append(b)
        elif isinstance(b, dict) and b.get("type") in kinds and isinstance(b.get("text"), str):
            texts.append(b["text"])
        else:
            other += 1
    return "\n\n".join(t for t in texts if t.strip()), bool(other) and not texts


def _clean_user(text: str) -> str:
    text = _REMINDER.sub("", text).strip()
    if not text or text.startswith(_MACHINE_PREFIXES):
        return ""
    return text


def _gemini_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n\n".join(t for t in parts if t.strip())


def _entry_turn(e: dict) -> tuple[str, str] | None:
    """(role, text) of one transcript line, or None when it carries nothing a person reads."""
    etype = e.get("type")
    if etype in ("user", "gemini") and "message" not in e and "content" in e:  # Gemini CLI
        if etype == "gemini":
            text = _gemini_text(e["content"]).strip()
            return ("assistant", text) if text else None
        text = _clean_user(_gemini_text(e["content"]))
        return ("user", text) if text else None
    # Codex rollout envelope.
    if etype == "response_item" and isinstance(e.get("payload"), dict):
        e = e["payload"]
        etype = e.get("type")
    if etype == "message" and e.get("role") in ("user", "assistant"):  # Codex
        role = e["role"]
        text, _ = _blocks_text(e.get("content"), ("input_text", "output_text", "text"))
        text = _clean_user(text) if role == "user" else text.strip()
        return (role, text) if text else None
    if (
        etype not in ("user", "assistant")
        or e.get("isMeta")
        or e.get("isSidechain")
        or e.get("isCompactSummary")
    ):
        return None
    msg = e.get("message")
    if not isinstance(msg, dict):
        return None
    if etype == "user":
        text, only_other = _blocks_text(msg.get("content"), ("text",))
        if only_other or e.get("toolUseResult") is not None:
            return None
        text = _clean_user(text)
        return ("user", text) if text else None
    text, _ = _blocks_text(msg.get("content"), ("text",))
    text = text.strip()
    return ("assistant", text) if text else None


def _iter_lines(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a torn last line while the agent is still writing
            if isinstance(e, dict):
                yield e


def _flat(entries: Iterable[dict]) -> Iterator[dict]:
    """The entries, with the messages a Gemini CLI ``$set`` patch carries in their place."""
    for e in entries:
        patch = e.get("$set")
        if isinstance(patch, dict):
            for m in patch.get("messages") or []:
                if isinstance(m, dict):
                    yield m
            continue
        yield e


def parse_entries(entries: Iterable[dict]) -> Transcript:
    t = Transcript()
    any_sidechain = any_main = False
    seen_ids: set[str] = set()
    for e in _flat(entries):
        ts = e.get("timestamp")
        if "projectHash" in e and "sessionId" in e:  # Gemini CLI's header line
            t.fmt = "gemini"
            t.session_id = t.session_id or str(e["sessionId"])
            t.started = t.started or str(e.get("startTime") or "")
            if e.get("kind") not in (None, "main"):
                t.automation = SUBAGENT
            continue
        mid = e.get("id")
        if t.fmt == "gemini" and isinstance(mid, str):
            if mid in seen_ids:
                continue  # a message a later patch repeats
            seen_ids.add(mid)
        if e.get("type") == "session_meta" and isinstance(e.get("payload"), dict):
            p = e["payload"]
            t.fmt = "codex"
            t.session_id = t.session_id or str(p.get("id") or "")
            t.cwd = t.cwd or str(p.get("cwd") or "")
            origin = str(p.get("originator") or "")
            if "exec" in origin:
                t.automation = f"non-interactive run (originator {origin})"
            continue
        if e.get("type") in ("response_item", "message", "event_msg", "turn_context"):
            t.fmt = "codex"
        if e.get("sessionId") and not t.session_id:
            t.session_id = str(e["sessionId"])
        if e.get("cwd") and not t.cwd:
            t.cwd = str(e["cwd"])
        ep = str(e.get("entrypoint") or "")
        if ep.startswith("sdk"):
            t.automation = f"non-interactive run (entrypoint {ep})"
        if e.get("type") in ("user", "assistant"):
            if e.get("isSidechain"):
                any_sidechain = True
            else:
                any_main = True
        turn = _entry_turn(e)
        if turn is None:
            continue
        if isinstance(ts, str):
            t.started = t.started or ts
            t.ended = ts
        role, text = turn
        if t.turns and t.turns[-1][0] == role:
            # Claude Code writes one line per content block; one reply is one turn.
            t.turns[-1] = (role, t.turns[-1][1] + "\n\n" + text)
        else:
            t.turns.append((role, text))
    if any_sidechain and not any_main and t.automation is None:
        t.automation = SUBAGENT
    return t


CLINE_HISTORY = "api_conversation_history.json"
_CLINE_NOISE = re.compile(r"<environment_details>[\s\S]*?(?:</environment_details>|\Z)|<thinking>[\s\S]*?(?:</thinking>|\Z)")
_CLINE_WRAP = re.compile(r"^\s*<(task|feedback|answer|user_message)>\s*([\s\S]*?)\s*</\1>\s*$")
_CLINE_TOOL_RESULT = re.compile(r"^\[[^\]\n]{1,200}\] Result:")


def _cline_text(content: Any, role: str) -> str:
    """The words of one Cline message: tool results, environment details and thinking dropped, the
    user's ``<task>``/``<feedback>`` unwrapped, the final answer kept out of ``attempt_completion``."""
    blocks = [content] if isinstance(content, str) else [
        b["text"] for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ] if isinstance(content, list) else []
    out = []
    for text in blocks:
        text = _CLINE_NOISE.sub("", text).strip()
        if not text or _CLINE_TOOL_RESULT.match(text):
            continue
        m = _CLINE_WRAP.match(text)
        if m:
            text = m.group(2)
        if role == "assistant":
            done = re.search(r"<attempt_completion>[\s\S]*?<result>\s*([\s\S]*?)\s*</result>", text)
            text = done.group(1) if done else re.sub(r"<(\w+)>[\s\S]*?</\1>", "", text).strip()
        if text:
            out.append(text)
    return "\n\n".join(out)


def parse_cline(path: Path) -> Transcript:
    """Cline's task history (``tasks/<taskId>/api_conversation_history.json``: the Anthropic messages
    it sent, one JSON array), as the words people read."""
    t = Transcript(fmt="cline", session_id=path.parent.name)
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return t
    for m in data if isinstance(data, list) else []:
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            continue
        role = str(m["role"])
        text = _cline_text(m.get("content"), role)
        text = _clean_user(text) if role == "user" else text
        if not text:
            continue
        if t.turns and t.turns[-1][0] == role:
            t.turns[-1] = (role, t.turns[-1][1] + "\n\n" + text)
        else:
            t.turns.append((role, text))
    return t


# Where Cline keeps ``tasks/<taskId>/api_conversation_history.json``: the CLI's data folder, then the
# VS Code extension's global storage (and the editors built on VS Code), on Linux and macOS.
_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
_EXTENSION = "saoudrizwan.claude-dev"


def cline_task_dirs() -> list[Path]:
    home = Path.home()
    out = [home / ".cline" / "data" / "tasks"]
    for base in (home / ".config", home / "Library" / "Application Support"):
        out += [base / editor / "User" / "globalStorage" / _EXTENSION / "tasks" for editor in _EDITORS]
    return out


def cline_task_history(task_id: str) -> str | None:
    """The task history file of Cline task ``task_id``, or None when none of Cline's folders has it."""
    if not task_id or "/" in task_id or task_id in (".", ".."):
        return None
    for d in cline_task_dirs():
        p = d / task_id / CLINE_HISTORY
        if p.is_file():
            return str(p)
    return None


def parse_transcript(path: str | os.PathLike) -> Transcript:
    p = Path(path)
    if p.name == CLINE_HISTORY:
        return parse_cline(p)
    return parse_entries(_iter_lines(p))


def last_assistant_text(
    path: str | os.PathLike | None, *, max_chars: int = 1500, tail_bytes: int = TAIL_BYTES
) -> str:
    """The last assistant reply in a transcript, read from the file's tail only (cheap on huge files).

    The prompt being answered may or may not be written already; either way the reply before it is
    returned. Only its end is kept (a list the user now refers to is usually there).
    """
    if not path or not isinstance(path, str | os.PathLike):
        return ""  # open(3) would read file descriptor 3: only real paths from the hook JSON
    try:
        with open(os.path.expanduser(path), "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            start = max(0, size - tail_bytes)
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # the first line is cut in the middle
    parts: list[str] = []
    users_seen = 0
    for line in reversed(lines):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if not isinstance(e, dict):
            continue
        turn = _entry_turn(e)
        if turn is None:
            continue
        role, text = turn
        if role == "assistant":
            parts.append(text)
        elif parts:
            break
        else:
            users_seen += 1
            if users_seen >= 2:
                break
    text = "\n".join(reversed(parts)).strip()
    return text[-max_chars:] if len(text) > max_chars else text


# ---------------------------------------------------------------------------------------------- notes
def _short_id(session_id: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]", "", session_id).lower()
    return s[:8] or "session"


def _date_of(ts: str) -> dt.datetime | None:
    if not ts:
        return None
    try:
        d = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return d if d.tzinfo else d.replace(tzinfo=dt.UTC)


def _iso(d: dt.datetime) -> str:
    return d.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _title(first_prompt: str) -> str:
    line = next((ln for ln in first_prompt.splitlines() if ln.strip()), "")
    line = " ".join(line.replace("*", "").replace("`", "").split()).lstrip("#> ").strip()
    if len(line) > TITLE_CHARS:
        line = line[:TITLE_CHARS].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
    return line or "Conversation"


def render_note(
    t: Transcript, *, agent: str, session_id: str, project: str, redact: Callable[[str], tuple[str, int]]
) -> tuple[str, dict, str, int]:
    """(title, frontmatter, body, redactions) for a parsed transcript. Everything is redacted here."""
    turns: list[tuple[str, str]] = []
    n_red = 0
    for role, text in t.turns:
        if len(text) > MAX_TURN_CHARS:
            text = text[:MAX_TURN_CHARS] + "\n\n…(truncated)"
        clean, n = redact(text)
        n_red += n
        turns.append((role, clean.strip()))
    first_user = next((x for r, x in turns if r == "user"), "")
    title = _title(first_user)
    project_clean, n = redact(project)
    n_red += n
    start = _date_of(t.started) or dt.datetime.now(dt.UTC)
    end = _date_of(t.ended) or start
    meta: dict[str, Any] = {
        "type": "conversation",
        "title": title,
        "date": _iso(start),
        "ended": _iso(end),
        "agent": agent,
        "project": project_clean or None,
        "session_id": session_id,
        "turns": sum(1 for r, _ in turns if r == "user"),
        "redactions": n_red or None,
        "source": f"{t.fmt} transcript",
    }
    out = [f"# {title}", ""]
    n_turn = 0
    used = 0
    for role, text in turns:
        if role == "user":
            n_turn += 1
            out += [f"## Turn {n_turn}", ""]
        label = "User" if role == "user" else "Assistant"
        block = f"**{label}:** {text}"
        used += len(block)
        if used > MAX_NOTE_CHARS:
            out += ["…(the rest of this conversation was too long to keep)", ""]
            break
        out += [block, ""]
    return title, meta, "\n".join(out).rstrip() + "\n", n_red


def note_folder(agent: str) -> str:
    from ..store.vault import CONVERSATIONS_DIR

    return f"{CONVERSATIONS_DIR}/{agent}"


def _existing_note(vault: Vault, folder: str, session_id: str) -> str | None:
    """The note already holding this session (found by its session_id, whatever its title became)."""
    from ..store.notes import read_note

    d = vault.root / folder
    if not d.is_dir():
        return None
    for p in sorted(d.glob(f"*-{_short_id(session_id)}.md")):
        rel = f"{folder}/{p.name}"
        try:
            note = read_note(p, rel)
        except Exception:  # noqa: BLE001 - an unreadable note is not ours to rewrite
            continue
        if str(note.meta.get("session_id") or "") == session_id:
            return rel
    return None


def capture(
    engine: EngineLike,
    transcript_path: str | os.PathLike,
    *,
    agent: str,
    session_id: str | None = None,
    cwd: str | None = None,
    lock_timeout: float | None = None,
    publish: bool = True,
    non_interactive: bool = False,
) -> dict:
    """Write (or rewrite) the conversation note of one transcript. Idempotent per session id.

    ``non_interactive``: capture a run like ``claude -p`` / ``codex exec`` too. The session-end hooks
    do (the user installed them for that session, however it was started); a folder import does not,
    where such runs are mostly scripts'. A sub-agent's transcript is never a conversation of its own.

    Returns ``{"status": "captured"|"updated"|"already"|"skipped", "path"?, "reason"?, "unwritten"?, ...}``.
    Raises ``LockTimeout`` when the vault stays locked for ``lock_timeout`` seconds.
    """
    from ..config import validate_agent_id
    from ..store.fsutil import sha256_bytes
    from ..store.notes import render, slugify
    from ..store.secrets import redact
    from ..store.text import clean_text  # a transcript is captured, not authored: cleaned, not refused

    agent = validate_agent_id(agent)
    path = Path(transcript_path)
    if not path.is_file():
        # ``unwritten``: the agent may not have written it yet (a Stop hook looks again: hooks._stop).
        return {"status": "skipped", "reason": f"no transcript at {path}", "transcript": str(path), "unwritten": True}
    t = parse_transcript(path)
    if not t.started:
        # No timestamps (older formats): the file's time keeps a re-capture byte-identical.
        t.started = t.ended = _iso(dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC))
    sid = clean_text(str(session_id or t.session_id or path.stem))
    base = {"transcript": str(path), "session_id": sid}
    if t.automation and (t.automation == SUBAGENT or not non_interactive):
        return {**base, "status": "skipped", "reason": t.automation}
    if not any(r == "user" for r, _ in t.turns):
        return {**base, "status": "skipped", "reason": "no user prompt (automation or empty session)"}
    if not any(r == "assistant" for r, _ in t.turns):
        return {**base, "status": "skipped", "reason": "no assistant reply yet", "unwritten": True}
    t.turns = [(role, clean_text(text)) for role, text in t.turns]
    cwd = clean_text(cwd or t.cwd)
    project = os.path.basename(os.path.normpath(cwd)) if cwd else ""
    title, meta, body, n_red = render_note(t, agent=agent, session_id=sid, project=project, redact=redact)
    text = render(meta, body)
    folder = note_folder(agent)
    vault = engine.vault
    timeout = engine.settings.lock_timeout if lock_timeout is None else lock_timeout
    with engine.memory.transaction("capture conversation", timeout=timeout, publish=publish, refresh=False) as tx:
        rel = _existing_note(vault, folder, sid)
        start = _date_of(t.started) or dt.datetime.now(dt.UTC)
        if rel is None:
            stem = f"{folder}/{start.astimezone().strftime('%Y-%m-%d')} {slugify(title, 50)}"
            rel = f"{stem}-{_short_id(sid)}.md"
            if vault.abs(rel).exists():  # another session with the same id prefix, day and title
                rel = f"{stem}-{re.sub(r'[^A-Za-z0-9]', '', sid).lower()[:32] or 'session'}.md"
            old = None
        else:
            try:
                old = vault.abs(rel).read_bytes()
            except OSError:
                old = None
        if old is not None and old == text.encode("utf-8"):
            return {**base, "status": "already", "path": rel, "turns": meta["turns"]}
        tx.write(rel, text, expect_old=sha256_bytes(old) if old is not None else "")
    return {
        **base,
        "status": "updated" if old is not None else "captured",
        "path": rel,
        "turns": meta["turns"],
        "redactions": n_red,
        "title": title,
    }


# ---------------------------------------------------------------------------------------------- queue
def pending_path(state: Path) -> Path:
    return state / "hooks" / PENDING_FILE


def queue_pending(state: Path, item: dict) -> None:
    """Remember a transcript to capture later (the vault was locked). Paths only, never content."""
    p = pending_path(state)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as f:
        f.write(json.dumps(item, ensure_ascii=False) + "\n")


def read_pending(state: Path) -> list[dict]:
    p = pending_path(state)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out: list[dict] = []
    seen: dict[str, int] = {}
    for ln in lines:
        try:
            item = json.loads(ln)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("transcript_path"):
            key = str(item.get("session_id") or item["transcript_path"])
            if key in seen:
                out[seen[key]] = item  # the latest request for a session wins
            else:
                seen[key] = len(out)
                out.append(item)
    return out


def detect_agent(path: Path) -> str:
    """'codex' for a Codex rollout, 'gemini' for a Gemini CLI chat, 'cline' for a Cline task history,
    else 'claude-code' (looks at the first lines only)."""
    if path.name == CLINE_HISTORY:
        return "cline"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = [f.readline() for _ in range(5)]
    except OSError:
        return "claude-code"
    for ln in head:
        try:
            e = json.loads(ln)
        except ValueError:
            continue
        if isinstance(e, dict) and (
            e.get("type") in ("session_meta", "response_item", "message") or "instructions" in e
        ):
            return "codex"
        if isinstance(e, dict) and "projectHash" in e and "sessionId" in e:
            return "gemini"
    return "claude-code"


def consolidate(
    engine: EngineLike,
    *,
    from_dir: Path | None = None,
    agent: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict:
    """Capture older transcripts from a folder plus the queued ones; one index catch-up at the end."""
    from ..errors import HiveBrainError, LockTimeout
    from ..store.fsutil import atomic_write_text

    state = engine.vault.state
    jobs: list[dict] = []
    queued = read_pending(state)
    for item in queued:
        jobs.append({**item, "queued": True})
    if from_dir is not None:
        root = Path(from_dir).expanduser()
        files = sorted(
            [*root.rglob("*.jsonl"), *root.rglob(CLINE_HISTORY)], key=lambda p: (p.stat().st_mtime, str(p))
        )
        for p in files:
            jobs.append({"transcript_path": str(p)})
    counts = {"captured": 0, "updated": 0, "already": 0, "skipped": 0, "failed": 0}
    results: list[dict] = []
    still_pending: list[dict] = []
    written: list[str] = []
    for i, job in enumerate(jobs):
        tp = Path(job["transcript_path"])
        who = agent or job.get("agent") or engine.settings.agent_id or detect_agent(tp)
        if progress:
            progress(i, len(jobs), tp.name)
        try:
            res = capture(
                engine, tp, agent=who, session_id=job.get("session_id"), cwd=job.get("cwd"), publish=False,
                non_interactive=bool(job.get("non_interactive")),
            )
        except LockTimeout as e:
            res = {"status": "failed", "transcript": str(tp), "reason": str(e)}
            if job.get("queued"):
                still_pending.append({k: v for k, v in job.items() if k != "queued"})
        except (HiveBrainError, OSError, ValueError) as e:
            res = {"status": "failed", "transcript": str(tp), "reason": str(e)}
        counts[res["status"]] += 1
        if res["status"] in ("captured", "updated"):
            written.append(res["path"])
        results.append(res)
    if progress:
        progress(len(jobs), len(jobs), "")
    if queued:
        p = pending_path(state)
        if still_pending:
            atomic_write_text(p, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in still_pending))
        else:
            p.unlink(missing_ok=True)
    index_error = None
    if written:
        from ..store.journal import write_session

        try:
            with write_session(engine.vault, timeout=engine.settings.lock_timeout, command="consolidate"):
                engine.indexer.catch_up(label=f"consolidate: {len(written)} conversations")
        except HiveBrainError as e:  # the notes are safe; the next read catches the index up
            index_error = str(e)
    return {
        **counts,
        "pendingProcessed": len(queued),
        "pendingLeft": len(still_pending),
        "total": len(jobs),
        "results": results,
        "indexError": index_error,
    }


# ---------------------------------------------------------------------------------------------- evidence
MAX_EXCERPT_CHARS = 1_000
_TURN_HEADING = re.compile(r"^## Turn (\d+)\s*$", re.M)


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def _note_turns(body: str) -> list[tuple[int, str]]:
    """(turn number, text) of a conversation note's ``## Turn N`` sections (:func:`render_note`)."""
    parts = _TURN_HEADING.split(body)
    return [(int(parts[i]), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]


def _transcript_turns(t: Transcript) -> list[tuple[int, str]]:
    """The same numbering for a transcript: a turn is a user prompt and the replies after it."""
    out: list[tuple[int, list[str]]] = []
    for role, text in t.turns:
        if role == "user" or not out:
            out.append((len(out) + 1, []))
        out[-1][1].append(f"**{'User' if role == 'user' else 'Assistant'}:** {text}")
    return [(n, "\n\n".join(blocks)) for n, blocks in out]


def conversation_evidence(vault: Vault, *, agent: str | None, conversation: str, excerpt: str | None = None,
                          turn: int | None = None) -> dict[str, Any]:
    """Where a memory an agent proposes was learned, for the reviewer: the conversation (its note in
    the vault when it was captured, the transcript, the session id), the turn and the words quoted.

    ``conversation``: a transcript file, a conversation note's vault path, or a session id this agent's
    captured conversations hold. ``excerpt`` must be in the conversation (case and spacing aside: a
    quote that is not there is refused, so what a reviewer reads is what was said); without it, the
    ``turn``'s own text is quoted. Everything quoted is redacted as a captured conversation is.
    """
    from ..errors import UsageError
    from ..store.notes import read_note
    from ..store.secrets import redact
    from ..store.vault import CONVERSATIONS_DIR

    conversation = conversation.strip()
    if not conversation:
        raise UsageError("the conversation is empty", hint="a transcript file, a conversation note or a session id")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
        raise UsageError(f"the turn must be a whole number of at least 1, not {turn!r}")
    note_rel = transcript = None
    sid = ""
    path = Path(conversation).expanduser()
    rel = conversation.replace("\\", "/")
    if rel.startswith(CONVERSATIONS_DIR + "/") and rel.endswith(".md") and ".." not in rel.split("/"):
        if not vault.abs(rel).is_file():
            raise UsageError(f"no conversation note at {rel}")
        note = read_note(vault.abs(rel), rel, scrub=True)
        note_rel, sid = rel, str(note.meta.get("session_id") or "")
        turns = _note_turns(note.body)
    elif path.is_file():
        t = parse_transcript(path)
        if not t.turns:
            raise UsageError(f"{path} holds no conversation turns", hint="give an agent's transcript (JSONL)")
        transcript = str(path.resolve())
        sid = t.session_id or path.stem
        note_rel = _existing_note(vault, note_folder(agent), sid) if agent else None
        turns = _transcript_turns(t)
    else:
        sid = conversation
        note_rel = _existing_note(vault, note_folder(agent), sid) if agent else None
        if note_rel is None:
            raise UsageError(f"no captured conversation with session id {sid!r}" + (f" for agent {agent!r}" if agent else ""),
                             hint="give the transcript file or the conversation note's path instead")
        turns = _note_turns(read_note(vault.abs(note_rel), note_rel, scrub=True).body)
    if turn is not None and turn not in {n for n, _ in turns}:
        raise UsageError(f"the conversation has no turn {turn} (it has {len(turns)})")
    quote = None
    if excerpt is not None and excerpt.strip():
        want = _squash(excerpt)
        found = next((n for n, text in turns if (turn is None or n == turn) and want in _squash(text)), None)
        if found is None:
            where = f"turn {turn} of that conversation" if turn is not None else "that conversation"
            raise UsageError(f"the excerpt is not in {where}", hint="quote the conversation's own words")
        turn, quote = found, " ".join(excerpt.split())
    elif turn is not None:
        quote = next(text for n, text in turns if n == turn)
    if quote is not None:
        quote, _n = redact(quote[:MAX_EXCERPT_CHARS] + ("…" if len(quote) > MAX_EXCERPT_CHARS else ""))
    return {"conversation": note_rel, "session_id": sid or None, "transcript": transcript, "turn": turn,
            "excerpt": quote}


# ---------------------------------------------------------------------------------------------- quiet transcripts
# The server's safety net for a session whose end-of-session hook never ran or was killed (`/exit`
# during Claude Code's Stop hook, a Cline with hooks off, a hook that timed out): a transcript file
# untouched for ``transcript_quiet`` is captured once, as the hook would have (the same note, found
# by the session id). Only for the sessions whose hooks ran against this vault (a session-start or
# stop hook leaves a mark in its state dir): marking the agent alone made a vault take every session
# of that agent on the machine, other projects' and other vaults' included. And only files written in
# the last TRANSCRIPT_LOOKBACK_S: older history is for `consolidate --from-dir`, never imported behind
# the user's back.
TRANSCRIPT_LOOKBACK_S = 86400.0
SEEN_FILE = "transcripts-seen.json"  # <vault state>/hooks/: path -> [mtime_ns, size] already handled
SESSIONS_DIR = "sessions"  # <vault state>/hooks/sessions/<agent>/<hash of the session id>: {session, transcript}


def transcript_folders(agent: str) -> list[tuple[Path, str]]:
    """(folder, glob pattern) of the transcripts ``agent`` writes on this machine; [] for one that
    writes none we can read (Cursor) or that hive-brain does not know."""
    home = Path.home()
    if agent == "claude-code":
        return [(home / ".claude" / "projects", "*/*.jsonl")]  # <project>/<session>.jsonl; sub-agents deeper
    if agent == "codex":
        codex_home = Path(os.environ.get("CODEX_HOME") or home / ".codex").expanduser()
        return [(codex_home / "sessions", "**/rollout-*.jsonl")]
    if agent == "gemini":
        return [(home / ".gemini" / "tmp", "*/chats/*.jsonl")]
    if agent == "cline":
        return [(d, f"*/{CLINE_HISTORY}") for d in cline_task_dirs()]
    return []


def mark_session(state: Path, agent: str | None, session_id: Any, transcript_path: Any = None) -> None:
    """Note that ``agent``'s session ``session_id`` (transcript at ``transcript_path`` when the hook
    was told) runs with this vault's hooks: written once per session, then only looked at."""
    import hashlib

    from ..store.fsutil import atomic_write_text

    sid = str(session_id or "").strip()
    if not agent or not sid:
        return
    p = state / "hooks" / SESSIONS_DIR / agent / hashlib.sha256(sid.encode("utf-8")).hexdigest()[:24]
    if not p.exists():
        tp = transcript_path if isinstance(transcript_path, str) else ""
        atomic_write_text(p, json.dumps({"session": sid, "transcript": tp}, ensure_ascii=False), durable=False)


def hooked_sessions(state: Path, *, now: float, keep_s: float = TRANSCRIPT_LOOKBACK_S) -> dict[str, tuple[set[str], set[str]]]:
    """agent -> (session ids, transcript paths) of the sessions whose hooks ran against the vault of
    ``state`` in the last ``keep_s`` seconds; older marks are removed (their transcripts are out of
    the scan's reach by age anyway)."""
    from ..config import validate_agent_id
    from ..errors import InvalidAgentId

    out: dict[str, tuple[set[str], set[str]]] = {}
    root = state / "hooks" / SESSIONS_DIR
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            agent = validate_agent_id(d.name)
        except InvalidAgentId:
            continue
        ids: set[str] = set()
        paths: set[str] = set()
        for m in d.iterdir():
            try:
                if now - m.stat().st_mtime > keep_s:
                    m.unlink()
                    continue
                rec = json.loads(m.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(rec, dict) and isinstance(rec.get("session"), str):
                ids.add(rec["session"])
                if isinstance(rec.get("transcript"), str) and rec["transcript"]:
                    paths.add(rec["transcript"])
        if ids:
            out[agent] = (ids, paths)
    return out


def _of_session(p: Path, ids: set[str], paths: set[str]) -> bool:
    """Whether transcript ``p`` is one of these sessions': named by its hook, or named after the session
    as the agents name them (Claude Code ``<id>.jsonl``, Codex ``rollout-<time>-<id>.jsonl``, Cline
    ``<task id>/...``)."""
    if str(p) in paths or p.stem in ids or p.parent.name in ids:
        return True
    return any(len(i) >= 8 and p.stem.endswith(i) for i in ids)


def capture_quiet(engine: EngineLike, *, quiet_s: float, now: float | None = None,
                  lock_timeout: float = 0.5) -> dict:
    """Capture every transcript of an installed agent that has been quiet for ``quiet_s`` seconds and
    changed since it was last handled. A vault busy past ``lock_timeout`` leaves the file for the next
    scan. Returns the counts and the notes written (their index catch-up is the caller's)."""
    import time

    from ..errors import HiveBrainError, LockTimeout
    from ..store.fsutil import atomic_write_text

    now = time.time() if now is None else now
    state = engine.vault.state
    seen_path = state / "hooks" / SEEN_FILE
    try:
        seen = json.loads(seen_path.read_text(encoding="utf-8"))
        seen = seen if isinstance(seen, dict) else {}
    except (OSError, ValueError):
        seen = {}
    kept: dict[str, list[int]] = {}
    counts = {"captured": 0, "updated": 0, "already": 0, "skipped": 0, "failed": 0, "busy": 0}
    written: list[str] = []
    for agent, (ids, paths) in hooked_sessions(state, now=now).items():
        for folder, pattern in transcript_folders(agent):
            if not folder.is_dir():
                continue
            for p in folder.glob(pattern):
                try:
                    st = p.stat()
                except OSError:
                    continue
                age = now - st.st_mtime
                if age > TRANSCRIPT_LOOKBACK_S:
                    continue  # dropped from the seen list too: it stays out by its age
                sig = [st.st_mtime_ns, st.st_size]
                key = str(p)
                if seen.get(key) == sig:
                    kept[key] = sig
                    continue
                if age < quiet_s:
                    continue  # the session may still be going on
                if not _of_session(p, ids, paths):
                    continue  # another project's or another vault's session: not ours to take
                try:
                    res = capture(engine, p, agent=agent, lock_timeout=lock_timeout, publish=False)
                except LockTimeout:
                    counts["busy"] += 1
                    continue
                except (HiveBrainError, OSError, ValueError):
                    res = {"status": "failed"}  # not retried until the file changes
                counts[res["status"]] += 1
                if res.get("path") and res["status"] in ("captured", "updated"):
                    written.append(res["path"])
                kept[key] = sig
    if kept != seen:
        atomic_write_text(seen_path, json.dumps(kept, ensure_ascii=False))
    return {**counts, "written": written}
