"""CLI commands for agent integration: hooks install/uninstall/status, hook, core, consolidate, mcp.

Registered explicitly by :mod:`.app`; heavy modules are imported
inside the commands.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import UsageError
from .base import State, command, out
from .text import NO_CORE


# ---------------------------------------------------------------------------------------------- hooks
@click.group("hooks")
def hooks_group() -> None:
    """Install, remove and inspect the agent integrations (Claude Code, Codex, Cursor, Gemini CLI, Cline, AGENTS.md)."""


# Kept in step with agents.install.AGENTS (a test checks), which the CLI must not import at load time.
AGENT_CHOICES = ("claude-code", "codex", "cursor", "gemini", "cline", "agents-md")


def _agent_opt(fn: Any) -> Any:
    return click.option(
        "--agent",
        "agent_kind",
        type=click.Choice(AGENT_CHOICES),
        default="claude-code",
        show_default=True,
        help="Which agent to integrate with.",
    )(fn)


def _where_opt(fn: Any) -> Any:
    fn = click.option(
        "--path",
        "path",
        type=click.Path(path_type=Path),
        default=None,
        help="agents-md: the project folder (its AGENTS.md) or an instructions file; default ./AGENTS.md.",
    )(fn)
    return click.option(
        "--project/--user",
        "project",
        default=False,
        help="Claude Code, Cursor, Gemini CLI, Cline: this project's settings (.claude/, .cursor/, .gemini/, "
        ".clinerules/hooks/), "
        "or the user's in your home folder (default).",
    )(fn)


def _print_change(c: Any, res: dict) -> None:
    from rich.markup import escape

    verb = "Would change" if res.get("dryRun") else "Changed"
    for f in res.get("files") or [res]:
        if not f["changed"]:
            c.print(
                f"Nothing to change in {escape(f['file'])} "
                f"(already {'installed' if res['action'] == 'install' else 'removed'})."
            )
        else:
            c.print(
                f"{verb} {escape(f['file'])}"
                + (f" (backup: {escape(f['backup'])})" if f.get("backup") else "")
            )
            if res.get("dryRun") and f.get("diff"):
                sys.stdout.write(f["diff"])
                sys.stdout.flush()
    if res["action"] == "install":
        if res.get("vault"):
            c.print(f"Vault pinned in the hook command: {escape(res['vault'])}")
        for k in ("note", "hint"):
            if res.get(k):
                c.print(f"[dim]{escape(res[k])}[/]")


@command("install", group=hooks_group)
@_agent_opt
@_where_opt
@click.option("--dry-run", is_flag=True, help="Print the diff of the settings file; write nothing.")
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=60.0, show_default=True, metavar="SECONDS",
              help="Wait this long for the server, so the first session's prompts get hybrid memory (0: do not wait).")
def hooks_install_cmd(
    state: State, agent_kind: str, project: bool, path: Path | None, dry_run: bool, wait_s: float, as_json: bool
) -> None:
    """Add hive-brain to an agent's settings (idempotent; the file is backed up first).

    Claude Code and Codex get three hooks (prompt → memory, session start → core memory, stop →
    conversation note), Codex also the MCP server and its hooks' trust; Gemini CLI the same three
    (BeforeAgent, SessionStart, AfterAgent) plus the MCP server; Cursor the session-start hook (core
    memory) plus the MCP server; Cline UserPromptSubmit and TaskStart hook scripts; agents-md a block
    in AGENTS.md that tells any agent reading it to recall and remember with hive-brain. Then it
    starts the server and waits for it (--wait), so the first session gets hybrid memory, or says
    that the first prompts will be lexical. See docs/agents.md.

    \b
    Example:
      hive-brain hooks install --dry-run
      hive-brain hooks install --agent claude-code --project
      hive-brain hooks install --agent cursor
      hive-brain hooks install --agent gemini
      hive-brain hooks install --agent cline --project
      hive-brain hooks install --agent agents-md --path ~/code/webapp
    """
    from ..agents import install as hooks_install

    settings = state.settings()
    res = hooks_install.install(settings, agent=agent_kind, project=project, dry_run=dry_run, path=path)
    if not dry_run and agent_kind != "agents-md":
        # The hooks answer from the warm server; without one, prompts get lexical recall only.
        spin = not as_json and sys.stderr.isatty() and wait_s > 0
        if spin:
            from .base import _console

            with _console(stderr=True).status(f"waiting for the hive-brain server (at most {wait_s:g}s)..."):
                res.update(hooks_install.server_for_hooks(settings, wait_s))
        else:
            res.update(hooks_install.server_for_hooks(settings, wait_s))

    def human(c: Any) -> None:
        _print_change(c, res)
        if res.get("serverStarted"):
            c.print("started the hive-brain server in the background (turn off with `autostart = false` in the config)")
        if res.get("serverReady"):
            c.print("the server is ready: prompts get hybrid memory from the first one")
        elif res.get("serverNote"):
            from rich.markup import escape

            c.print(f"[yellow]{escape(res['serverNote'])}[/]")

    out(as_json, res, human)


@command("uninstall", group=hooks_group)
@_agent_opt
@_where_opt
@click.option("--dry-run", is_flag=True, help="Print the diff of the settings file; write nothing.")
def hooks_uninstall_cmd(
    state: State, agent_kind: str, project: bool, path: Path | None, dry_run: bool, as_json: bool
) -> None:
    """Remove hive-brain's entries from an agent's settings (other hooks are kept; backed up first).

    \b
    Example:
      hive-brain hooks uninstall
      hive-brain hooks uninstall --agent codex --dry-run
      hive-brain hooks uninstall --agent agents-md --path ~/code/webapp
    """
    from ..agents import install as hooks_install

    res = hooks_install.uninstall(agent=agent_kind, project=project, dry_run=dry_run, path=path)
    out(as_json, res, lambda c: _print_change(c, res))


@command("status", group=hooks_group)
def hooks_status_cmd(state: State, as_json: bool) -> None:
    """Show where the integrations are installed, which vault each uses, the last hook runs and the last error.

    The vault is the one pinned in the hook command (HIVE_BRAIN_VAULT=...), else the one in the config
    file; a vault that does not exist is flagged (that hook fails on every run).

    \b
    Example:
      hive-brain hooks status
    """
    from ..agents import install as hooks_install

    res = hooks_install.status(state.settings(identify=False))
    res["vaults"] = hooks_install.installed_vaults(res)

    def human(c: Any) -> None:
        from rich.markup import escape

        from ..agents.settingsfile import describe_vault

        for key, name in (("claudeCode", "Claude Code"), ("cursor", "Cursor"), ("gemini", "Gemini CLI"), ("cline", "Cline")):
            for where in ("user", "project"):
                e = res[key][where]
                parts = list(e["events"])
                if (e.get("mcp") or {}).get("installed"):
                    parts.append("MCP server")
                c.print(f"{name} ({where}) {escape(e['file'])}: {escape(e.get('error') or ', '.join(parts) or 'not installed')}")
        cx = res["codex"]
        c.print(
            f"Codex {escape(cx['file'])}: "
            + escape(cx.get("error") or ("MCP server installed" if cx["mcpServer"] else "not installed"))
        )
        am = res["agentsMd"]
        c.print(f"AGENTS.md {escape(am['file'])}: {escape(am.get('error') or ('block installed' if am['installed'] else 'not installed'))}")
        for v in res["vaults"]:
            line = f"{v['agent']} ({v['where']}) uses {describe_vault(v['vault'])}"
            c.print(escape(line) if v["vault"]["exists"] else f"[red]{escape(line)}[/]")
        last = res["last"]
        if not last:
            c.print("No hook has run yet.")
        for ev, r in sorted(last.items()):
            ok = "ok" if r.get("ok") else "[red]error[/]"
            server = f" (server {r['serverMs']} ms)" if r.get("serverMs") is not None else ""
            started = "  started the server" if r.get("serverStarted") else ""
            c.print(f"last {ev:<13} {r.get('time')}  {ok}  {r.get('mode') or ''}  {r.get('durationMs')} ms{server}{started}")
        rc = res["recent"]
        c.print(
            f"recent: {rc['runs']} runs, {rc['errors']} errors, {rc['timeouts']} timeouts"
            + (f", prompt median {rc['promptMedianMs']} ms" if rc["promptMedianMs"] is not None else "")
        )
        if res.get("pendingConversations"):
            c.print(
                f"{res['pendingConversations']} conversations queued (the vault was busy): "
                "run `hive-brain consolidate`"
            )
        if res["lastError"]:
            e = res["lastError"]
            c.print(f"[red]last error[/] ({e.get('time')}, {e.get('event')}): {escape(str(e.get('error')))}")

    out(as_json, res, human)


# ---------------------------------------------------------------------------------------------- hook
@click.group("hook")
def hook_group() -> None:
    """Run one agent hook: reads the agent's hook JSON on stdin (agents call this, not people)."""


