"""Commands that write and read typed memories: init, remember, evolve, get, update, delete, batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .base import State, command, memory_id_argument, out, say
from .text import (
    evidence_arg,
    evolve_line,
    evolve_names,
    get_lines,
    markup_escape,
    remember_line,
    rich_style,
    split_tags,
    update_line,
)


# ---------------------------------------------------------------------------------------------- vault
@command("init")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Create the vault even inside another vault.")
def init_cmd(state: State, path: Path | None, force: bool, as_json: bool) -> None:
    """Create a vault from the template (idempotent), with a stable vault id.

    \b
    Example:
      hive-brain init ~/brain
    """
    from ..store.vault import init_vault

    target = path or (Path(state.vault_flag) if state.vault_flag else Path.cwd())
    vault, created = init_vault(target, state.settings(identify=False), nest=force)
    data = {"vault": str(vault.root), "vaultId": vault.vault_id, "stateDir": str(vault.state), "created": created}
    out(as_json, data, lambda c: c.print(
        f"{'Created' if created else 'Already a vault:'} [bold]{vault.root}[/] (id {vault.vault_id})\n"
        f"Make it your vault for good with: hive-brain config set vault {vault.root}"))


# ---------------------------------------------------------------------------------------------- memory


@command("remember")
@click.option("--type", "mem_type", required=True,
              help="preference, decision, lesson, fact, ... (a wrong one lists them all; add your own: config set memory_types).")
@click.option("--title", required=True, help="Short title; also the readable part of the file name.")
@click.option("--content", required=True, help="The memory itself (Markdown). Use - to read standard input.")
@click.option("--memory-key", default=None, help="Canonical key (default: derived from type/project/title).")
@click.option("--project", default=None)
@click.option("--tags", default=None, help="Comma-separated tags.")
@click.option("--aliases", default=None, help="Comma-separated other names of what it is about (found like the title).")
@click.option("--question", "questions", multiple=True,
              help="A question a later reader would ask that this answers (repeat it: 3-5 phrasings).")
@click.option("--confidence", type=float, default=None, help="0..1")
@click.option("--memory-scope", type=click.Choice(["hive", "private", "task"]), default=None,
              help="hive = shared memory; default: private for an agent, shared for the owner.")
@click.option("--task", default=None, help="Task id for a task-layer memory.")
@click.option("--overrides", default=None, help="Id of a shared memory this private memory replaces for its agent.")
@click.option("--from-conversation", "conversation", default=None, metavar="TRANSCRIPT|NOTE|SESSION",
              help="Where this was learned: a transcript file, a conversation note (vault path) or a session id; "
                   "Brain Review shows it to the reviewer.")
@click.option("--excerpt", default=None, help="The words of that conversation it rests on (checked: they must be there).")
@click.option("--turn", type=click.IntRange(1, 1_000_000), default=None, help="The conversation's turn it came from (## Turn N).")
def remember_cmd(state: State, mem_type: str, title: str, content: str, memory_key: str | None, project: str | None,
                 tags: str | None, aliases: str | None, questions: tuple[str, ...], confidence: float | None,
                 memory_scope: str | None, task: str | None, overrides: str | None, conversation: str | None,
                 excerpt: str | None, turn: int | None, as_json: bool) -> None:
    """Store a new typed memory as a note under Memory/.

    Refuses a second active memory with the same key (use `evolve`), identical content, and anything
    that looks like a secret.

    \b
    Example:
      hive-brain remember --type preference --title "Package manager" \\
          --content "Use pnpm, never npm, for JavaScript projects." --tags js,tooling \\
          --aliases "JS package manager" --question "which package manager do we use?" \\
          --question "npm or pnpm?"
      hive-brain remember --memory-scope hive --type lesson --title "Run migrations first" \\
          --content "Deploys fail unless migrations ran." \\
          --from-conversation ~/.claude/projects/x/session.jsonl --excerpt "the migrations had not run"
    """
    if content == "-":
        content = sys.stdin.read()
    # As data, not a MemoryInput: the server may do this write, and this process then never imports
    # the memory layer at all.
    inp = {"type": mem_type, "title": title, "content": content, "memory_key": memory_key, "project": project,
           "tags": split_tags(tags) or [], "aliases": split_tags(aliases) or [], "questions": list(questions),
           "confidence": confidence, "scope": memory_scope, "task": task, "overrides": overrides,
           **evidence_arg(conversation, excerpt, turn)}
    res = state.write("remember", {"inp": inp})
    say(as_json, res, lambda: remember_line(res, state.where))


@command("evolve")
@memory_id_argument
@click.option("--content", required=True, help="The new truth. Use - to read standard input.")
@click.option("--title", default=None)
@click.option("--aliases", default=None, help="Comma-separated; replaces the aliases (default: kept).")
@click.option("--question", "questions", multiple=True,
              help="A question the new version answers (repeat it); replaces the questions (default: kept).")
def evolve_cmd(state: State, memory_id: str, content: str, title: str | None, aliases: str | None,
               questions: tuple[str, ...], as_json: bool) -> None:
    """Record that a memory changed: a new note supersedes the old one (both linked).

    \b
    Example:
      hive-brain evolve mem-01j... --content "We moved from pnpm to bun in 2026."
    """
    if content == "-":
        content = sys.stdin.read()
    res = state.write("evolve", {"memory_id": memory_id, "content": content, "title": title,
                                 **evolve_names(aliases, questions)})
    say(as_json, res, lambda: evolve_line(res, state.where))


@command("get")
@memory_id_argument
def get_cmd(state: State, memory_id: str, as_json: bool) -> None:
    """Show one memory with its frontmatter and evolution chain.

    \b
    Example:
      hive-brain get mem-01j...
    """
    res = state.engine().memory.get(memory_id)

    def human(c: Any) -> None:
        for line in get_lines(res, rich_style, markup_escape):
            c.print(line)

    out(as_json, res, human)


@command("update")
@memory_id_argument
@click.option("--title", default=None)
@click.option("--content", default=None)
@click.option("--tags", default=None, help="Comma-separated; replaces the tags.")
@click.option("--project", default=None)
@click.option("--confidence", type=float, default=None)
@click.option("--status", type=click.Choice(["archived", "active"]), default=None)
def update_cmd(state: State, memory_id: str, title: str | None, content: str | None, tags: str | None,
               project: str | None, confidence: float | None, status: str | None, as_json: bool) -> None:
    """Fix a memory in place (wording, tags, archive). Truth changes go through `evolve`.

    \b
    Example:
      hive-brain update mem-01j... --tags js,tooling --status archived
    """
    res = state.write("update", {"memory_id": memory_id, "title": title, "content": content, "tags": split_tags(tags),
                                 "project": project, "confidence": confidence, "status": status})
    say(as_json, res, lambda: update_line(res, state.where))


@command("delete")
@memory_id_argument
@click.option("--confirm", is_flag=True, help="Required: delete is permanent.")
@click.option("--force", is_flag=True, help="Also delete a member of an evolution chain (the chain is relinked).")
def delete_cmd(state: State, memory_id: str, confirm: bool, force: bool, as_json: bool) -> None:
    """Delete a memory note permanently.

    \b
    Example:
      hive-brain delete mem-01j... --confirm
    """
    res = state.write("delete", {"memory_id": memory_id, "confirm": confirm, "force": force})
    say(as_json, res, lambda: f"Deleted {res['id']} ({state.where(res['path'])})")


@command("batch")
@click.option("--file", "file", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="JSON list of records ({type, title, content, ...}); - for standard input.")
def batch_cmd(state: State, file: str, as_json: bool) -> None:
    """Remember up to 25 memories at once: all or nothing, with a report per record.

    \b
    Example:
      echo '[{"type":"fact","title":"CI","content":"CI runs on GitHub Actions."}]' | hive-brain batch --file -
    """
    from ..errors import UsageError

    try:
        raw = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        data = json.loads(raw)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {file}: {e}") from e
    except ValueError as e:
        raise UsageError(f"{file} is not valid JSON: {e}") from e
    if isinstance(data, dict) and "records" in data:
        data = data["records"]
    # In-process, not through the server: a refused batch reports each record, which an error sent
    # over the socket would not carry.
    res = state.engine().memory.batch(data)
    say(as_json, res, lambda: f"Remembered {res['count']} memories in one transaction.")

COMMANDS: list[click.Command] = [init_cmd, remember_cmd, evolve_cmd, get_cmd, update_cmd, delete_cmd, batch_cmd]
