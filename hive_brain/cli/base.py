"""The click CLI. Each command parses its arguments, makes one core call, and prints the result
(``--json`` for scripts, rich for people). Core errors become one line that says what to do next.

Importing this module must stay cheap: no tantivy, lancedb, onnxruntime, numpy or rich at import.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from ..errors import HiveBrainError, StateDamaged
from .text import count, pending_line, pending_write_line

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import Settings
    from ..engine import Engine
    from ..memory.store import MemoryStore

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    def __init__(self, vault: str | None, agent: str | None, owner_key: str | None = None) -> None:
        self.vault_flag = vault
        self.agent_flag = agent
        self.owner_key_flag = owner_key
        self.vault_root: Path | None = None  # the vault a write went to (set by write)

    def settings(self, *, identify: bool = True, **extra: Any) -> Settings:
        """Resolved settings; ``identify`` establishes (in enforcement mode: proves) who is calling,
        which every command that reads or writes memory needs (store/identity.py)."""
        from ..config import resolve

        s = resolve(vault=self.vault_flag, agent_id=self.agent_flag, owner_key=self.owner_key_flag, **extra)
        if identify:
            from ..store.identity import establish

            establish(s)
        return s

    def engine(self, **extra: Any) -> Engine:
        from ..engine import Engine

        return Engine.from_settings(self.settings(**extra))

    def write(self, op: str, args: dict[str, Any]) -> dict:
        """A memory write, through the vault's server when one runs (see :mod:`hive_brain.writer`)."""
        from ..writer import write

        settings = self.settings()

        def local() -> MemoryStore:
            from ..engine import Engine  # only when the write is done here: the server has its own

            return Engine.from_settings(settings).memory

        res = write(settings, op, args, local=local)
        from ..store.vault import open_vault

        self.vault_root = open_vault(settings).root
        return res

    def where(self, rel: str) -> str:
        """A note's absolute path, for people (JSON keeps the vault-relative one): which vault a write
        landed in must be plain from its output."""
        return str(self.vault_root / rel) if self.vault_root is not None else rel


