"""Every hook-capable agent, run as its users run it: the real CLI from npm, its hooks installed by
`hive-brain hooks install` into a fresh HOME, one non-interactive session each (and the interactive
interfaces of Claude Code, Codex and Gemini CLI once each, on a pseudo-terminal, typed into and
left with `/exit` or `/quit`), and a loopback
stand-in of its model API (tests/standins.py) that records what the agent sent the model.

Asserted on those request bodies: the core memory from session start, the right memory inside
``<hive-brain-recall>`` for an on-topic prompt, no recall for an off-topic one; and on the vault:
the session's conversation is a redacted note once the session has ended. And MCP: the stand-in
model calls hive-brain's recall tool by the name the CLI offered it under; the CLI runs it through
`hive-brain mcp` as installed, and the result it sends back holds the memory (none off topic).

The CLIs are installed by `.ci/run` (pinned versions, below) into ~/.cache/hive-brain-e2e, outside
the repository (``HIVE_BRAIN_E2E_DIR`` moves it); without them these tests skip and say how to get
them. Only 127.0.0.1 is contacted; every agent process runs under a timeout.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hive_brain.search.answer import FRAME_CLOSE, FRAME_OPEN
from tests.helpers import remember, run
from tests.standins import StandIn

# The versions CI installs and these tests were written against (.ci/run reads this table).
VERSIONS = {
    "claude": ("@anthropic-ai/claude-code", "2.1.332"),
    "codex": ("@openai/codex", "0.171.0"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
}
E2E_DIR = Path(os.environ.get("HIVE_BRAIN_E2E_DIR") or "~/.cache/hive-brain-e2e").expanduser()
RUN_TIMEOUT = 120

CORE = "I am Ana, a backend developer who works in Go."
FACT = "Billing service deploys happen only on Tuesdays after 14:00, through the blue-green pipeline."
TOKEN = "ghp_" + "A" * 36  # a GitHub token's shape: redacted from the conversation note
ON_TOPIC = "When may I deploy the billing service?"
OFF_TOPIC = f"What is the capital of France? My token is {TOKEN}"


def cli(name: str) -> Path:
    exe = E2E_DIR / "node_modules" / ".bin" / name
    if not exe.exists():
        package, version = VERSIONS[name]
        pytest.skip(
            f"{package} is not installed in {E2E_DIR} (npm unreachable?): "
            f"`npm install --prefix {E2E_DIR} {package}@{version}` or run .ci/run"
        )
    return exe


@pytest.fixture
def vault(vault_path):
    from hive_brain.engine import Engine

    (vault_path / "Memory" / "Core Memory.md").write_text(
        f"---\ntitle: Core Memory\ntype: core\n---\n\n# Core Memory\n\n## About me\n- {CORE}\n", encoding="utf-8"
    )
    remember("Billing deploy window", FACT, "lesson")
    remember("Lunch spot", "The team eats lunch at the ramen place on Fridays.", "fact")
    Engine.open().rebuild(embed=False)
    return vault_path


def agent_env(standin: StandIn, **extra: str) -> dict[str, str]:
    """The agent's environment: the tests' HOME, no vault or state dir (the hooks pin both), no proxy."""
    drop = ("HIVE_BRAIN_VAULT", "HIVE_BRAIN_STATE_DIR", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
            "ALL_PROXY", "all_proxy", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{E2E_DIR / 'node_modules' / '.bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


def session(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    p = subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"{argv[0]} exited {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p


def sent(standin: StandIn) -> str:
    """Everything the agent sent the model in this session, as one text."""
    calls = standin.model_calls()
    assert calls, f"the agent never asked the model: {[r['path'] for r in standin.requests]}"
    return "\n".join(json.dumps(c["body"], ensure_ascii=False) for c in calls)


def unescaped(text: str) -> str:
    """Gemini CLI sends a hook's additionalContext HTML-escaped (``&lt;hive-brain-recall&gt;``, a quote
    line's ``&gt; ``): the same frame to the model, spelled as HTML entities."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def recall_block(text: str) -> str:
    """The framed recall the model was sent (JSON-escaped text), or ""."""
    text = unescaped(text)
    i = text.find(FRAME_OPEN)
    return "" if i < 0 else text[i : text.find(FRAME_CLOSE, i) + len(FRAME_CLOSE)]


