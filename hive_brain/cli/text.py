"""What the everyday commands print for people, without click or rich: the full CLI renders these lines
with rich (styles as markup), the thin client (:mod:`.thin`) prints them plain. One set of lines, so
the two paths cannot drift apart."""

from __future__ import annotations

TYPE_CHECKING = False  # typing for the type checker only: the thin client imports this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Style = Callable[[str, str], str]
    Escape = Callable[[str], str]


NO_CORE = "The vault holds no core memory yet (edit Memory/Core Memory.md)."


def count(n: float) -> str:
    """2002 -> "2,002": counts as a person reads them (JSON keeps the number)."""
    return f"{n:,}" if isinstance(n, int) else f"{n:,.1f}"


def split_tags(value: str | None) -> list[str] | None:
    """``--tags a, b`` -> ["a", "b"]; None when the option was not given."""
    if value is None:
        return None
    return [t.strip() for t in value.split(",") if t.strip()]


def evolve_names(aliases: str | None, questions: Any) -> dict[str, list[str]]:
    """``evolve``'s --aliases/--question as write arguments: only those given (the rest carry over)."""
    out: dict[str, list[str]] = {}
    if aliases is not None:
        out["aliases"] = split_tags(aliases) or []
    if questions:
        out["questions"] = list(questions)
    return out


def rich_style(style: str, text: str) -> str:
    return f"[{style}]{text}[/]"


def no_style(_style: str, text: str) -> str:
    return text


