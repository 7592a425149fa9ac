"""Recall as memory stood then (issue 28): a version is current from its own ``created`` until the
version that replaced it was created. ``evolve`` bumps the old version's ``updated`` (its file changed
when it was marked superseded); that date must not decide which version a past date sees."""

from __future__ import annotations

import re

from .helpers import remember, run


def _backdate(vault_path, path: str, created: str) -> None:
    """The memory was written on ``created`` (a hand edit, as a sync from another device would bring)."""
    p = vault_path / path
    text = p.read_text()
    text = re.sub(r"^created: .*$", f"created: '{created}'", text, count=1, flags=re.M)
    text = re.sub(r"^updated: .*$", f"updated: '{created}'", text, count=1, flags=re.M)
    p.write_text(text)


def _evolved(vault_path) -> tuple[dict, dict]:
    old = remember("Deploy target", "We deploy the web app to Heroku.", "decision")
    _backdate(vault_path, old["path"], "2025-01-10T09:00:00+00:00")
    new = run("evolve", old["id"], "--content", "We deploy the web app to Fly.io.")
    _backdate(vault_path, new["path"], "2025-08-01T09:00:00+00:00")
    run("rebuild-index")
    return old, new


def _top(*args: str) -> dict | None:
    hits = run("recall", *args, "--lexical")["hits"]
    return hits[0] if hits else None


def test_as_of_a_date_before_the_change_returns_the_version_current_then(vault_path):
    old, new = _evolved(vault_path)
    now = _top("where do we deploy the web app")
    assert now is not None and now["id"] == new["id"]
    for args in (("where do we deploy the web app", "--as-of", "2025-03-01"),
                 ("where did we deploy the web app as of 2025-03-01",),
                 ("where did we deploy the web app as of March 2025",),
                 ("where did we deploy the web app before June 2025",)):
        hit = _top(*args)
        assert hit is not None, args
        assert hit["id"] == old["id"] and "Heroku" in hit["passage"]["text"], (args, hit)
    # After the change: the new version, even asked "as of".
    after = _top("where do we deploy the web app", "--as-of", "2025-09-01")
    assert after is not None and after["id"] == new["id"]
    # Before the memory existed: nothing.
    assert _top("where do we deploy the web app", "--as-of", "2024-06-01") is None


def test_in_a_named_month_answers_with_the_version_current_then(vault_path):
    old, new = _evolved(vault_path)
    hit = _top("where did we deploy the web app in January 2025")
    assert hit is not None and hit["id"] == old["id"], hit
    hit = _top("where did we deploy the web app in 2025")
    assert hit is not None and hit["id"] == new["id"], hit  # current at the end of that year
