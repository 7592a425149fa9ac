"""The click CLI. Each command parses its arguments, makes one core call, and prints the result
(``--json`` for scripts, rich for people). Core errors become one line that says what to do next.

Importing this module must stay cheap: no tantivy, lancedb, onnxruntime, numpy or rich at import.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from ..errors import HiveBrainError, StateDamaged

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    def __init__(self, vault: str | None, agent: str | None, owner_key: str | None = None) -> None:
        self.vault_flag = vault
        self.agent_flag = agent
        self.owner_key_flag = owner_key

    def settings(self, *, identify: bool = True, **extra: Any):
        """Resolved settings; ``identify`` establishes (in enforcement mode: proves) who is calling,
        which every command that reads or writes memory needs (store/identity.py)."""
        from ..config import resolve

        s = resolve(vault=self.vault_flag, agent_id=self.agent_flag, owner_key=self.owner_key_flag, **extra)
        if identify:
            from ..store.identity import establish

            establish(s)
        return s

    def engine(self, **extra: Any):
        from ..engine import Engine

        return Engine.from_settings(self.settings(**extra))

    def write(self, op: str, args: dict[str, Any]) -> dict:
        """A memory write, through the vault's server when one runs (see :mod:`hive_brain.writer`)."""
        from ..writer import write

        settings = self.settings()

        def local() -> Any:
            from ..engine import Engine  # only when the write is done here: the server has its own

            return Engine.from_settings(settings).memory

        return write(settings, op, args, local=local)


def _console(stderr: bool = False):
    import os

    from rich.console import Console

    # NO_COLOR (no-color.org): rich drops colours but keeps bold and dim; a user who asks for no
    # colour wants plain text, so no styling at all.
    if os.environ.get("NO_COLOR"):
        return Console(stderr=stderr, highlight=False, soft_wrap=True, color_system=None)
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def fail(err: HiveBrainError, as_json: bool) -> None:
    if as_json:
        payload = {"ok": False, **err.to_dict()}
        report = getattr(err, "report", None)
        if report is not None:
            payload["records"] = report
        click.echo(_dump(payload))
    else:
        click.echo(f"error: {err}", err=True)
        report = getattr(err, "report", None)
        for r in report or []:
            if r.get("status") != "ok":
                # Counted from 1, as a person counts the records in their file (JSON keeps `index`).
                click.echo(f"  record {r['index'] + 1}: {r.get('message')}", err=True)
    sys.exit(err.exit_code)


def command(name: str | None = None, *, group: click.Group | None = None, with_json: bool = True, **kw: Any):
    """A command whose core errors turn into one-line messages (or JSON) and exit codes.

    Added to ``group`` when one is given (a sub-command of a group in the same module); otherwise
    returned unattached, for :mod:`.app` to register explicitly.
    """

    def deco(fn: Callable) -> click.Command:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            as_json = kwargs.get("as_json", False)
            try:
                return fn(*args, **kwargs)
            except HiveBrainError as e:
                fail(e, as_json)
            except KeyboardInterrupt:
                click.echo("interrupted", err=True)
                sys.exit(130)
            except Exception as e:
                # Last line of defence: a state file damaged in a way no check met yet. One line
                # naming the repair (doctor reads and repairs every derived file), no traceback.
                sqlite3 = sys.modules.get("sqlite3")
                if sqlite3 is None or not isinstance(e, sqlite3.DatabaseError):
                    raise
                fail(StateDamaged(f"a state file is damaged ({e})",
                                  hint="run `hive-brain doctor`, then `hive-brain rebuild-index`"), as_json)

        if with_json:
            wrapper = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(wrapper)
        make = group.command if group is not None else click.command
        return make(name, **kw)(click.pass_obj(wrapper))

    return deco


def say(as_json: bool, data: Any, line: Callable[[], str]) -> None:
    """``out`` for a one-line plain result (the write commands): no rich, whose import alone is a
    tenth of a ``remember``, and no markup, so a title with brackets prints as written. ``line`` is
    called only for a finished write (a pending one has none of the keys it reads)."""
    out(as_json, data, lambda _console: click.echo(line()), plain=True)


def print_pending_writes(c: Any, records: list[dict]) -> None:
    """Writes kept because the vault was busy (queued) or refused when applied later (failed)."""
    for w in records:
        what = f" {w['what']}" if w.get("what") else ""
        err = f": {w['error']}" if w.get("error") else ""
        c.print(f"pending write {w['id']} ({w['state']}): {w['op']}{what}{err}", markup=False)


def memory_id_argument(fn: Callable) -> Callable:
    """``get mem-...`` (positional, as git and llm take ids) or ``get --memory-id mem-...`` (kept for
    scripts); the command receives ``memory_id``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, memory_id_arg: str | None = None, memory_id: str | None = None, **kwargs: Any) -> Any:
        from ..errors import UsageError

        if memory_id_arg and memory_id and memory_id_arg != memory_id:
            raise UsageError(f"two different memory ids given ({memory_id_arg}, {memory_id})", hint="give it once")
        mid = memory_id_arg or memory_id
        if not mid:
            raise UsageError("which memory? give its id", hint="e.g. `hive-brain get mem-01j...` (ids are in recall's output)")
        return fn(*args, memory_id=mid, **kwargs)

    wrapper = click.option("--memory-id", "memory_id", default=None, help="The memory's id (or give it as the argument).")(wrapper)
    return click.argument("memory_id_arg", required=False, metavar="[MEMORY_ID]")(wrapper)


def split_tags(value: str | None) -> list[str] | None:
    """``--tags a, b`` -> ["a", "b"]; None when the option was not given."""
    if value is None:
        return None
    return [t.strip() for t in value.split(",") if t.strip()]


def out(as_json: bool, data: Any, human: Callable[[Any], None], *, plain: bool = False) -> None:
    if not as_json and isinstance(data, dict) and data.get("status") == "pending":
        # A write that could not take the lock in time was kept (durably) to be applied by the next
        # writer; whatever the command would print about a finished write does not apply yet.
        click.echo(f"Pending {data['id']}: {data.get('message', 'the vault is busy')}")
        return
    if as_json:
        click.echo(_dump(data))
    else:
        human(None if plain else _console())
        if isinstance(data, dict) and data.get("indexWarning"):
            click.echo(f"warning: {data['indexWarning']}", err=True)


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option("--vault", envvar=None, default=None, metavar="PATH", help="Vault to use (default: $HIVE_BRAIN_VAULT or the nearest vault above the current folder).")
@click.option("--agent", default=None, metavar="ID", help="Act as this agent (default: $HIVE_AGENT_ID; none = the vault owner).")
@click.option("--owner-key", default=None, metavar="PATH",
              help="Prove you are the vault owner (enforcement mode; default: $HIVE_BRAIN_OWNER_KEY). See docs/security.md.")
@click.option("--no-color", is_flag=True, help="Plain output without colours (as does NO_COLOR=1).")
@click.version_option(package_name="hive-brain")
@click.pass_context
def main(ctx: click.Context, vault: str | None, agent: str | None, owner_key: str | None, no_color: bool) -> None:
    """hive-brain: local memory for AI coding agents, kept as Markdown notes in an Obsidian vault.

    \b
    Start:   hive-brain init ~/brain && hive-brain config set vault ~/brain
    Write:   hive-brain remember --type preference --title "Package manager" --content "Use pnpm, not npm."
    Read:    hive-brain recall "which package manager do we use?"
    """
    if no_color:
        import os

        os.environ["NO_COLOR"] = "1"  # rich (and whatever else prints) honours the convention
    ctx.obj = State(vault, agent, owner_key)


