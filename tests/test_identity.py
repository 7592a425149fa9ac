"""Identity outside and inside enforcement mode: who may open what by id, and what browse shows."""

from __future__ import annotations

from tests.helpers import cli_as, remember, run


def _private(agent: str, title: str, content: str) -> dict:
    return remember(title, content, "lesson", agent=agent)


def test_get_by_id_without_agent_never_opens_private_memory(vault_path):
    """docs/architecture.md: reading other agents' private memory is never implied by a missing id."""
    mine = _private("a", "Deploy secret place", "Agent a keeps the deploy notes in the red folder.")
    res = run("get", "--memory-id", mine["id"], ok=False)
    assert res["_exit"] != 0 and res["error"] == "NotFound", res
    assert "red folder" not in str(res)
    # The agent itself still opens it; another agent does not.
    assert "red folder" in cli_as("get", "--memory-id", mine["id"], agent="a")["content"]
    assert cli_as("get", "--memory-id", mine["id"], agent="b", ok=False)["error"] == "NotFound"
    # Nor may the owner change it by id.
    res = run("update", "--memory-id", mine["id"], "--tags", "x", ok=False)
    assert res["error"] == "NotFound"


def test_browse_cache_is_per_reader(vault_path):
    """After agent a browses, agent b and the owner must not see a's private paths or titles."""
    _private("a", "Zebra migration plan", "Agent a alone plans the zebra migration for Friday.")
    remember("Shared deploy day", "We deploy on Tuesdays.", "fact")
    a_view = cli_as("browse", "--detail", "overview", agent="a")
    assert "Zebra" in a_view["summary"]
    for who in ("b", None):
        other = cli_as("browse", "--detail", "overview", agent=who)
        assert "Zebra" not in str(other) and "zebra" not in str(other), (who, other)
        assert "Shared deploy day" in other["summary"]
    # The cache holds nothing a later reader of another identity could pick up either.
    again = cli_as("browse", "--detail", "overview", agent="a")
    assert "Zebra" in again["summary"]


def test_an_agents_shell_without_an_id_is_that_agent(vault_path, monkeypatch):
    """Inside Claude Code's Bash tool (CLAUDECODE=1, no HIVE_AGENT_ID) a write is claude-code's, not the owner's."""
    monkeypatch.setenv("CLAUDECODE", "1")
    res = remember("Cache choice", "We cache sessions in Redis for claude.", "lesson")
    assert res["layer"] == "private" and res["path"].startswith("Agents/claude-code/")
    monkeypatch.delenv("CLAUDECODE")
    monkeypatch.setenv("CODEX_SANDBOX", "seatbelt")
    res = remember("Lint choice", "We lint with ruff for codex.", "lesson")
    assert res["path"].startswith("Agents/codex/")
    monkeypatch.delenv("CODEX_SANDBOX")
    monkeypatch.setenv("CODEX_HOME", "/somewhere")  # users set this themselves: not a sign of Codex
    assert remember("Deploy day", "We deploy on Tuesdays.", "fact")["layer"] == "shared"