def hook_runs() -> list[dict]:
    status = Path(os.environ["HIVE_BRAIN_STATE_DIR"]) / "hooks" / "status.json"
    return json.loads(status.read_text()).get("runs", [])[-8:] if status.exists() else []


def assert_memory_sent(on: str, off: str) -> None:
    assert CORE in on and CORE in off  # core memory at every session start
    block = recall_block(on)
    assert block, f"no recall framed as data in the on-topic session; the hooks' last runs: {hook_runs()}"
    assert "\\n> Billing service deploys happen only on Tuesdays after 14:00" in block  # quoted, inside the frame
    assert "ramen" not in block
    assert FRAME_OPEN not in unescaped(off) and "Tuesdays" not in off  # nothing for an off-topic prompt


def conversation_notes(vault: Path, agent: str) -> list[str]:
    folder = vault / "Memory" / "Conversations" / agent
    return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))] if folder.is_dir() else []


def assert_captured(vault: Path, agent: str) -> None:
    notes = conversation_notes(vault, agent)
    on = [n for n in notes if ON_TOPIC in n]
    off = [n for n in notes if "capital of France" in n]
    assert len(on) == 1 and len(off) == 1, f"not one conversation note per {agent} session: {notes}"
    assert TOKEN not in off[0] and "redactions: 1" in off[0]  # the token is gone
    for note in on + off:
        assert "**Assistant:** " + StandIn.ANSWER_TEXT in note
        assert FRAME_OPEN not in note and CORE not in note  # what the hooks added is not the user's words


# ---------------------------------------------------------------------------------------------- claude code
def test_claude_code_gets_memory_and_its_sessions_become_notes(vault, tmp_path):
    claude = cli("claude")
    run("hooks", "install", "--agent", "claude-code")
    project = tmp_path / "webapp"
    project.mkdir()
    texts = []
    for prompt in (ON_TOPIC, OFF_TOPIC):
        with StandIn("anthropic") as api:
            env = agent_env(api, ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-standin",
                            DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                            DISABLE_AUTOUPDATER="1")
            p = session([claude, "-p", prompt], env, project)
            assert StandIn.ANSWER_TEXT in p.stdout
            texts.append(sent(api))
    assert_memory_sent(*texts)
    assert_captured(vault, "claude-code")  # `claude -p` too: its Stop hook captures


# ---------------------------------------------------------------------------------------------- interactive
# Escape sequences a terminal interface writes: CSI (cursor moves, colours), OSC (titles, links),
# DCS/APC strings, and the two-byte ones.
_ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]")


