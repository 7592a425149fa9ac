"""Installers for Cursor, Gemini CLI and AGENTS.md, against samples of each documented file format,
and each hook-capable agent's installed command run as that agent runs it (real vault, real hook)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from tests.helpers import remember, run

# ---------------------------------------------------------------------------------------------- samples
# Cursor's hooks.json as its docs show it (https://cursor.com/docs/agent/hooks), with the user's own hooks.
CURSOR_HOOKS = {
    "version": 1,
    "hooks": {
        "beforeShellExecution": [{"command": "./hooks/audit.sh"}],
        "sessionStart": [{"command": "~/bin/greet.sh"}],
        "afterFileEdit": [{"command": "./hooks/format.sh"}],
    },
}
CURSOR_MCP = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "@gh/mcp"], "env": {"TOKEN": "x"}}}}
# Gemini CLI's settings.json (https://geminicli.com/docs/hooks/reference): other settings, the user's own
# hooks in the same layout, the `disabled` list beside the events, another MCP server.
GEMINI_SETTINGS = {
    "theme": "GitHub",
    "tools": {"enableHooks": True},
    "hooks": {
        "BeforeTool": [
            {"matcher": "write_file|replace", "hooks": [{"name": "lint", "type": "command", "command": "./lint.sh", "timeout": 30000}]}
        ],
        "BeforeAgent": [{"matcher": "", "hooks": [{"name": "git-ctx", "type": "command", "command": "./git-ctx.sh"}]}],
        "disabled": ["old-hook"],
    },
    "mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]}},
}
AGENTS_MD = "# webapp\n\nRun `make test` before every commit.\n\n## Style\n- tabs, not spaces\n"


def write_json(path: Path, data: dict, indent: int = 2) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=indent) + "\n"
    path.write_text(text)
    return text


def backups(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.bak-*"))


def sh(command: str, payload: dict, cwd: Path) -> dict | None:
    """Run an installed hook command line the way an agent does: a shell, the event JSON on stdin."""
    env = {k: v for k, v in os.environ.items() if k != "HIVE_BRAIN_VAULT"}  # the command pins the vault
    p = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
                       env=env, cwd=cwd, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout) if p.stdout.strip() else None


@pytest.fixture
def with_memory(vault_path):
    from hive_brain.engine import Engine

    (vault_path / "Memory" / "Core Memory.md").write_text(
        "---\ntitle: Core Memory\ntype: core\n---\n\n# Core Memory\n\n## About me\n"
        "- I am Ana, a backend developer who works in Go.\n",
        encoding="utf-8",
    )
    remember("Package manager", "Always use pnpm for JavaScript projects, never npm.", "instruction")
    Engine.open().rebuild(embed=False)
    return vault_path


# ---------------------------------------------------------------------------------------------- cursor
def test_cursor_install_keeps_the_users_hooks_and_servers_and_is_idempotent(vault_path):
    folder = Path.home() / ".cursor"
    hooks_text = write_json(folder / "hooks.json", CURSOR_HOOKS, indent=4)
    mcp_text = write_json(folder / "mcp.json", CURSOR_MCP)

    dry = run("hooks", "install", "--agent", "cursor", "--dry-run")
    assert dry["changed"] and "hook session-start --format cursor" in dry["diff"] and '"hive-brain"' in dry["diff"]
    assert (folder / "hooks.json").read_text() == hooks_text and (folder / "mcp.json").read_text() == mcp_text
    assert not backups(folder)

    res = run("hooks", "install", "--agent", "cursor")
    assert res["changed"] and len(res["files"]) == 2 and all(f["backup"] for f in res["files"])
    hooks = json.loads((folder / "hooks.json").read_text())
    assert hooks["version"] == 1
    assert hooks["hooks"]["beforeShellExecution"] == CURSOR_HOOKS["hooks"]["beforeShellExecution"]
    assert hooks["hooks"]["afterFileEdit"] == CURSOR_HOOKS["hooks"]["afterFileEdit"]
    start = hooks["hooks"]["sessionStart"]
    assert start[0] == {"command": "~/bin/greet.sh"}  # the user's own hook stays first
    assert start[1]["command"].startswith("HIVE_AGENT_ID=cursor ") and str(vault_path) in start[1]["command"]
    assert "beforeSubmitPrompt" not in hooks["hooks"]  # Cursor's prompt hook cannot add context
    assert (folder / "hooks.json").read_text().startswith('{\n    "version"')  # the file's 4-space indent kept
    mcp = json.loads((folder / "mcp.json").read_text())
    assert mcp["mcpServers"]["github"] == CURSOR_MCP["mcpServers"]["github"]
    ours = mcp["mcpServers"]["hive-brain"]
    assert ours["args"][-1] == "mcp" and ours["env"]["HIVE_AGENT_ID"] == "cursor"
    assert ours["env"]["HIVE_BRAIN_VAULT"] == str(vault_path) and Path(ours["env"]["HIVE_AGENT_CREDENTIAL"]).is_file()

    texts = ((folder / "hooks.json").read_text(), (folder / "mcp.json").read_text())
    n = len(backups(folder))
    again = run("hooks", "install", "--agent", "cursor")
    assert not again["changed"] and len(backups(folder)) == n
    assert ((folder / "hooks.json").read_text(), (folder / "mcp.json").read_text()) == texts

    st = run("hooks", "status")
    assert set(st["cursor"]["user"]["events"]) == {"sessionStart"} and st["cursor"]["user"]["mcp"]["installed"]
    assert not st["cursor"]["project"]["events"]

    res = run("hooks", "uninstall", "--agent", "cursor")
    assert res["removed"] == 2
    assert (folder / "hooks.json").read_text() == hooks_text and (folder / "mcp.json").read_text() == mcp_text


def test_cursor_project_install_creates_the_documented_files(vault_path, tmp_path, monkeypatch):
    project = tmp_path / "webapp"
    project.mkdir()
    monkeypatch.chdir(project)
    run("hooks", "install", "--agent", "cursor", "--project")
    hooks = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert set(hooks) == {"version", "hooks"} and hooks["version"] == 1
    assert list(hooks["hooks"]) == ["sessionStart"]
    assert "hive-brain" in json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]
    assert not (Path.home() / ".cursor").exists()
    assert run("hooks", "status")["cursor"]["project"]["events"]
    run("hooks", "uninstall", "--agent", "cursor", "--project")
    assert list((project / ".cursor").iterdir()) == []  # the files install created are gone again


def test_cursor_refuses_a_foreign_server_of_our_name_and_broken_json(vault_path):
    folder = Path.home() / ".cursor"
    mcp_text = write_json(folder / "mcp.json", {"mcpServers": {"hive-brain": {"command": "something-else"}}})
    res = run("hooks", "install", "--agent", "cursor", ok=False)
    assert res["_exit"] == 2 and "does not run `hive-brain mcp`" in res["message"]
    assert (folder / "mcp.json").read_text() == mcp_text and not (folder / "hooks.json").exists()
    (folder / "mcp.json").unlink()
    (folder / "hooks.json").write_text('{"version": 1, "hooks": {')
    res = run("hooks", "install", "--agent", "cursor", ok=False)
    assert res["_exit"] == 2 and "not valid JSON" in res["message"] and not (folder / "mcp.json").exists()


def test_cursor_session_start_end_to_end(with_memory, tmp_path):
    run("hooks", "install", "--agent", "cursor")
    command = json.loads((Path.home() / ".cursor" / "hooks.json").read_text())["hooks"]["sessionStart"][0]["command"]
    # sessionStart's documented input: the common fields plus session_id, is_background_agent, composer_mode.
    payload = {"hook_event_name": "sessionStart", "conversation_id": "c-1", "generation_id": "g-1",
               "session_id": "c-1", "workspace_roots": [str(tmp_path)], "is_background_agent": False,
               "composer_mode": "agent", "cursor_version": "1.7.0"}
    out = sh(command, payload, tmp_path)
    assert out is not None and set(out) == {"additional_context"}  # Cursor's flat, snake_case envelope
    assert "I am Ana, a backend developer" in out["additional_context"]
    assert "pnpm" in out["additional_context"]


# ---------------------------------------------------------------------------------------------- gemini
def test_gemini_install_keeps_the_users_settings_and_is_idempotent(vault_path):
    path = Path.home() / ".gemini" / "settings.json"
    original = write_json(path, GEMINI_SETTINGS)

    dry = run("hooks", "install", "--agent", "gemini", "--dry-run")
    assert dry["changed"] and "hook prompt" in dry["diff"] and path.read_text() == original
    assert not backups(path.parent)

    res = run("hooks", "install", "--agent", "gemini")
    assert res["changed"] and Path(res["backup"]).read_text() == original
    data = json.loads(path.read_text())
    assert data["theme"] == "GitHub" and data["tools"] == {"enableHooks": True}
    assert data["hooks"]["BeforeTool"] == GEMINI_SETTINGS["hooks"]["BeforeTool"]
    assert data["hooks"]["disabled"] == ["old-hook"]
    before_agent = data["hooks"]["BeforeAgent"]
    assert before_agent[0] == GEMINI_SETTINGS["hooks"]["BeforeAgent"][0]
    ours = before_agent[1]["hooks"][0]
    assert ours["type"] == "command" and ours["name"] == "hive-brain-prompt" and ours["timeout"] == 5000  # ms
    assert ours["command"].startswith("HIVE_AGENT_ID=gemini ") and ours["command"].endswith(" hook prompt")
    assert "hook session-start" in data["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert data["mcpServers"]["db"] == GEMINI_SETTINGS["mcpServers"]["db"]
    assert data["mcpServers"]["hive-brain"]["env"]["HIVE_AGENT_ID"] == "gemini"

    text = path.read_text()
    assert not run("hooks", "install", "--agent", "gemini")["changed"] and path.read_text() == text

    st = run("hooks", "status")
    assert set(st["gemini"]["user"]["events"]) == {"BeforeAgent", "SessionStart", "AfterAgent"}
    assert st["gemini"]["user"]["mcp"]["installed"]

    res = run("hooks", "uninstall", "--agent", "gemini")
    assert res["removed"] == 4 and path.read_text() == original


def test_gemini_prompt_and_session_start_end_to_end(with_memory, tmp_path):
    run("hooks", "install", "--agent", "gemini")
    hooks = json.loads((Path.home() / ".gemini" / "settings.json").read_text())["hooks"]
    base = {"session_id": "g-1", "transcript_path": str(tmp_path / "none.json"), "cwd": str(tmp_path),
            "timestamp": "2026-12-01T10:30:00Z"}
    out = sh(hooks["BeforeAgent"][0]["hooks"][0]["command"],
             {**base, "hook_event_name": "BeforeAgent", "prompt": "which package manager should I use?"}, tmp_path)
    assert out is not None
    assert out["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    assert "pnpm" in out["hookSpecificOutput"]["additionalContext"]
    out = sh(hooks["SessionStart"][0]["hooks"][0]["command"],
             {**base, "hook_event_name": "SessionStart", "source": "startup"}, tmp_path)
    assert out is not None and out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "I am Ana" in out["hookSpecificOutput"]["additionalContext"]


# ---------------------------------------------------------------------------------------------- cline
def test_cline_hook_scripts_install_idempotently_and_leave_the_users_hooks(vault_path):
    folder = Path.home() / "Documents" / "Cline" / "Hooks"
    folder.mkdir(parents=True)
    theirs = folder / "PreToolUse"
    theirs.write_text("#!/bin/sh\necho '{\"cancel\": false}'\n")
    dry = run("hooks", "install", "--agent", "cline", "--dry-run")
    assert dry["changed"] and "hook prompt --format cline" in dry["diff"] and sorted(p.name for p in folder.iterdir()) == ["PreToolUse"]

    res = run("hooks", "install", "--agent", "cline")
    assert res["changed"] and {Path(f["file"]).name for f in res["files"]} == {
        "UserPromptSubmit", "TaskStart", "TaskComplete", "TaskCancel"}
    for name, event in (("UserPromptSubmit", "prompt"), ("TaskStart", "session-start"), ("TaskComplete", "stop"),
                        ("TaskCancel", "stop")):
        path = folder / name
        assert os.access(path, os.X_OK) and path.read_text().startswith("#!/bin/sh\n")
        assert f"hook {event} --format cline" in path.read_text() and "HIVE_AGENT_ID=cline " in path.read_text()
    texts = {p.name: p.read_text() for p in folder.iterdir()}
    assert not run("hooks", "install", "--agent", "cline")["changed"]
    assert {p.name: p.read_text() for p in folder.iterdir()} == texts and not backups(folder)

    st = run("hooks", "status")
    assert set(st["cline"]["user"]["events"]) == {"UserPromptSubmit", "TaskStart", "TaskComplete", "TaskCancel"}
    assert st["cline"]["user"]["vaults"]["UserPromptSubmit"]["path"] == str(vault_path)

    res = run("hooks", "uninstall", "--agent", "cline")
    assert res["removed"] == 4 and sorted(p.name for p in folder.iterdir()) == ["PreToolUse"]


def test_cline_refuses_to_replace_a_hook_of_the_users(vault_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / ".clinerules" / "hooks"
    folder.mkdir(parents=True)
    (folder / "TaskStart").write_text("#!/bin/sh\necho mine\n")
    res = run("hooks", "install", "--agent", "cline", "--project", ok=False)
    assert res["_exit"] == 2 and "is a Cline hook of yours" in res["message"]
    assert sorted(p.name for p in folder.iterdir()) == ["TaskStart"]  # nothing half installed
    assert (folder / "TaskStart").read_text() == "#!/bin/sh\necho mine\n"
    assert run("hooks", "uninstall", "--agent", "cline", "--project")["removed"] == 0
    assert (folder / "TaskStart").exists()


def test_cline_prompt_and_task_start_end_to_end(with_memory, tmp_path):
    run("hooks", "install", "--agent", "cline")
    folder = Path.home() / "Documents" / "Cline" / "Hooks"
    base = {"clineVersion": "3.36.0", "timestamp": "1764584400000", "taskId": "t-1",
            "workspaceRoots": [str(tmp_path)], "userId": "u-1"}

    def hook_file(name: str, payload: dict) -> dict:
        # Cline executes the file itself (no shell in front), the event JSON on stdin.
        env = {k: v for k, v in os.environ.items() if k != "HIVE_BRAIN_VAULT"}
        p = subprocess.run([str(folder / name)], input=json.dumps(payload), capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=60)
        assert p.returncode == 0, p.stderr  # a non-zero exit would cancel the prompt in Cline
        return json.loads(p.stdout.strip().splitlines()[-1])  # Cline parses the last JSON object

    out = hook_file("UserPromptSubmit", {**base, "hookName": "UserPromptSubmit",
                                         "userPromptSubmit": {"prompt": "which package manager should I use?",
                                                              "attachments": []}})
    assert out["cancel"] is False and "pnpm" in out["contextModification"]
    out = hook_file("TaskStart", {**base, "hookName": "TaskStart",
                                  "taskStart": {"taskMetadata": {"taskId": "t-1", "ulid": "01J", "initialTask": "hi"}}})
    assert out["cancel"] is False and "I am Ana" in out["contextModification"]
    out = hook_file("UserPromptSubmit", {**base, "hookName": "UserPromptSubmit",
                                         "userPromptSubmit": {"prompt": "weather on the moon tomorrow?"}})
    assert out == {"cancel": False}  # nothing relevant: the prompt goes through untouched


# ---------------------------------------------------------------------------------------------- agents-md
def test_agents_md_block_is_idempotent_and_uninstall_restores_the_file(vault_path, tmp_path, monkeypatch):
    project = tmp_path / "webapp"
    project.mkdir()
    target = project / "AGENTS.md"
    target.write_text(AGENTS_MD)

    dry = run("hooks", "install", "--agent", "agents-md", "--path", str(project), "--dry-run")
    assert dry["changed"] and "recall" in dry["diff"] and target.read_text() == AGENTS_MD

    res = run("hooks", "install", "--agent", "agents-md", "--path", str(project))
    text = target.read_text()
    assert res["changed"] and text.startswith(AGENTS_MD)  # the user's part is untouched
    assert "<!-- >>> hive-brain" in text and "<!-- <<< hive-brain <<< -->" in text
    assert f"--vault {vault_path} recall" in text and " remember --type" in text and " mcp`" in text
    assert not run("hooks", "install", "--agent", "agents-md", "--path", str(project))["changed"]
    assert target.read_text() == text

    # Text the user adds after the block stays when the block is refreshed or removed.
    target.write_text(text + "\n## Later notes\n- keep me\n")
    run("hooks", "install", "--agent", "agents-md", "--path", str(project))
    assert target.read_text().endswith("## Later notes\n- keep me\n") and target.read_text().count("hive-brain <<<") == 1

    monkeypatch.chdir(project)  # status looks at ./AGENTS.md
    st = run("hooks", "status")
    assert st["agentsMd"]["installed"] and st["agentsMd"]["vault"]["path"] == str(vault_path)

    res = run("hooks", "uninstall", "--agent", "agents-md")
    assert res["removed"] == 1
    assert target.read_text() == AGENTS_MD + "\n## Later notes\n- keep me\n"
    target.write_text(AGENTS_MD)
    run("hooks", "install", "--agent", "agents-md")
    run("hooks", "uninstall", "--agent", "agents-md")
    assert target.read_text() == AGENTS_MD


def test_agents_md_path_may_name_another_instructions_file(vault_path, tmp_path):
    gemini_md = tmp_path / "GEMINI.md"
    run("hooks", "install", "--agent", "agents-md", "--path", str(gemini_md))
    assert "## Memory (hive-brain)" in gemini_md.read_text()
    run("hooks", "uninstall", "--agent", "agents-md", "--path", str(gemini_md))
    assert not gemini_md.exists()  # install created it; uninstall leaves no empty file behind
    res = run("hooks", "install", "--agent", "agents-md", "--path", str(tmp_path / "nope.txt"), ok=False)
    assert res["_exit"] == 2 and "neither a folder nor a Markdown file" in res["message"]


# ---------------------------------------------------------------------------------------------- front
def test_an_unknown_agent_is_a_usage_error_listing_every_agent(vault_path):
    from hive_brain.agents.install import AGENTS
    from hive_brain.cli.agents import AGENT_CHOICES

    assert AGENT_CHOICES == AGENTS
    res = CliRunner().invoke(main, ["hooks", "install", "--agent", "windsurf"])
    assert res.exit_code == 2
    for agent in AGENTS:
        assert agent in res.output
    res = run("hooks", "install", "--agent", "codex", "--project", ok=False)
    assert res["_exit"] == 2 and "--project is not for codex" in res["message"]


def test_install_without_agent_still_means_claude_code(vault_path):
    run("hooks", "install")
    assert (Path.home() / ".claude" / "settings.json").is_file()
    assert not (Path.home() / ".cursor").exists() and not (Path.home() / ".gemini").exists()


def test_the_claude_mcp_add_hint_pins_the_vault_as_the_hooks_do(vault_path):
    """Claude Code starts `hive-brain mcp` with only the env `claude mcp add -e` gave it: without the
    vault the server answered every tool call VaultNotFound (found by test_claude_code_runs_the_mcp_recall_tool)."""
    import shlex

    hint = run("hooks", "install", "--agent", "claude-code")["hint"]
    argv = shlex.split(hint.split("run: ", 1)[1])
    env = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv[: argv.index("--")]) if a == "-e")
    assert env["HIVE_BRAIN_VAULT"] == str(vault_path) and env["HIVE_AGENT_ID"] == "claude-code"
    assert argv[-1] == "mcp" and "HIVE_AGENT_CREDENTIAL" in env


# ---------------------------------------------------------------------------------------------- which vault
def test_status_and_doctor_show_each_hooks_vault_and_flag_a_missing_one(vault_path, tmp_path, monkeypatch):
    run("hooks", "install")
    run("hooks", "install", "--agent", "gemini")
    run("hooks", "install", "--agent", "codex")
    # A second vault, set in the config file only: its hooks are not pinned.
    other = tmp_path / "brain"
    run("init", str(other))
    monkeypatch.delenv("HIVE_BRAIN_VAULT")
    run("config", "set", "vault", str(other))
    run("hooks", "install", "--agent", "cursor")

    rows = {r["agent"] + " " + r["where"]: r["vault"] for r in run("hooks", "status")["vaults"]}
    assert rows["claude-code user"] == {"path": str(vault_path), "source": "pinned", "exists": True}
    assert rows["gemini user mcp"]["path"] == str(vault_path) and rows["codex user"]["path"] == str(vault_path)
    cursor = rows["cursor user"]
    assert cursor["source"].startswith("config file: ") and cursor["path"] == str(other) and cursor["exists"]
    human = CliRunner().invoke(main, ["hooks", "status"]).output
    assert f"claude-code (user) uses vault {vault_path} (pinned)" in human
    assert "cursor (user) uses vault" in human and "(config file: " in human

    monkeypatch.setenv("HIVE_BRAIN_VAULT", str(other))
    doc = run("doctor")
    assert {r["agent"] for r in doc["hookVaults"]} >= {"claude-code", "gemini", "cursor"}

    shutil.rmtree(vault_path)  # the vault the claude-code and gemini hooks pin is gone
    st = run("hooks", "status")
    missing = {r["agent"] for r in st["vaults"] if not r["vault"]["exists"]}
    assert missing == {"claude-code", "gemini", "codex"}
    human = CliRunner().invoke(main, ["hooks", "status"]).output
    assert f"uses vault {vault_path} (pinned) - DOES NOT EXIST" in human
    res = CliRunner().invoke(main, ["doctor"])
    assert res.exit_code == 1 and "DOES NOT EXIST" in res.output


# ---------------------------------------------------------------------------------------------- fidelity
# A settings file as people write them by hand: compact arrays and objects on one line, a key order
# of their own, no final newline.
CLAUDE_COMPACT = (
    '{\n  "model": "opus",\n  "permissions": {"allow": ["Bash(ls)", "Read"], "deny": []},\n'
    '  "hooks": {\n    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./audit.sh"}]}]\n  },\n'
    '  "env": {"EDITOR": "vim"}\n}'
)
GEMINI_COMPACT = (
    '{\n    "theme": "GitHub",\n    "tools": {"enableHooks": true, "exclude": ["run_shell_command"]},\n'
    '    "hooks": {"disabled": ["old-hook"]},\n    "mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]}}\n}\n'
)


@pytest.mark.parametrize(("agent", "rel", "original"), [
    ("claude-code", ".claude/settings.json", CLAUDE_COMPACT),
    ("gemini", ".gemini/settings.json", GEMINI_COMPACT),
])
def test_uninstall_gives_back_the_users_bytes_and_install_reflows_nothing_of_theirs(vault_path, agent, rel, original):
    path = Path.home() / rel
    path.parent.mkdir(parents=True)
    path.write_text(original)
    run("hooks", "install", "--agent", agent)
    installed = path.read_text()
    # What the user wrote keeps its bytes beside our entries.
    for line in original.splitlines()[1:-1]:
        if '"hooks"' not in line and '"env"' not in line and '"mcpServers"' not in line:
            assert line.rstrip(",") in installed, line
    run("hooks", "uninstall", "--agent", agent)
    assert path.read_bytes() == original.encode()

    # Changed by the user while installed: only our entries' lines go, their compact arrays stay.
    run("hooks", "install", "--agent", agent)
    path.write_text(path.read_text().replace('"GitHub"', '"Dracula"').replace('"opus"', '"sonnet"'))
    run("hooks", "uninstall", "--agent", agent)
    want = original.replace('"GitHub"', '"Dracula"').replace('"opus"', '"sonnet"')
    assert json.loads(path.read_text()) == json.loads(want)
    for line in want.splitlines()[1:-1]:
        if '"hooks"' not in line and '"env"' not in line and '"mcpServers"' not in line:
            assert line.rstrip(",") in path.read_text(), line


def test_at_most_one_backup_per_file_and_it_holds_the_pre_install_bytes(vault_path, tmp_path, monkeypatch):
    path = Path.home() / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(GEMINI_COMPACT)
    run("hooks", "install", "--agent", "gemini")
    other = tmp_path / "vault2"
    run("init", str(other))
    monkeypatch.setenv("HIVE_BRAIN_VAULT", str(other))
    assert run("hooks", "install", "--agent", "gemini")["changed"]  # another vault: a second write
    run("hooks", "uninstall", "--agent", "gemini")
    run("hooks", "install", "--agent", "gemini")
    baks = [p for p in path.parent.iterdir() if p.name != "settings.json"]
    assert len(baks) == 1 and baks[0].read_text() == GEMINI_COMPACT


def test_a_state_dir_that_is_not_the_default_is_pinned_in_every_installed_command(vault_path, tmp_path, monkeypatch):
    state = os.environ["HIVE_BRAIN_STATE_DIR"]  # the tests' own, not the default
    run("hooks", "install", "--agent", "gemini")
    data = json.loads((Path.home() / ".gemini" / "settings.json").read_text())
    command = data["hooks"]["BeforeAgent"][0]["hooks"][0]["command"]
    assert f"HIVE_BRAIN_STATE_DIR={state} " in command
    assert data["mcpServers"]["hive-brain"]["env"]["HIVE_BRAIN_STATE_DIR"] == state
    run("hooks", "install")
    claude = json.loads((Path.home() / ".claude" / "settings.json").read_text())
    assert f"HIVE_BRAIN_STATE_DIR={state} " in claude["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    run("hooks", "install", "--agent", "codex")
    assert f'HIVE_BRAIN_STATE_DIR = "{state}"' in (Path.home() / ".codex" / "config.toml").read_text()
    # The hook run without that variable in its environment still finds the state install used.
    env = {k: v for k, v in os.environ.items() if k not in ("HIVE_BRAIN_VAULT", "HIVE_BRAIN_STATE_DIR")}
    p = subprocess.run(["/bin/sh", "-c", command], input='{"prompt": "pnpm or npm?"}', capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (Path(state) / "hooks" / "status.json").is_file()
    assert not (Path.home() / ".local" / "share" / "hive-brain").exists()  # no second state dir


def test_the_default_state_dir_is_not_pinned(vault_path, monkeypatch):
    monkeypatch.delenv("HIVE_BRAIN_STATE_DIR")
    run("hooks", "install", "--agent", "gemini")
    assert "HIVE_BRAIN_STATE_DIR" not in (Path.home() / ".gemini" / "settings.json").read_text()


def test_the_agents_md_block_names_commands_not_this_machines_paths(vault_path, tmp_path):
    import sys

    target = tmp_path / "AGENTS.md"
    run("hooks", "install", "--agent", "agents-md", "--path", str(target))
    text = target.read_text()
    assert "`hive-brain mcp`" in text and "`hive-brain --vault" in text
    assert str(Path(sys.executable).parent) not in text and "/bin/hive-brain" not in text


# ---------------------------------------------------------------------------------------------- codex hooks
def test_codex_hooks_go_beside_the_users_and_are_trusted_where_they_sit(vault_path):
    import tomllib

    from hive_brain.agents.codex import trusted_hash

    folder = Path.home() / ".codex"
    folder.mkdir()
    user_hooks = '{\n  "hooks": {\n    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "./scan.sh"}]}]\n  }\n}\n'
    (folder / "hooks.json").write_text(user_hooks)
    (folder / "config.toml").write_text('model = "gpt-5"\n')
    run("hooks", "install", "--agent", "codex")
    hooks = json.loads((folder / "hooks.json").read_text())["hooks"]
    assert hooks["UserPromptSubmit"][0] == {"hooks": [{"type": "command", "command": "./scan.sh"}]}
    ours = hooks["UserPromptSubmit"][1]
    assert "matcher" not in ours and ours["hooks"][0]["command"].endswith(" hook prompt")
    assert set(hooks) == {"UserPromptSubmit", "SessionStart", "Stop"}
    cfg = tomllib.loads((folder / "config.toml").read_text())
    state = cfg["hooks"]["state"]
    # Keyed by where each entry sits (ours is the second UserPromptSubmit group), hashed as Codex does.
    key = f"{folder / 'hooks.json'}:user_prompt_submit:1:0"
    assert state[key]["trusted_hash"] == trusted_hash("user_prompt_submit", ours, ours["hooks"][0])
    assert f"{folder / 'hooks.json'}:session_start:0:0" in state and len(state) == 3
    assert cfg["model"] == "gpt-5" and cfg["mcp_servers"]["hive-brain"]["args"][-1] == "mcp"
    st = run("hooks", "status")["codex"]
    assert set(st["events"]) == {"UserPromptSubmit", "SessionStart", "Stop"} and st["mcpServer"]
    run("hooks", "uninstall", "--agent", "codex")
    assert (folder / "hooks.json").read_text() == user_hooks and (folder / "config.toml").read_text() == 'model = "gpt-5"\n'


def test_what_codex_writes_inside_our_block_survives_reinstall_and_uninstall(vault_path):
    """Codex edits config.toml with a TOML editor that keeps the file's last comment last, so a table it
    adds lands between our last table and our end marker (seen in the interactive e2e run: ``[tui]
    screen_reader_detection_done = true``); reinstall and uninstall dropped it with our block."""
    import tomllib

    from hive_brain.agents.install import CODEX_END

    folder = Path.home() / ".codex"
    folder.mkdir()
    (folder / "hooks.json").write_text('{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", '
                                       '"command": "./scan.sh"}]}]}}\n')
    (folder / "config.toml").write_text('model = "gpt-5"\n')
    run("hooks", "install", "--agent", "codex")
    cfg = folder / "config.toml"
    users_trust = f'[hooks.state."{folder / "hooks.json"}:user_prompt_submit:0:0"]\ntrusted_hash = "sha256:abc"\n'
    codex_wrote = "[tui]\nscreen_reader_detection_done = true\n" + users_trust
    cfg.write_text(cfg.read_text().replace(CODEX_END, codex_wrote + CODEX_END))
    run("hooks", "install", "--agent", "codex")  # again: a new credential, a moved hook...
    after = tomllib.loads(cfg.read_text())
    assert after["tui"] == {"screen_reader_detection_done": True}
    assert after["hooks"]["state"][f"{folder / 'hooks.json'}:user_prompt_submit:0:0"] == {"trusted_hash": "sha256:abc"}
    assert after["mcp_servers"]["hive-brain"]["args"][-1] == "mcp" and len(after["hooks"]["state"]) == 4
    run("hooks", "uninstall", "--agent", "codex")
    left = tomllib.loads(cfg.read_text())
    assert left == {"model": "gpt-5", "tui": {"screen_reader_detection_done": True},
                    "hooks": {"state": {f"{folder / 'hooks.json'}:user_prompt_submit:0:0": {"trusted_hash": "sha256:abc"}}}}


def test_codex_trust_hash_is_codexs_own():
    from hive_brain.agents.codex import trusted_hash

    # Codex 0.171's sha256 over the sorted compact JSON of {event_name, hooks: [normalised handler]}:
    # this hash is what the real CLI accepted for this hook (tests/test_agents_e2e.py runs it).
    handler = {"type": "command", "command": "/tmp/hook.sh SessionStart", "timeout": 3}
    assert trusted_hash("session_start", {"hooks": [handler]}, handler) == (
        "sha256:" + __import__("hashlib").sha256(
            b'{"event_name":"session_start","hooks":[{"async":false,"command":"/tmp/hook.sh SessionStart",'
            b'"timeout":3,"type":"command"}]}').hexdigest()
    )


# ---------------------------------------------------------------------------------------------- the first session
def test_install_says_plainly_when_the_first_prompts_will_be_lexical(vault_path):
    res = run("hooks", "install", "--agent", "gemini")  # the tests' default: autostart off
    assert res["serverReady"] is False and "lexical" in res["serverNote"]
    res = CliRunner().invoke(main, ["hooks", "install", "--agent", "gemini"], catch_exceptions=False)
    assert res.exit_code == 0 and "lexical memory only" in res.output


def test_install_waits_for_the_server_so_the_first_session_is_hybrid(vault_path, monkeypatch):
    import sys

    monkeypatch.setenv("HIVE_BRAIN_AUTOSTART", "1")
    try:
        res = run("hooks", "install", "--agent", "gemini", "--wait", "60")
        assert res["serverStarted"] and res["serverReady"] and res["serverNote"] is None
        # Ready means the next prompt is answered by the server, not lexically in the hook.
        assert run("answer", "--hook", "anything at all")["mode"] in ("hybrid", "lexical-server")
    finally:
        subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--stop"], capture_output=True, timeout=60)


# A Cline task history as Cline stores it (the Anthropic messages it sent): the task wrapped in <task>,
# environment details and tool results in the user turns, thinking and tool XML in the assistant's.
CLINE_HISTORY = [
    {"role": "user", "content": [
        {"type": "text", "text": "<task>\nRename the nightly cron job to backup-db; key sk-ant-api03-" + "x" * 40 + "\n</task>"},
        {"type": "text", "text": "<environment_details>\n# Current Working Directory\n/w/ops\n</environment_details>"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "<thinking>Find the crontab.</thinking>\n<read_file><path>crontab</path></read_file>"}]},
    {"role": "user", "content": [{"type": "text", "text": "[read_file for 'crontab'] Result:"}, {"type": "text", "text": "0 3 * * * nightly"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "<attempt_completion>\n<result>\nRenamed it to backup-db.\n</result>\n</attempt_completion>"}]},
]


def test_a_finished_cline_task_becomes_a_redacted_note(with_memory, tmp_path):
    run("hooks", "install", "--agent", "cline")
    task = Path.home() / ".cline" / "data" / "tasks" / "1733160000000"
    task.mkdir(parents=True)
    (task / "api_conversation_history.json").write_text(json.dumps(CLINE_HISTORY))
    hook = (Path.home() / "Documents" / "Cline" / "Hooks" / "TaskComplete").read_text().splitlines()[-1]
    out = sh(hook, {"clineVersion": "3.36.0", "hookName": "TaskComplete", "timestamp": "1733160001000",
                    "taskId": "1733160000000", "workspaceRoots": [str(tmp_path)], "userId": "u", "taskComplete": {}},
             tmp_path)
    assert out == {"cancel": False}
    notes = list((with_memory / "Memory" / "Conversations" / "cline").glob("*.md"))
    assert len(notes) == 1
    text = notes[0].read_text()
    assert "Rename the nightly cron job to backup-db" in text and "**Assistant:** Renamed it to backup-db." in text
    assert "sk-ant-api03-" not in text and "environment_details" not in text and "Result:" not in text
    assert "<thinking>" not in text and "read_file" not in text