def _hook_cmd(event: str, what: str) -> None:
    def run(state: State, fmt: str) -> None:
        # Normally dispatched before click (see __main__); here only when global flags came first.
        if state.vault_flag:
            os.environ["HIVE_BRAIN_VAULT"] = state.vault_flag
        if state.agent_flag:
            os.environ["HIVE_AGENT_ID"] = state.agent_flag
        from ..agents.hooks import dispatch

        sys.exit(dispatch(event, ["--format", fmt]))

    run.__doc__ = f"""{what}

    \b
    Example:
      echo '{{"session_id": "abc", "transcript_path": "/path/t.jsonl", "prompt": "deploy it"}}' \\
          | HIVE_AGENT_ID=claude-code hive-brain hook {event}
    """
    fmt_opt = click.option(
        "--format", "fmt", type=click.Choice(["claude", "cursor", "cline"]), default="claude", show_default=True,
        help="Input and answer envelope: claude (hookSpecificOutput; Claude Code, Codex, Gemini CLI), cursor or cline.",
    )
    command(event, group=hook_group, with_json=False)(fmt_opt(run))


_hook_cmd(
    "prompt",
    "UserPromptSubmit: print memory relevant to the prompt as extra context (read-only, 1.5 s deadline).",
)
_hook_cmd(
    "session-start", "SessionStart: print the core memory (Core Memory notes, user rules, agent lessons)."
)
_hook_cmd("stop", "Stop: save the conversation so far as one redacted note (queued if the vault is busy).")
_hook_cmd("session-end", "SessionEnd: same as stop — save the finished conversation as a redacted note.")