class Terminal:
    """An agent's interactive interface on a pseudo-terminal, as a user's terminal runs it: its own
    session and process group (killed at the end, whatever is left), a 120x40 window, keys typed."""

    def __init__(self, argv: list[str | Path], env: dict[str, str], cwd: Path) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.fd, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        # A user's terminal, not a CI job's: Gemini CLI's ink UI (is-in-ci) turns non-interactive when
        # CI, CONTINUOUS_INTEGRATION or any CI_* is set, answers once and exits (the CI run had CI set).
        env = {k: v for k, v in env.items()
               if k not in ("CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS") and not k.startswith("CI_")}
        self.proc = subprocess.Popen([str(a) for a in argv], env={**env, "TERM": "xterm-256color"}, cwd=cwd,
                                     stdin=child, stdout=child, stderr=child, start_new_session=True)
        os.close(child)
        self.raw = b""

    def screen(self, since: int = 0) -> str:
        """What was drawn since byte ``since``, escapes and all whitespace taken out: a TUI moves the
        cursor over a blank instead of writing a space, so words run together anyway."""
        text = _ESCAPES.sub(b"", self.raw[since:]).decode("utf-8", "replace")
        return "".join(text.split())

    def pump(self, seconds: float) -> bool:
        """Read what the interface draws for up to ``seconds``; False once the terminal closed."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if not select.select([self.fd], [], [], min(left, 0.1))[0]:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: every process on the terminal is gone
                return False
            if not data:
                return False
            self.raw += data
        return True

    def wait_for(self, what: str, done: Callable[[], bool], timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < end and self.proc.poll() is None, (
                f"{what}: not within {timeout:.0f} s (exit {self.proc.poll()}); on screen:\n{self.screen()[-1500:]}")
            self.pump(0.2)

    def type(self, text: str) -> None:
        """Type ``text`` key by key and press Enter a moment later (sent at once, a TUI takes the
        keys for a paste, and Enter with them for a newline in it)."""
        for ch in text:
            os.write(self.fd, ch.encode())
            self.pump(0.02)
        self.pump(0.5)
        os.write(self.fd, b"\r")

    def wait_exit(self, timeout: float = 30) -> int:
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            if not self.pump(0.2):
                time.sleep(0.1)
        assert self.proc.poll() is not None, f"still running {timeout:.0f} s after exit; on screen:\n{self.screen()[-1500:]}"
        return self.proc.returncode

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # what the agent started too (hooks, MCP servers)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        os.close(self.fd)


def squeezed(text: str) -> str:
    return "".join(text.split())


def assert_recalled(text: str) -> None:
    """The on-topic memory, quoted inside the recall frame, and nothing off topic with it."""
    block = recall_block(text)
    assert "\\n> Billing service deploys happen only on Tuesdays after 14:00" in block, hook_runs()
    assert "ramen" not in block


def assert_one_note_of_both_turns(notes: list[str]) -> None:
    """An interactive session of the two prompts: one note (the second turn updated it), redacted."""
    assert len(notes) == 1, notes
    note = notes[0]
    assert ON_TOPIC in note and "capital of France" in note and "turns: 2" in note, note
    assert TOKEN not in note and "redactions: 1" in note
    assert note.count("**Assistant:** " + StandIn.ANSWER_TEXT) == 2
    assert FRAME_OPEN not in note and CORE not in note


def test_claude_code_interactive_session_gets_memory_and_becomes_a_note(vault, tmp_path):
    """`claude` as users run it, on a terminal: two prompts typed, the answers drawn, then `/exit` at
    once. The model got the memory for the on-topic prompt; after the session one redacted note holds
    both turns. Before SessionEnd was installed, half of these runs lost the last turn: `/exit` killed
    its Stop hook midway."""
    claude = cli("claude")
    run("hooks", "install", "--agent", "claude-code")
    project = tmp_path / "webapp"
    project.mkdir()
    # What the first-run dialogs leave in ~/.claude.json: onboarding done (else it first checks it can
    # reach api.anthropic.com), the folder trusted, the API key from the environment approved.
    (Path.home() / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark",
        "customApiKeyResponses": {"approved": ["sk-ant-standin"[-20:]], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }), encoding="utf-8")
    with StandIn("anthropic") as api:
        env = agent_env(api, ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-standin",
                        DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                        DISABLE_AUTOUPDATER="1")
        term = Terminal([claude], env, project)
        try:
            term.wait_for("the prompt box", lambda: "❯" in term.screen())
            for n, prompt in enumerate((ON_TOPIC, OFF_TOPIC), 1):
                mark = len(term.raw)
                term.type(prompt)
                term.wait_for(f"the answer to prompt {n} drawn",
                              lambda mark=mark: squeezed(StandIn.ANSWER_TEXT) in term.screen(mark), timeout=RUN_TIMEOUT)
            first = json.dumps(api.model_calls()[0]["body"], ensure_ascii=False)
            term.type("/exit")
            assert term.wait_exit() == 0, term.screen()[-1500:]
        finally:
            term.close()
    assert CORE in first and ON_TOPIC in first
    assert_recalled(first)
    assert_one_note_of_both_turns(conversation_notes(vault, "claude-code"))
    # The first turn's Stop captured it; the last turn's Stop may still be running at `/exit` (Claude
    # Code then kills it): the SessionEnd hook, run on the way out, saw to it.
    runs = hook_runs()
    assert [r["mode"] for r in runs if r["event"] == "stop"][:1] == ["captured"], runs
    assert [r["mode"] for r in runs if r["event"] == "session-end"] in (["updated"], ["already"]), runs


# ---------------------------------------------------------------------------------------------- codex
# What Codex 0.171 reaches for besides the model, each switched off (seen with strace on the TUI): the
# update check (api.github.com), analytics (ab.chatgpt.com), the plugin marketplace (`git ls-remote
# https://github.com/openai/plugins.git`), ChatGPT apps (chatgpt.com) and the daemon's in-app updates.
CODEX_OFFLINE = ("check_for_update_on_startup = false\nanalytics.enabled = false\nfeatures.plugins = false\n"
                 "features.remote_plugin = false\nfeatures.apps = false\nfeatures.in_app_updates = false\n"
                 "tui.show_tooltips = false\n")


def codex_config(home: Path, url: str) -> None:
    """Codex pointed at the stand-in: a model provider of ours, HTTP streaming (no WebSocket)."""
    cfg = home / ".codex" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(
        CODEX_OFFLINE +
        'model = "gpt-standin"\nmodel_provider = "standin"\n\n[model_providers.standin]\nname = "standin"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "OPENAI_API_KEY"\nsupports_websockets = false\n',
        encoding="utf-8",
    )


def test_codex_gets_memory_and_its_sessions_become_notes(vault, tmp_path):
    codex = cli("codex")
    project = tmp_path / "webapp"
    project.mkdir()
    texts = []
    for prompt in (ON_TOPIC, OFF_TOPIC):
        with StandIn("openai") as api:
            codex_config(Path.home(), api.url)  # the user's own settings; install keeps them
            run("hooks", "install", "--agent", "codex")
            env = agent_env(api, OPENAI_API_KEY="sk-standin")
            # No --dangerously-bypass-hook-trust: the trust install recorded is what lets the hooks run.
            p = session([codex, "exec", "--skip-git-repo-check", prompt], env, project)
            assert StandIn.ANSWER_TEXT in p.stdout
            texts.append(sent(api))
    assert_memory_sent(*texts)
    assert_captured(vault, "codex")  # its Stop hook, after the turn


def codex_after(calls: list[dict], prompt: str) -> str:
    """What Codex sent the model after the user's ``prompt`` in the turn that asked it: the items that
    follow that user message in the first call whose input holds it (a hook's context is an item of
    its own). Later calls carry the whole conversation, earlier turns' recall included."""
    for c in calls:
        items = c["body"].get("input") or []
        for i, it in enumerate(items):
            if it.get("role") == "user" and any(x.get("text") == prompt for x in it.get("content") or []):
                return json.dumps(items[i + 1:], ensure_ascii=False)
    raise AssertionError(f"no model call holds the prompt {prompt!r}")


