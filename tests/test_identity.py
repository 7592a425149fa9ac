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