# ---------------------------------------------------------------------------------------------- core
@command("core")
@click.option(
    "--agent",
    "agent_id",
    default=None,
    metavar="ID",
    help="Agent whose core note and lessons to add (default: --agent / $HIVE_AGENT_ID).",
)
@click.option(
    "--budget", type=click.IntRange(200, 100_000), default=6000, show_default=True, help="Character budget."
)
def core_cmd(state: State, agent_id: str | None, budget: int, as_json: bool) -> None:
    """Show the core memory an agent session starts with.

    Core Memory notes, the user's instructions, preferences and decisions, and the agent's own
    lessons, de-duplicated, most important first, under a budget.

    \b
    Example:
      hive-brain core --agent claude-code --budget 4000
    """
    from ..memory.core import core_pack

    eng = State(state.vault_flag, agent_id or state.agent_flag, state.owner_key_flag).engine()
    res = core_pack(eng, eng.settings.agent_id, budget)
    def human(c: Any) -> None:
        click.echo(res["text"] or NO_CORE)
        for w in res["warnings"]:
            click.echo(f"warning: {w}", err=True)

    out(as_json, res, human)


# ---------------------------------------------------------------------------------------------- consolidate
@command("consolidate")
@click.option(
    "--from-dir",
    "from_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Also capture every transcript (*.jsonl, recursively) under this folder.",
)
@click.option(
    "--agent",
    "agent_id",
    default=None,
    metavar="ID",
    help="Agent the conversations belong to (default: detected per transcript).",
)
@click.option("--apply-rollups", "rollups", is_flag=True,
              help="Replace each long run of one-note-per-run memories with one summary note (dry run "
              "without --confirm).")
@click.option("--propose-promotions", "promotions", is_flag=True,
              help="Run the promotion pass: Brain Review proposals from near-duplicate private memories "
              "of several agents and from lessons answers keep using (dry run without --confirm).")
@click.option("--confirm", is_flag=True, help="Do what --apply-rollups / --propose-promotions showed.")
@click.option("--min-run", type=click.IntRange(2, None), default=10, show_default=True,
              help="Notes a run needs before it is rolled up.")
@click.option("--prefix", default=None, metavar="KEY_PREFIX",
              help="Roll up the notes whose memory key starts with this, instead of finding runs.")
def consolidate_cmd(state: State, from_dir: Path | None, agent_id: str | None, rollups: bool, promotions: bool,
                    confirm: bool, min_run: int, prefix: str | None, as_json: bool) -> None:
    """Capture conversations; roll up long runs of per-run notes; propose promotions.

    Without --apply-rollups / --propose-promotions: capture the conversations the stop hook queued, plus
    older transcripts from --from-dir (each becomes one redacted note under Memory/Conversations/<agent>/;
    re-running is safe). --apply-rollups and --propose-promotions show what they would change, and do it
    with --confirm: each is one journaled transaction and one index generation.

    \b
    Example:
      hive-brain consolidate
      hive-brain consolidate --from-dir ~/.claude/projects --agent claude-code
      hive-brain consolidate --apply-rollups            # what would be rolled up
      hive-brain consolidate --apply-rollups --confirm
      hive-brain consolidate --propose-promotions --confirm && hive-brain review list --status pending
    """
    from ..config import validate_agent_id

    if (prefix or min_run != 10) and not rollups:
        raise UsageError("--prefix and --min-run go with --apply-rollups",
                         hint="add --apply-rollups (and --confirm to do it)")
    if confirm and not (rollups or promotions):
        raise UsageError("--confirm goes with --apply-rollups or --propose-promotions",
                         hint="plain `consolidate` captures conversations without it")
    agent = validate_agent_id(agent_id) if agent_id else None
    res: dict[str, Any] = {}
    if from_dir is not None or not (rollups or promotions):
        res["conversations"] = _capture(state, from_dir, agent, as_json)
    if rollups:
        from ..memory.rollups import rollups as roll

        res["rollups"] = roll(state.engine().memory, confirm=confirm, min_run=min_run, prefix=prefix)
    if promotions:
        from ..memory.review import BrainReview

        res["promotions"] = BrainReview(state.engine().memory).promote(dry_run=not confirm)
    if set(res) == {"conversations"}:
        res = res["conversations"]  # plain `consolidate` answers as it always has

    def human(c: Any) -> None:
        if "captured" in res:
            _say_captured(c, res)
        elif "conversations" in res:
            _say_captured(c, res["conversations"])
        if "rollups" in res:
            _say_rollups(c, res["rollups"])
        if "promotions" in res:
            from .review import say_promotions

            say_promotions(c, res["promotions"])

    out(as_json, res, human)