def codex_daemon_stop(codex: Path, env: dict[str, str]) -> None:
    """Stop the app-server daemon the TUI started (it outlives the TUI, in a session of its own), and
    its `pid-update-loop`, which `daemon stop` leaves running: both run from the copy of Codex the TUI
    put under ~/.codex/packages, found by that path and killed by pid; then that copy (≈390 MB) goes."""
    import shutil

    try:
        subprocess.run([str(codex), "app-server", "daemon", "stop"], env=env, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        pass  # what is left of it is killed below
    packages = str(Path.home() / ".codex" / "packages") + "/"
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().startswith(packages.encode()):
                    os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(packages, ignore_errors=True)


def test_codex_interactive_session_gets_memory_and_becomes_a_note(vault, tmp_path):
    """`codex` as users run it, on a terminal: two prompts typed, each turn left to finish, then
    `/quit`. The TUI starts Codex's app-server daemon (its default), which runs the turns and the
    hooks; the model got the memory for the on-topic prompt only; the Stop hook after each turn made
    one redacted note of both turns, there when the TUI has exited."""
    codex = cli("codex")
    project = tmp_path / "webapp"
    project.mkdir()
    with StandIn("openai") as api:
        codex_config(Path.home(), api.url)
        run("hooks", "install", "--agent", "codex")
        # The announcement tip is fetched from raw.githubusercontent.com whatever the config says: any
        # request that is not to 127.0.0.1 goes to a proxy on a closed loopback port and fails there.
        dead_end = "http://127.0.0.1:9"
        env = agent_env(api, OPENAI_API_KEY="sk-standin", HTTPS_PROXY=dead_end, HTTP_PROXY=dead_end,
                        https_proxy=dead_end, http_proxy=dead_end)
        term = Terminal([codex], env, project)
        try:
            # Ready: the composer drawn, then the start-up work (the daemon, the MCP server) over. An
            # Enter pressed while the window's state is still "working" is dropped, prompt left typed.
            states = lambda: re.findall(rb"\x1b\]7501;state=(\w+)", term.raw)  # noqa: E731
            term.wait_for("the composer, idle", lambda: "AskCodex" in term.screen()
                          and b"working" in states() and states()[-1] == b"idle")
            for n, prompt in enumerate((ON_TOPIC, OFF_TOPIC), 1):
                mark = len(term.raw)
                term.type(prompt)
                # "Worked for Ns" closes a turn, after its Stop hook.
                term.wait_for(f"turn {n} answered and over", lambda mark=mark: squeezed(StandIn.ANSWER_TEXT)
                              in term.screen(mark) and "Workedfor" in term.screen(mark), timeout=RUN_TIMEOUT)
            term.type("/quit")
            assert term.wait_exit() == 0, term.screen()[-1500:]
            notes = conversation_notes(vault, "codex")  # at once: nothing is left to finish after exit
        finally:
            term.close()
            codex_daemon_stop(codex, env)
        calls = api.model_calls()
    on, off = codex_after(calls, ON_TOPIC), codex_after(calls, OFF_TOPIC)
    texts = [json.dumps(c["body"], ensure_ascii=False) for c in calls]
    assert any(CORE in t and ON_TOPIC in t for t in texts)  # the core memory from session start
    assert_recalled(on)
    assert FRAME_OPEN not in off and "Tuesdays" not in off, off  # nothing added to the off-topic turn
    assert_one_note_of_both_turns(notes)
    runs = hook_runs()
    assert [r["mode"] for r in runs if r["event"] == "stop"] == ["captured", "updated"], runs


# ---------------------------------------------------------------------------------------------- gemini
def _gemini_installed(tmp_path: Path) -> tuple[Path, Path]:
    """Gemini CLI with API-key auth, hive-brain's hooks and MCP entry installed, and a project folder."""
    gemini = cli("gemini")
    settings = Path.home() / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    # Off: usage statistics (play.googleapis.com) and the update check (registry.npmjs.org).
    settings.write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    }) + "\n", encoding="utf-8")
    run("hooks", "install", "--agent", "gemini")
    project = tmp_path / "webapp"
    project.mkdir()
    return gemini, project


