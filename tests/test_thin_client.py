"""The thin client (cli/thin.py): with a ready server, `remember`, `evolve` and `recall` are answered by a
process that imports neither click nor rich, print what the full CLI prints, and hand anything else to
the full CLI before a byte is printed or a write is sent. A real server, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_brain.cli import text, thin
from hive_brain.cli.app import main as cli_main
from hive_brain.config import resolve
from tests.helpers import hung_server, remember

READY_WITHIN = 120.0
REPO = Path(__file__).parents[1]
# Run as a process, with the modules it loaded written to stderr at exit (atexit runs on sys.exit).
PROBE = ("import atexit, sys\n"
         "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
         "from hive_brain.__main__ import main\n"
         "sys.argv = ['hive-brain', *sys.argv[1:]]\n"
         "main()\n")
FULL = "import sys\nfrom hive_brain.cli.app import main\nmain(prog_name='hive-brain', args=sys.argv[1:])\n"


def _proc(code: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
          ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120,
                       cwd=cwd)
    mods: set[str] = set()
    err_lines = []
    for line in p.stderr.splitlines():
        if line.startswith("MODULES "):
            mods = set(line.split()[1:])
        elif line:
            err_lines.append(line)
    p.stderr = "\n".join(err_lines)
    return p, mods


def thin_run(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    return _proc(PROBE, *args)


def full_run(*args: str) -> subprocess.CompletedProcess[str]:
    return _proc(FULL, *args)[0]


def _heavy(mods: set[str]) -> set[str]:
    return {m for m in mods if m.split(".")[0] in ("click", "rich", "numpy", "tantivy", "lancedb", "onnxruntime")
            or m.startswith(("hive_brain.search", "hive_brain.memory", "hive_brain.index", "hive_brain.engine"))}


def _wait(pred, timeout: float) -> None:
    t_end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < t_end, "timed out"
        time.sleep(0.1)


@pytest.fixture
def live(vault_path):
    """A ready in-process server (lexical: the thin client is the same whatever the server searches with)."""
    from hive_brain.daemon.server import Server

    os.environ["HIVE_BRAIN_SEMANTIC"] = "0"
    try:
        pkg = remember("Package manager", "Use pnpm for JavaScript projects, never npm. [see docs]", "preference")
        with Server(resolve(), log_to_stderr=False) as srv:
            assert srv.wait_ready(READY_WITHIN)
            yield srv, pkg
    finally:
        os.environ.pop("HIVE_BRAIN_SEMANTIC", None)


def _no_timing(d):
    if isinstance(d, dict):
        return {k: _no_timing(v) for k, v in d.items() if k not in ("timing", "lateMs", "rerankMs")}
    if isinstance(d, list):
        return [_no_timing(x) for x in d]
    return d


def test_the_thin_parser_takes_exactly_the_click_commands_options():
    """The table the thin client parses with is the click commands' own options: names, parameter
    names, flags, repeatable options, defaults, choices and ranges."""
    for name, (positional, spec) in thin.COMMANDS.items():
        cmd = cli_main.commands[name]
        options = {}
        args = []
        for p in cmd.params:
            if isinstance(p, click.Argument):
                args.append(p.name)
                continue
            assert isinstance(p, click.Option)
            long = [o for o in p.opts if o.startswith("--")]
            assert len(long) == 1, p.opts
            if p.is_flag:
                kind = "flag"
            elif p.multiple:
                kind = "multi"
            elif isinstance(p.type, click.Choice):
                kind = "|".join(p.type.choices)
            elif isinstance(p.type, click.IntRange):
                kind = f"int:{p.type.min}:{p.type.max}"
            elif p.type is click.FLOAT or isinstance(p.type, click.types.FloatParamType):
                kind = "float"
            elif p.type is click.INT:
                kind = "int"
            else:
                kind = "str"
            default = None if type(p.default).__name__ == "Sentinel" else p.default  # click 8.3: UNSET
            if p.multiple:
                default = tuple(default or ())
            elif kind == "flag":
                default = bool(default)
            options[long[0]] = (p.name, kind, default)
        options = {k: v for k, v in options.items() if k not in ("--help",)}
        assert options == {**spec, **thin.EVERY}, name
        assert args == ([positional] if positional else []), name
    top = {o: p.name for p in cli_main.params if isinstance(p, click.Option) for o in p.opts if o.startswith("--")}
    for flag, (pname, _kind, _default) in thin.GLOBAL.items():
        assert top[flag] == pname


def test_the_memory_id_as_an_option_alone_is_taken():
    """`evolve --memory-id X` (no positional id), as an agent or a script writes it: it was a KeyError
    traceback on the thin path, before the server was asked."""
    for cmd, extra in (("evolve", ["--content", "c"]), ("update", ["--content", "c"]), ("get", [])):
        _cmd, v, _glob = thin.parse([cmd, "--memory-id", "mem-x", *extra])
        assert v["memory_id_arg"] is None
        assert thin._memory_id(v) == "mem-x"
    _cmd, v, _glob = thin.parse(["get", "mem-y"])
    assert thin._memory_id(v) == "mem-y"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab/#@[]\\ x:"), max_size=24))
def test_the_markup_escape_is_richs(s):
    from rich.markup import escape

    assert text.markup_escape(s) == escape(s)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=6) | st.integers() | st.booleans() | st.none(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_the_pretty_json_is_jsons(obj):
    from hive_brain.agents.quick import pretty

    assert pretty(obj) == json.dumps(obj, indent=2, ensure_ascii=False, default=str)
    assert pretty({"p": Path("/x"), "s": {1, 2} if False else "y"}) == json.dumps(
        {"p": Path("/x"), "s": "y"}, indent=2, ensure_ascii=False, default=str)


def test_recall_and_remember_through_the_thin_client_print_what_the_full_cli_prints(live, vault_path):
    srv, pkg = live
    q = "which package manager for javascript"
    p, mods = thin_run("recall", q, "--json")
    assert p.returncode == 0, p.stderr
    assert not _heavy(mods), sorted(_heavy(mods))
    assert "hive_brain.cli.thin" in mods
    full = full_run("recall", q, "--json")
    assert full.returncode == 0, full.stderr
    got, want = json.loads(p.stdout), json.loads(full.stdout)
    assert got["via"] == "server" and got["hits"][0]["id"] == pkg["id"]
    assert _no_timing(got) == _no_timing(want)
    # The text form, line for line (the last line's time aside); brackets in a note print as written.
    p, _ = thin_run("recall", q, "--limit", "3")
    full = full_run("recall", q, "--limit", "3")
    assert p.stdout.splitlines()[:-1] == full.stdout.splitlines()[:-1] and "[see docs]" in p.stdout
    assert p.stdout.splitlines()[-1].rsplit("·", 1)[0] == full.stdout.splitlines()[-1].rsplit("·", 1)[0]

    p, mods = thin_run("remember", "--type", "decision", "--title", "Hosting",
                       "--content", "The web app runs on Fly.io.", "--tags", "infra, web")
    assert p.returncode == 0, p.stderr
    assert not _heavy(mods) and p.stdout.startswith("Remembered mem-")
    mid = p.stdout.split()[1]
    note = next(vault_path.rglob("hosting*.md"))
    assert "infra" in note.read_text(encoding="utf-8")
    p, mods = thin_run("evolve", mid, "--content", "The web app moved to Hetzner.", "--json")
    assert p.returncode == 0, p.stderr
    assert not _heavy(mods) and json.loads(p.stdout)["supersedes"] == mid
    # A refusal crosses whole: the same type, message and exit code as the full CLI's.
    p, mods = thin_run("remember", "--type", "decision", "--title", "Hosting 2",
                       "--content", "The web app moved to Hetzner.", "--json")
    full = full_run("remember", "--type", "decision", "--title", "Hosting 2",
                    "--content", "The web app moved to Hetzner.", "--json")
    assert p.returncode == full.returncode == 1 and not _heavy(mods)
    assert json.loads(p.stdout) == json.loads(full.stdout)


def test_every_thin_command_prints_what_the_full_cli_prints(live, vault_path):
    """update, get, answer, core and status through the thin client: the full CLI's output (JSON and
    text), and none of click, rich or the engine loaded."""
    srv, pkg = live
    (vault_path / "Memory" / "Core Memory.md").write_text("# Core Memory\n\nAlways run the tests before a push.\n",
                                                         encoding="utf-8")
    assert srv.indexing.settle(10.0)
    cases = [("update", pkg["id"], "--tags", "js, tooling"), ("get", pkg["id"]),
             ("answer", "which package manager for javascript"), ("answer", "how tall is mount everest"),
             ("core",), ("core", "--agent", "claude-code", "--budget", "400"), ("status",)]
    for args in cases:
        for fmt in (["--json"], []):
            p, mods = thin_run(*args, *fmt)
            assert p.returncode == 0, (args, p.stderr)
            assert not _heavy(mods) and "hive_brain.cli.thin" in mods, (args, sorted(_heavy(mods)))
            if args[0] == "update":
                continue  # done once: the full CLI's run below would be a second update
            full = full_run(*args, *fmt)
            assert full.returncode == 0, (args, full.stderr)
            if fmt:
                assert _no_timing(json.loads(p.stdout)) == _no_timing(json.loads(full.stdout)), args
            else:
                assert p.stdout == full.stdout, args
    note = next(vault_path.rglob("package-manager*.md")).read_text(encoding="utf-8")
    assert "tooling" in note
    p, mods = thin_run("get", "mem-nosuchthing", "--json")
    full = full_run("get", "mem-nosuchthing", "--json")
    assert p.returncode == full.returncode != 0 and not _heavy(mods)
    assert json.loads(p.stdout) == json.loads(full.stdout)


def test_get_names_an_old_version_superseded_in_its_header(live, vault_path):
    """A sync brought the old version's note back saying ``status: active``: the header says what the
    chain says (superseded), as ``status`` in --json does, on both paths."""
    srv, pkg = live
    p, _ = thin_run("evolve", pkg["id"], "--content", "Use bun for JavaScript projects now.", "--json")
    assert p.returncode == 0, p.stderr
    old = vault_path / pkg["path"]
    raw = old.read_text(encoding="utf-8")
    assert "status: superseded" in raw
    old.write_text(raw.replace("status: superseded", "status: active"), encoding="utf-8")
    assert srv.indexing.settle(10.0)
    for run in (thin_run, lambda *a: (full_run(*a), set())):
        out, _ = run("get", pkg["id"])
        header = out.stdout.splitlines()[0]
        assert header.endswith(", superseded)"), header


def test_what_the_thin_client_does_not_take_goes_to_the_full_cli(live):
    for args in (["recall", "--help"], ["recall", "x", "--limit", "500"], ["recall", "x", "--scope", "nowhere"],
                 ["recall", "x", "--no-such-option"], ["remember", "--type", "fact", "--title", "t"],
                 ["recall", "x", "--include-operational", "--json"], ["answer", "x", "--hook", "--json"],
                 ["core", "--budget", "50"], ["get", "a", "--memory-id", "b"], ["hooks", "status", "--json"]):
        p, mods = thin_run(*args)
        full = full_run(*args)
        if "--json" in args:
            assert (p.returncode, _no_timing(json.loads(p.stdout))) == (full.returncode, _no_timing(json.loads(full.stdout)))
        else:
            assert (p.returncode, p.stdout, p.stderr) == (full.returncode, full.stdout, full.stderr), args
        assert "click" in mods, args


def test_without_a_server_the_full_cli_answers(vault_path):
    remember("Package manager", "Use pnpm for JavaScript projects, never npm.", "preference")
    p, mods = thin_run("recall", "which package manager", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["hits"] and "click" in mods


def test_a_write_the_server_took_but_never_answered_is_not_done_again(vault_path):
    """Handing it to the full CLI would write it twice: it is reported as unconfirmed instead."""
    from hive_brain.store.vault import open_vault

    state = open_vault(resolve()).state
    os.environ["HIVE_BRAIN_LOCK_TIMEOUT"] = "0.5"
    try:
        with hung_server(state) as accepted:
            p, mods = _proc(PROBE.replace("main()", "import hive_brain.writer as w; w.SERVER_MARGIN_S = 0.5\nmain()"),
                            "remember", "--type", "fact", "--title", "Unconfirmed", "--content", "Sent once.", "--json")
    finally:
        os.environ.pop("HIVE_BRAIN_LOCK_TIMEOUT", None)
    assert p.returncode == 1, (p.stdout, p.stderr)
    out = json.loads(p.stdout)
    assert out["error"] == "WriteUnconfirmed" and "may have been applied" in out["message"]
    assert len(accepted) == 1 and "click" not in mods
    assert not list(vault_path.rglob("unconfirmed*.md"))


def test_the_vault_you_stand_in_beats_the_config_files_on_the_thin_path_too(live, vault_path, tmp_path):
    """The config file names another vault; standing in this one (its server up), a write lands here and
    says where, through the thin client as through the full CLI."""
    from hive_brain.store.vault import init_vault

    other = tmp_path / "other"
    init_vault(other, resolve())
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'vault = "{other}"\n', encoding="utf-8")
    env = {"HIVE_BRAIN_CONFIG": str(cfg)}
    os.environ.pop("HIVE_BRAIN_VAULT", None)
    sub = vault_path / "Projects"
    sub.mkdir(exist_ok=True)
    p, mods = _proc(PROBE, "remember", "--type", "fact", "--title", "Where", "--content", "It lands here.",
                    cwd=sub, env=env)
    assert p.returncode == 0, p.stderr
    assert "click" not in mods and f"→ {vault_path.resolve()}/Memory/" in p.stdout
    full = _proc(FULL, "remember", "--type", "fact", "--title", "Where 2", "--content", "It lands here too.",
                 cwd=sub, env=env)[0]
    assert full.returncode == 0 and f"→ {vault_path.resolve()}/Memory/" in full.stdout, full.stdout + full.stderr
    assert not list((other / "Memory").rglob("where*.md"))