def markup_escape(text: str) -> str:
    """Text shown as written inside rich markup: a ``[`` that could open a tag is preceded by a
    backslash (backslashes just before it doubled), as ``rich.markup.escape`` does."""
    if "[" not in text and not text.endswith("\\"):
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" or ch == "[":
            j = i
            while j < n and text[j] == "\\":
                j += 1
            slashes = text[i:j]
            if j < n and text[j] == "[" and _opens_tag(text, j):
                out.append(slashes * 2 + "\\[")
                i = j + 1
                continue
            out.append(slashes or ch)
            i = j if slashes else i + 1
            continue
        out.append(ch)
        i += 1
    s = "".join(out)
    return s + "\\" if s.endswith("\\") and not s.endswith("\\\\") else s


def _opens_tag(text: str, at: int) -> bool:
    """``[`` at ``at`` starts something rich would read as a tag: ``[`` + [a-z#/@] ... ``]`` with no ``[`` between."""
    if at + 1 >= len(text) or not (text[at + 1] in "#/@" or "a" <= text[at + 1] <= "z"):
        return False
    close, reopen = text.find("]", at + 1), text.find("[", at + 1)
    return close != -1 and (reopen == -1 or close < reopen)


def no_escape(text: str) -> str:
    return text


def _day_of(ts: Any) -> str:
    import time

    try:
        return time.strftime("%Y-%m-%d", time.gmtime(int(ts))) if ts else ""
    except (TypeError, ValueError, OverflowError):
        return ""


def recall_lines(res: dict, style: Style = no_style, esc: Escape = no_escape) -> list[str]:
    """A recall result as people read it (warnings, hits with their passage, one summary line)."""
    lines = [f"{style('yellow', 'warning:')} {esc(w)}" for w in res.get("warnings") or []]
    if res.get("serverStarted"):
        lines.append(style("dim", "started the hive-brain server in the background: the next question is answered warm"))
    if res.get("abstained"):
        lines.append(f"Nothing relevant found ({esc(res.get('reason') or '')}).")
        return lines
    for i, h in enumerate(res["hits"], 1):
        tag = style("dim", str(h.get("type") or h.get("kind")))
        status = "" if h.get("status") in (None, "active") else " " + style("red", str(h["status"]))
        day = f"  {_day_of(h['date'])}" if h.get("date") else ""
        lines.append(f"{style('bold', f'{i}. ' + esc(h['title']))} {tag}{status}  "
                     + style("dim", f"{esc(h['path'])}{day}  score {h['score']:.3f}"))
        lines.append("   " + esc(h["passage"]["text"][:400]).replace("\n", "\n   "))
        if h.get("evolutionChain"):
            lines.append("   " + style("dim", f"supersedes: {', '.join(x['id'] for x in h['evolutionChain'])}"))
        if h.get("idConflict"):
            copies = ", ".join(h["idConflict"]["copies"])
            lines.append(f"   {style('yellow', 'sync conflict:')} the same memory is also in {esc(copies)} "
                         "(see `hive-brain repair-conflicts`)")
    sem = "hybrid" if res.get("semantic") else f"lexical ({res.get('semanticOff') or 'semantic off'})"
    gen = f"generation {res.get('generation')}"
    if res.get("mode") == "scan":  # no index: the warning above says why and how to rebuild it
        sem, gen = f"scan of the notes ({(res.get('scan') or {}).get('engine') or 'python'})", "no index"
    lines.append(style("dim", f"{len(res['hits'])} hits · {res.get('tier')} · {sem} · {gen} · "
                              f"{res['timing']['totalMs']:.0f} ms"))
    return lines


def evidence_arg(conversation: str | None, excerpt: str | None, turn: int | None) -> dict:
    """``remember``'s ``--from-conversation/--excerpt/--turn`` as the record's ``evidence`` field."""
    if conversation is None:
        if excerpt is not None or turn is not None:
            from ..errors import UsageError

            raise UsageError("--excerpt and --turn quote a conversation", hint="name it with --from-conversation")
        return {}
    import os

    # A transcript named relative to here: the server that may do this write has another cwd.
    if not conversation.startswith("Memory/Conversations/") and os.path.isfile(os.path.expanduser(conversation)):
        conversation = os.path.abspath(os.path.expanduser(conversation))
    return {"evidence": {"conversation": conversation, "excerpt": excerpt, "turn": turn}}


def remember_line(res: dict, where: Callable[[str], str]) -> str:
    """``where``: a note's absolute path from its vault-relative one (which vault a write landed in must
    be plain from its output; JSON keeps the relative path)."""
    if res.get("status") == "proposed":
        return f"Queued for Brain Review: {res['proposal']} ({where(res['path'])})"
    return f"Remembered {res['id']} → {where(res['path'])}"


def evolve_line(res: dict, where: Callable[[str], str]) -> str:
    return f"Evolved {res['supersedes']} → {res['id']} ({where(res['path'])})"


def pending_line(res: dict) -> str:
    """A write kept because the vault was busy: what the command would say of a finished one does not apply yet."""
    return f"Pending {res['id']}: {res.get('message', 'the vault is busy')}"


def update_line(res: dict, where: Callable[[str], str]) -> str:
    return f"Updated {res['id']} ({where(res['path'])})"


def answer_lines(res: dict, esc: Escape = no_escape) -> list[str]:
    """``answer``'s context pack as printed (the pack itself is printed as written, never as markup:
    the full CLI echoes it)."""
    if res["abstained"]:
        return [f"No grounded answer: {esc(str(res.get('reason')))}"]
    return []


def get_lines(res: dict, style: Style = no_style, esc: Escape = no_escape) -> list[str]:
    """One memory as ``get`` shows it: its title, id, type and status (the chain's verdict: an old
    version says superseded even though its own frontmatter still says what it said when written)."""
    m = res["meta"]
    status = res.get("status") or m.get("status")
    lines = [f"{style('bold', esc(str(m.get('title'))))}  ({res['id']}, {esc(str(m.get('type')))}, {status})",
             esc(res["path"]), "", esc(res["content"])]
    if len(res["chain"]) > 1:
        lines += ["", "chain: " + " → ".join(f"{x['id']} ({x['status']})" for x in res["chain"])]
    return lines


def pending_write_line(w: dict) -> str:
    """A write kept because the vault was busy (queued) or refused when applied later (failed)."""
    what = f" {w['what']}" if w.get("what") else ""
    err = f": {w['error']}" if w.get("error") else ""
    return f"pending write {w['id']} ({w['state']}): {w['op']}{what}{err}"


def damaged_line(d: dict, style: Style = no_style, esc: Escape = no_escape) -> str:
    if d["movedTo"].startswith("journal/"):
        return (f"{style('yellow', 'damaged:')} journal record {esc(d['file'])} could not be trusted: neither applied "
                f"nor undone; it and its files are kept in {esc(d['movedTo'])} (look at them, then delete them)")
    return (f"{style('yellow', 'damaged:')} {esc(d['file'])} was moved aside as {esc(d['movedTo'])} and "
            f"{esc(d.get('fate') or 'rebuilt from the notes')} (delete it once you no longer need it)")


def status_lines(res: dict, style: Style = no_style, esc: Escape = no_escape) -> list[str]:
    """``hive-brain status`` as people read it."""
    s, srv = res["semantic"], res["server"]
    unreadable = (f", {count(res['unreadableNotes'])} unreadable (see `hive-brain doctor`)"
                  if res["unreadableNotes"] else "")
    semantic = (f"on ({count(s['pendingPassages'])} passages pending)" if s["on"] else f"off: {s['howToEnable']}")
    lines = [f"vault      {esc(res['vault'])} (id {res['vaultId']})", f"state      {esc(res['stateDir'])}",
             f"notes      {count(res['notes'])} ({count(res['memories'])} typed memories), "
             f"{count(res['staleNotes'])} not yet indexed{unreadable}",
             f"generation {res['generation']}", f"semantic   {semantic}",
             f"server     {'running, pid ' + str(srv.get('pid')) if srv.get('running') else 'not running'}"]
    lines += [esc(pending_write_line(w)) for w in res["pendingWrites"]]
    lines += [damaged_line(d, style, esc) for d in res["damaged"]]
    lines += [f"{style('yellow', 'warning:')} {esc(w)}" for w in res["warnings"]]
    return lines