def _capture(state: State, from_dir: Path | None, agent: str | None, as_json: bool) -> dict[str, Any]:
    from ..memory.conversations import consolidate
    from ..memory.layers import require_owner

    eng = state.engine()
    require_owner(eng.settings, "consolidating conversations")
    if as_json:
        return consolidate(eng, from_dir=from_dir, agent=agent)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("capturing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def progress(i: int, n: int, name: str) -> None:
            bar.update(task, completed=i, total=n, description=name[:40])

        return consolidate(eng, from_dir=from_dir, agent=agent, progress=progress)


def _say_captured(c: Any, res: dict[str, Any]) -> None:
    c.print(
        f"{res['captured']} captured, {res['updated']} updated, {res['already']} already up to date, "
        f"{res['skipped']} skipped, {res['failed']} failed ({res['total']} transcripts; "
        f"{res['pendingProcessed']} from the queue, {res['pendingLeft']} still queued)"
    )
    for r in res["results"]:
        if r["status"] == "failed":
            c.print(f"[red]failed[/] {r['transcript']}: {r.get('reason')}", markup=True)
    if res.get("indexError"):
        c.print(f"[yellow]index not updated:[/] {res['indexError']} (the next recall catches up)")


def _say_rollups(c: Any, res: dict[str, Any]) -> None:
    from rich.markup import escape

    dry = res["dryRun"]
    for r in res["runs"]:
        who = r["layer"] + (f" of {r['agent']}" if r.get("agent") else "") + (f", task {r['task']}" if r.get("task") else "")
        s = r.get("summary")
        into = f" -> [bold]{s['id']}[/] {escape(s['path'])}" if s else ""
        ext = f" (extends {s['extends']})" if s and s.get("extends") else ""
        verb = "Would roll up" if dry else ("Rolled up" if s else "Left")
        c.print(f"{verb} {r['count']} {escape(r['type'])} notes "
                f"\"{escape(r['pattern'])}\" [dim]({who}; {r['first'][:10]} .. {r['last'][:10]}; by {r['basis']})[/]"
                f"{into}{ext}")
        for k in r.get("skipped") or []:
            c.print(f"  [yellow]left as it is[/] {escape(k['path'])}: {escape(k['reason'])}")
    if not res["runs"]:
        c.print(f"No run of {res['minRun']} or more per-run notes to roll up.")
    elif dry:
        c.print(f"{res['notes']} notes into {res['summaries']} summaries; run again with --confirm to do it "
                "(each note stays readable with `get` and findable as history).")
    if res.get("indexWarning"):
        c.print(f"[yellow]{escape(res['indexWarning'])}[/]")


# ---------------------------------------------------------------------------------------------- mcp
@command("mcp", with_json=False)
@click.option(
    "--agent",
    "agent_id",
    default=None,
    metavar="ID",
    help="Identity of every tool call (default: --agent / $HIVE_AGENT_ID; none = the vault owner).",
)
def mcp_cmd(state: State, agent_id: str | None) -> None:
    """Serve the memory tools over MCP on stdio (recall, answer, remember, evolve, get, core).

    The identity comes from --agent or HIVE_AGENT_ID when the server starts, never from a tool call.

    \b
    Example:
      HIVE_AGENT_ID=codex hive-brain mcp
      claude mcp add hive-brain -- hive-brain mcp --agent claude-code
    """
    from ..agents.mcp import run

    run(State(state.vault_flag, agent_id or state.agent_flag, state.owner_key_flag).settings())


COMMANDS: list[click.Command] = [hooks_group, hook_group, core_cmd, consolidate_cmd, mcp_cmd]