def test_gemini_cli_gets_memory_and_its_sessions_become_notes(vault, tmp_path):
    gemini, project = _gemini_installed(tmp_path)
    texts = []
    for prompt in (ON_TOPIC, OFF_TOPIC):
        with StandIn("gemini") as api:
            env = agent_env(api, GOOGLE_GEMINI_BASE_URL=api.url, GEMINI_API_KEY="standin-key",
                            GEMINI_CLI_TRUST_WORKSPACE="true")
            # A model named: no routing call to a classifier model first.
            p = session([gemini, "-m", "gemini-2.5-flash", "-p", prompt], env, project)
            assert StandIn.ANSWER_TEXT in p.stdout
            texts.append(sent(api))
    assert_memory_sent(*texts)
    assert_captured(vault, "gemini")  # its AfterAgent hook, after the turn


def gemini_after(calls: list[dict], prompt: str) -> str:
    """What Gemini CLI sent the model after the user's ``prompt`` in the turn that asked it: the parts
    after the prompt's own in its content (a BeforeAgent hook's context is a part of its own), and
    any content after that, in the first call that holds it."""
    for c in calls:
        contents = c["body"].get("contents") or []
        for i, content in enumerate(contents):
            parts = content.get("parts") or []
            for j, part in enumerate(parts):
                if part.get("text") == prompt:
                    return json.dumps([parts[j + 1:], contents[i + 1:]], ensure_ascii=False)
    raise AssertionError(f"no model call holds the prompt {prompt!r}")


def test_gemini_cli_interactive_session_gets_memory_and_becomes_a_note(vault, tmp_path):
    """`gemini` as users run it, on a terminal: two prompts typed, each turn left to finish (its
    AfterAgent hook included), then `/quit` typed. The model got the memory for the on-topic prompt
    only; the AfterAgent hook after each turn made one redacted note of both turns."""
    gemini, project = _gemini_installed(tmp_path)
    with StandIn("gemini") as api:
        env = agent_env(api, GOOGLE_GEMINI_BASE_URL=api.url, GEMINI_API_KEY="standin-key",
                        GEMINI_CLI_TRUST_WORKSPACE="true")
        term = Terminal([gemini, "-m", "gemini-2.5-flash"], env, project)
        try:
            term.wait_for("the prompt box, hive-brain's MCP server connected",
                          lambda: "Typeyourmessage" in term.screen() and "1MCPserver" in term.screen())
            for n, prompt in enumerate((ON_TOPIC, OFF_TOPIC), 1):
                mark = len(term.raw)
                term.type(prompt)
                # Over once its AfterAgent hook has run: `/quit` typed while that hook runs is refused
                # ("Slash commands cannot be queued").
                term.wait_for(f"turn {n} answered and its AfterAgent hook run", lambda mark=mark, n=n:
                              squeezed(StandIn.ANSWER_TEXT) in term.screen(mark)
                              and len([r for r in hook_runs() if r["event"] == "stop"]) == n, timeout=RUN_TIMEOUT)
            term.pump(0.5)
            term.type("/quit")
            assert term.wait_exit() == 0, term.screen()[-1500:]
        finally:
            term.close()
        calls = api.model_calls()
    on, off = unescaped(gemini_after(calls, ON_TOPIC)), unescaped(gemini_after(calls, OFF_TOPIC))
    assert any(CORE in json.dumps(c["body"], ensure_ascii=False) for c in calls)
    assert_recalled(on)
    assert FRAME_OPEN not in off and "Tuesdays" not in off, off
    assert_one_note_of_both_turns(conversation_notes(vault, "gemini"))
    runs = hook_runs()
    assert [r["mode"] for r in runs if r["event"] == "stop"] == ["captured", "updated"], runs


