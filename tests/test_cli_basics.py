from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from hive_brain.cli.app import main

HEAVY = ("tantivy", "lancedb", "onnxruntime", "numpy", "pyarrow", "tokenizers", "rich", "cryptography")


def test_importing_cli_loads_no_heavy_library():
    code = f"import sys, hive_brain.cli.app; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_hook_entry_loads_neither_click_nor_rich():
    code = "import sys, hive_brain.agents.hookentry; print(','.join(m for m in ('click','rich','yaml','tantivy','numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))


def test_every_command_has_help_with_an_example():
    cmds = list(_commands(main))
    assert len(cmds) >= 8
    for path, cmd in cmds:
        res = CliRunner().invoke(main, [*path, "--help"])
        assert res.exit_code == 0, path
        assert cmd.help and len(cmd.help.strip()) > 20, path
        if not isinstance(cmd, click.Group):
            assert "Example" in res.output, f"{' '.join(path)} help has no example"


def test_usage_error_exit_code_2():
    res = CliRunner().invoke(main, ["remember", "--type", "fact"])
    assert res.exit_code == 2