def _console(stderr: bool = False):
    import os

    from rich.console import Console

    # NO_COLOR (no-color.org): rich drops colours but keeps bold and dim; a user who asks for no
    # colour wants plain text, so no styling at all.
    if os.environ.get("NO_COLOR"):
        return Console(stderr=stderr, highlight=False, soft_wrap=True, color_system=None, emoji=False)
    # emoji=False: a note holding ":warning:" prints as written, as the thin client prints it (cli/text.py)
    return Console(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def fail(err: HiveBrainError, as_json: bool) -> None:
    if as_json:
        # The error's own shape (errors.py), the same whether it was raised here or crossed the socket.
        click.echo(_dump({"ok": False, **err.to_dict()}))
    else:
        click.echo(f"error: {err}", err=True)
        for r in err.details.get("records") or []:
            if isinstance(r, dict) and r.get("status") not in ("ok", "proposed"):
                # Counted from 1, as a person counts the records in their file (JSON keeps `index`).
                click.echo(f"  record {r['index'] + 1}: {r.get('message')}", err=True)
    sys.exit(err.exit_code)


def _no_color() -> None:
    import os

    os.environ["NO_COLOR"] = "1"  # rich (and whatever else prints) honours the convention


def _unusable_state(state: Any, e: Exception) -> HiveBrainError | None:
    """The state dir's own error when ``e`` (an OSError or SQLite error) came from a state dir that
    cannot be used (store.vault.unusable_state); None for anything else, which keeps its traceback."""
    sqlite3 = sys.modules.get("sqlite3")
    if not isinstance(state, State) or not (isinstance(e, OSError) or (sqlite3 and isinstance(e, sqlite3.Error))):
        return None
    from ..store.vault import open_vault, state_unusable_error

    try:
        return state_unusable_error(open_vault(state.settings(identify=False)).state, e)
    except Exception:  # noqa: BLE001 - no vault or no settings: the original error stands
        return None


def command(name: str | None = None, *, group: click.Group | None = None, with_json: bool = True, **kw: Any):
    """A command whose core errors turn into one-line messages (or JSON) and exit codes.

    Added to ``group`` when one is given (a sub-command of a group in the same module); otherwise
    returned unattached, for :mod:`.app` to register explicitly.
    """

    def deco(fn: Callable) -> click.Command:
        @functools.wraps(fn)
        def wrapper(*args: Any, no_color_: bool = False, **kwargs: Any) -> Any:
            as_json = kwargs.get("as_json", False)
            if no_color_:
                _no_color()
            try:
                return fn(*args, **kwargs)
            except HiveBrainError as e:
                fail(e, as_json)
            except KeyboardInterrupt:
                click.echo("interrupted", err=True)
                sys.exit(130)
            except Exception as e:
                # Last line of defence: a state dir that cannot be used (a file in its place, not
                # writable), or a state file damaged in a way no check met yet. One line naming the
                # repair, no traceback.
                unusable = _unusable_state(args[0] if args else None, e)
                if unusable is not None:
                    fail(unusable, as_json)
                sqlite3 = sys.modules.get("sqlite3")
                if sqlite3 is None or not isinstance(e, sqlite3.DatabaseError):
                    raise
                fail(StateDamaged(f"a state file is damaged ({e})",
                                  hint="run `hive-brain doctor`, then `hive-brain rebuild-index`"), as_json)

        if with_json:
            wrapper = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(wrapper)
        # Taken after the command too (`hive-brain recall q --no-color`), as people type it.
        wrapper = click.option("--no-color", "no_color_", is_flag=True, hidden=True)(wrapper)
        make = group.command if group is not None else click.command
        return make(name, **kw)(click.pass_obj(wrapper))

    return deco


def say(as_json: bool, data: Any, line: Callable[[], str]) -> None:
    """``out`` for a one-line plain result (the write commands): no rich, whose import alone is a
    tenth of a ``remember``, and no markup, so a title with brackets prints as written. ``line`` is
    called only for a finished write (a pending one has none of the keys it reads)."""
    out(as_json, data, lambda _console: click.echo(line()), plain=True)


def print_pending_writes(c: Any, records: list[dict]) -> None:
    for w in records:
        c.print(pending_write_line(w), markup=False)


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


def is_pending_write(data: Any) -> bool:
    """A write kept to be applied later (``store.pending``: its id is ``pw-...``), not a result whose
    status merely says pending (a Brain Review proposal waiting for the owner printed "the vault is busy")."""
    return isinstance(data, dict) and data.get("status") == "pending" and str(data.get("id") or "").startswith("pw-")


def out(as_json: bool, data: Any, human: Callable[[Any], None], *, plain: bool = False) -> None:
    if not as_json and is_pending_write(data):
        # A write that could not take the lock in time was kept (durably) to be applied by the next
        # writer; whatever the command would print about a finished write does not apply yet.
        click.echo(pending_line(data))
        return
    if as_json:
        click.echo(_dump(data))
    else:
        human(None if plain else _console())
        if isinstance(data, dict) and data.get("indexWarning"):
            click.echo(f"warning: {data['indexWarning']}", err=True)


# ---------------------------------------------------------------------------------------------- for people
def duration(seconds: float) -> str:
    """A duration in the unit a person would say: 340 ms, 9.4 s, 4 min 12 s, 31 min, 2 h 5 min."""
    s = max(0.0, float(seconds))
    if s < 1:
        return f"{round(s * 1000)} ms"
    if s < 60:
        return f"{s:.1f} s"
    if s < 600:
        m, r = divmod(round(s), 60)
        return f"{m} min {r} s" if r else f"{m} min"
    if s < 3600:
        return f"{round(s / 60)} min"
    h, m = divmod(round(s / 60), 60)
    return f"{h} h {m} min" if m else f"{h} h"


class Pace:
    """Rate and time left of one phase, measured from its first report: what comes before it (loading
    the model, the lexical phase) is not the work being timed, and an average over the whole phase
    is steady where rich's 30-second window shows nothing when one step takes longer than that."""

    def __init__(self, unit: str = "") -> None:
        self.unit = unit
        self.first: tuple[float, int] | None = None

    def update(self, done: int, total: int | None, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        if self.first is None:
            self.first = (now, done)
            return ""
        t0, d0 = self.first
        if now <= t0 or done <= d0:
            return ""
        rate = (done - d0) / (now - t0)
        text = f"{rate:,.1f} {self.unit}/s" if self.unit else f"{rate:,.1f}/s"
        if total and done < total:
            text += f", {duration((total - done) / rate)} left"
        return text


@contextmanager
def progress_bars(enabled: bool, labels: dict[str, str]) -> Iterator[Callable[[str, int, int], None] | None]:
    """``progress(phase, done, total)`` drawing one bar per phase on stderr (with rate and time left),
    or None when not ``enabled`` (rich is imported only then)."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn

    paces: dict[str, Pace] = {}
    tasks: dict[str, Any] = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                  TextColumn("{task.fields[pace]}"), console=_console(stderr=True), transient=False) as prog:

        def report(phase: str, done: int, total: int) -> None:
            label = labels.get(phase, phase)
            if phase not in tasks:
                tasks[phase] = prog.add_task(label, total=total or None, counts="", pace="")
                paces[phase] = Pace(phase)
            prog.update(tasks[phase], completed=done, total=total or None,
                        counts=f"{count(done)}/{count(total)}" if total else count(done),
                        pace=paces[phase].update(done, total))

        yield report


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
        _no_color()
    ctx.obj = State(vault, agent, owner_key)