# ---------------------------------------------------------------------------------------------- mcp
CLAUDE_RECALL = "mcp__hive-brain__recall"  # Claude Code's name for an MCP tool: mcp__<server>__<tool>


def tool_results(body: dict) -> list[str]:
    """The text of every ``tool_result`` block the agent sent back to the model."""
    out = []
    for m in body.get("messages") or []:
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                c = b.get("content")
                out.append(c if isinstance(c, str) else "".join(x.get("text", "") for x in c or []))
    return out


def test_claude_code_runs_the_mcp_recall_tool(vault, tmp_path):
    """The model calls hive-brain's recall through MCP; Claude Code runs `hive-brain mcp` as registered
    by the command `hooks install` prints, and sends the hits back to the model as data (JSON)."""
    import shlex

    from tests.standins import tool_names

    claude = cli("claude")
    project = tmp_path / "webapp"
    project.mkdir()
    hint = run("hooks", "install", "--agent", "claude-code")["hint"]
    add = shlex.split(hint.split("run: ", 1)[1])
    assert add[:3] == ["claude", "mcp", "add"], hint
    results = []
    for question in ("billing service deploy day", "capital of France"):
        with StandIn("anthropic", tool_call=(CLAUDE_RECALL, {"query": question})) as api:
            env = agent_env(api, ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-standin",
                            DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                            DISABLE_AUTOUPDATER="1", ENABLE_TOOL_SEARCH="false", MCP_CONNECTION_NONBLOCKING="false")
            # ENABLE_TOOL_SEARCH=false: MCP tools in the request's `tools` list, not deferred behind
            # Claude Code's ToolSearch (which a one-call stand-in model would have to drive first).
            # MCP_CONNECTION_NONBLOCKING=false: `claude -p` waits for `hive-brain mcp` to connect; by
            # default it does not, and now and then the first model call went out offering no MCP tool.
            if not results:
                session([claude, *add[1:]], env, project)  # as the user runs it: `claude mcp add ...`
            p = session([claude, "-p", "Look it up in memory.", "--allowedTools", CLAUDE_RECALL], env, project)
            calls = api.model_calls()
            offered = sorted({n for c in calls for n in tool_names(c["body"]) if n.startswith("mcp__")})
            assert api.tool_called, f"no model call offered {CLAUDE_RECALL}; MCP tools offered: {offered}"
            back = [r for c in calls for r in tool_results(c["body"])]
            assert len(back) == 1, f"not one tool result sent back: {back}\n{p.stdout[-1000:]}"
            assert StandIn.ANSWER_TEXT in p.stdout  # the model's answer after the tool result
            results.append(json.loads(back[0]))
    on, off = results
    assert any(FACT in h["text"] for h in on["hits"]), on  # the memory, a JSON string field: data
    assert on["hits"][0]["title"] == "Billing deploy window", on  # the right memory first
    assert off["hits"] == [] and off["abstained"], off  # nothing found for an off-topic question


def function_call_outputs(body: dict) -> list[str]:
    """The tool's own text in every ``function_call_output`` item the agent sent back (OpenAI
    Responses). Codex sends an MCP result as content parts, a "Wall time: ...\nOutput:" part first."""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    out = []
    for it in items:
        if isinstance(it, dict) and it.get("type") == "function_call_output":
            o = it.get("output")
            out.append(o if isinstance(o, str) else (o or [{}])[-1].get("text", ""))
    return out