def test_enforcement_refuses_an_agent_shell_without_its_credential(vault_path, monkeypatch):
    from tests.helpers import credentials

    remember("Deploy day", "We deploy on Tuesdays.", "fact")
    env = {"HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS": "1", "CLAUDECODE": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    res = run("remember", "--type", "fact", "--title", "X", "--content", "Shared by claude?", ok=False)
    assert res["error"] == "PermissionDenied" and "claude-code" in res["message"]
    # With the credential `hooks install` issued, it is claude-code (a private write); with the owner
    # key, the owner inside that shell.
    for k, v in credentials("claude-code").items():
        monkeypatch.setenv(k, v)
    assert run("remember", "--type", "fact", "--title", "X", "--content", "Claude's own.")["layer"] == "private"
    monkeypatch.delenv("HIVE_AGENT_CREDENTIAL")
    for k, v in credentials(None).items():
        monkeypatch.setenv(k, v)
    assert run("remember", "--type", "fact", "--title", "Y", "--content", "The owner's.")["layer"] == "shared"


def test_owner_key_rules(tmp_path):
    import os

    import pytest

    from hive_brain.errors import PermissionDenied, UsageError
    from hive_brain.store import identity

    state = tmp_path / "state"
    with pytest.raises(UsageError, match="outside the state dir"):
        identity.init_owner(state, state / "owner.key")
    key = tmp_path / "keys" / "owner.key"
    assert identity.init_owner(state, key)["status"] == "created"
    assert os.stat(key).st_mode & 0o777 == 0o600
    assert identity.init_owner(state, key)["status"] == "exists"
    with pytest.raises(PermissionDenied, match="already registered"):
        identity.init_owner(state, tmp_path / "other.key")
    key.chmod(0o644)
    with pytest.raises(PermissionDenied, match="other users"):
        identity.read_key(key, "the owner key")
    key.chmod(0o600)
    assert identity.is_owner(state, identity.read_key(key, "k")) and not identity.is_owner(state, "hbo_x")
    cred = identity.issue_agent_credential(state, "a")
    assert identity.issue_agent_credential(state, "a") == cred  # reinstalling keeps a valid credential
    tok = identity.read_key(cred, "c")
    assert identity.is_agent(state, "a", tok) and not identity.is_agent(state, "b", tok)


def test_credential_times_are_all_utc(tmp_path, monkeypatch):
    """A credential's ``created`` was local time without ``Z`` while its ``expires`` and ``revoked``
    are UTC with it: one listing, two clocks. All three are UTC now; an old local ``created`` is still
    listed as it was written."""
    import calendar
    import json
    import time

    from hive_brain.store import identity

    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: local time is never UTC's
    time.tzset()
    try:
        state = tmp_path / "state"
        identity.init_owner(state, tmp_path / "owner.key")
        identity.issue_agent_credential(state, "a", expires="2099-01-01T00:00:00Z")
        identity.issue_agent_credential(state, "b")
        identity.revoke_agent_credential(state, "b")
        reg = identity.load_registry(state)
        listed = {c["agent"]: c for c in identity.list_agent_credentials(state)}
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    for created in (reg["owner"]["created"], listed["a"]["created"], listed["b"]["created"]):
        assert created.endswith("Z"), created
        at = calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))
        assert abs(at - time.time()) < 600, created
    assert listed["b"]["revoked"].endswith("Z") and listed["b"]["created"] <= listed["b"]["revoked"]
    path = state / "identity.json"
    data = json.loads(path.read_text())
    data["agents"]["a"]["created"] = "2025-03-01T09:30:00"  # written by an older version, local time
    path.write_text(json.dumps(data))
    assert {c["agent"]: c for c in identity.list_agent_credentials(state)}["a"]["created"] == "2025-03-01T09:30:00"