CODEX_RECALL = "mcp__hive_brain.recall"  # Codex offers an MCP server as a namespace tool, `-` made `_`


def test_codex_runs_the_mcp_recall_tool(vault, tmp_path):
    """The model calls hive-brain's recall through MCP; Codex runs `hive-brain mcp` from the
    ``[mcp_servers.hive-brain]`` table `hooks install --agent codex` wrote, and sends the hits back."""
    from tests.standins import tool_names

    codex = cli("codex")
    project = tmp_path / "webapp"
    project.mkdir()
    results = []
    for question in ("billing service deploy day", "capital of France"):
        with StandIn("openai", tool_call=(CODEX_RECALL, {"query": question})) as api:
            codex_config(Path.home(), api.url)
            run("hooks", "install", "--agent", "codex")
            env = agent_env(api, OPENAI_API_KEY="sk-standin")
            # required: `codex exec` waits for the server's start; without it the first model call
            # sometimes went out before `hive-brain mcp` was up, offering none of its tools.
            p = session([codex, "exec", "--skip-git-repo-check", "-c", "mcp_servers.hive-brain.required=true",
                         "Look it up in memory."], env, project)
            calls = api.model_calls()
            offered = sorted({n for c in calls for n in tool_names(c["body"]) if n.startswith("mcp__")})
            assert api.tool_called, f"no model call offered {CODEX_RECALL}; tools offered: {offered}"
            back = [r for c in calls for r in function_call_outputs(c["body"])]
            assert len(back) == 1, f"not one tool result sent back: {back}\n{p.stdout[-1000:]}"
            assert StandIn.ANSWER_TEXT in p.stdout
            results.append(json.loads(back[0]))
    on, off = results
    assert on["hits"][0]["title"] == "Billing deploy window" and FACT in on["hits"][0]["text"], on
    assert off["hits"] == [] and off["abstained"], off



GEMINI_RECALL = "mcp_hive-brain_recall"  # Gemini CLI's name for an MCP tool: mcp_<server>_<tool>


def function_responses(body: dict) -> list[dict]:
    """The ``response`` of every ``functionResponse`` part the agent sent back (Gemini)."""
    return [p["functionResponse"].get("response") or {} for c in body.get("contents") or []
            for p in c.get("parts") or [] if isinstance(p, dict) and "functionResponse" in p]


def test_gemini_cli_runs_the_mcp_recall_tool(vault, tmp_path):
    """The model calls hive-brain's recall through MCP; Gemini CLI runs `hive-brain mcp` from the
    ``mcpServers`` entry `hooks install --agent gemini` wrote, and sends the hits back."""
    from tests.standins import tool_names

    gemini, project = _gemini_installed(tmp_path)
    results = []
    for question in ("billing service deploy day", "capital of France"):
        with StandIn("gemini", tool_call=(GEMINI_RECALL, {"query": question})) as api:
            env = agent_env(api, GOOGLE_GEMINI_BASE_URL=api.url, GEMINI_API_KEY="standin-key",
                            GEMINI_CLI_TRUST_WORKSPACE="true")
            # `-p` offers only tools that need no confirmation: --allowed-tools names ours.
            p = session([gemini, "-m", "gemini-2.5-flash", "--allowed-tools", GEMINI_RECALL,
                         "-p", "Look it up in memory."], env, project)
            calls = api.model_calls()
            offered = sorted({n for c in calls for n in tool_names(c["body"]) if n.startswith("mcp_")})
            assert api.tool_called, f"no model call offered {GEMINI_RECALL}; MCP tools offered: {offered}"
            back = [r for c in calls for r in function_responses(c["body"])]
            assert len(back) == 1, f"not one tool result sent back: {back}\n{p.stdout[-1000:]}"
            assert StandIn.ANSWER_TEXT in p.stdout
            out = back[0].get("output", "")
            # Gemini CLI frames an MCP tool's output as data itself: <untrusted_context>...</untrusted_context>.
            assert out.startswith("<untrusted_context>\n") and out.endswith("\n</untrusted_context>"), out
            results.append(json.loads(out.split("\n", 1)[1].rsplit("\n", 1)[0]))
    on, off = results
    assert on["hits"][0]["title"] == "Billing deploy window" and FACT in on["hits"][0]["text"], on
    assert off["hits"] == [] and off["abstained"], off