def test_the_owner_rotates_revokes_lists_and_expires_agent_credentials(vault_path, monkeypatch):
    """Credentials could not be rotated or revoked by command and never expired (red-team)."""
    import json
    from pathlib import Path

    from tests.helpers import credentials

    remember("Deploy day", "We deploy on Tuesdays.", "fact")
    owner = credentials(None)
    monkeypatch.setenv("HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS", "1")

    def as_owner(*args: str, ok: bool = True) -> dict:
        return cli_as("--owner-key", owner["HIVE_BRAIN_OWNER_KEY"], "owner", *args, ok=ok)

    def as_reviewer(ok: bool = True) -> dict:
        monkeypatch.setenv("HIVE_AGENT_ID", "reviewer")
        monkeypatch.setenv("HIVE_AGENT_CREDENTIAL", cred)
        try:
            return cli_as("recall", "deploy day", ok=ok)
        finally:
            monkeypatch.delenv("HIVE_AGENT_ID")
            monkeypatch.delenv("HIVE_AGENT_CREDENTIAL")

    cred = as_owner("issue", "--agent", "reviewer")["credentialFile"]
    old = Path(cred).read_text()
    assert as_reviewer()["hits"]
    assert as_owner("issue", "--agent", "reviewer")["credentialFile"] == cred and Path(cred).read_text() == old
    assert as_owner("issue", "--agent", "reviewer", "--rotate")["credentialFile"] == cred
    assert Path(cred).read_text() != old and as_reviewer()["hits"]  # the new token works, in the same file
    stale = Path(vault_path.parent / "stale.key")
    stale.write_text(old)
    stale.chmod(0o600)
    monkeypatch.setenv("HIVE_AGENT_ID", "reviewer")
    monkeypatch.setenv("HIVE_AGENT_CREDENTIAL", str(stale))
    refused = cli_as("recall", "deploy day", ok=False)
    assert refused["error"] == "PermissionDenied", refused  # the rotated-out token proves nothing
    monkeypatch.delenv("HIVE_AGENT_ID")
    monkeypatch.delenv("HIVE_AGENT_CREDENTIAL")

    issued = as_owner("issue", "--agent", "reviewer", "--expires", "30d")
    assert issued["expires"] > "2026" and as_reviewer()["hits"]
    listed = {a["agent"]: a for a in as_owner("list")["agents"]}
    assert listed["reviewer"]["expires"] == issued["expires"] and not listed["reviewer"]["expired"]
    # A rotation is a new secret under the same time limit; a kept credential shows its expiry too.
    assert as_owner("issue", "--agent", "reviewer", "--rotate")["expires"] == issued["expires"] and as_reviewer()["hits"]
    assert as_owner("issue", "--agent", "reviewer")["expires"] == issued["expires"]
    reg = Path(cred).parent.parent / "identity.json"
    data = json.loads(reg.read_text())
    data["agents"]["reviewer"]["expires"] = "2020-01-01T00:00:00Z"
    reg.write_text(json.dumps(data))
    refused = as_reviewer(ok=False)
    assert refused["error"] == "PermissionDenied" and "expired" in refused["message"], refused
    assert as_owner("list")["agents"][0]["expired"] is True
    assert as_owner("issue", "--agent", "reviewer", "--expires", "2020-01-01", ok=False)["error"] == "UsageError"

    as_owner("issue", "--agent", "reviewer", "--rotate")
    assert as_owner("revoke", "--agent", "reviewer")["revoked"] is True and not Path(cred).exists()
    assert as_owner("revoke", "--agent", "reviewer", ok=False)["error"] == "UsageError"
    refused = as_reviewer(ok=False)
    assert refused["error"] == "PermissionDenied" and "revoked" in refused["message"], refused
    listed = {a["agent"]: a for a in as_owner("list")["agents"]}
    assert listed["reviewer"]["revoked"] > "2026" and not listed["reviewer"]["fileExists"], listed  # when, not how
    assert "revoked at" in as_owner("revoke", "reviewer", ok=False)["message"]
    # Issued again after a revoke: a new token, no longer revoked; revoked again by name (AGENT or --agent).
    cred = as_owner("issue", "--agent", "reviewer")["credentialFile"]
    assert as_reviewer()["hits"] and {a["agent"]: a for a in as_owner("list")["agents"]}["reviewer"]["revoked"] is None
    assert as_owner("revoke", "reviewer", "--agent", "other", ok=False)["error"] == "UsageError"
    assert as_owner("revoke", ok=False)["error"] == "UsageError"
    assert as_owner("revoke", "reviewer")["revoked"] is True and "revoked" in as_reviewer(ok=False)["message"]
    # Only the proved owner may revoke.
    monkeypatch.setenv("HIVE_AGENT_ID", "claude-code")
    monkeypatch.setenv("HIVE_AGENT_CREDENTIAL", credentials("claude-code")["HIVE_AGENT_CREDENTIAL"])
    assert cli_as("owner", "revoke", "--agent", "claude-code", ok=False)["error"] == "PermissionDenied"
