"""Recall over a three-version evolution chain on real tantivy: the one chain walk resolves a
superseded match to the head and lists the versions it replaced, oldest first."""

from __future__ import annotations

from hive_brain.engine import Engine

from .helpers import remember, run


def test_old_version_match_resolves_to_head_with_whole_chain(vault_path):
    v1 = remember("Node version", "We pin Node 18 in .nvmrc for the frontend.", "decision")
    v2 = run("evolve", "--memory-id", v1["id"], "--content", "We pin Node 20 in .nvmrc for the frontend.")
    v3 = run("evolve", "--memory-id", v2["id"], "--content", "We pin Node 22 in .nvmrc for the frontend.")
    eng = Engine.open()
    res = eng.recall("do we pin node 18 in nvmrc for the frontend", semantic=False, scope="full-vault")
    hits = res["hits"]
    assert [h["id"] for h in hits].count(v3["id"]) == 1 and hits[0]["id"] == v3["id"]
    assert not {v1["id"], v2["id"]} & {h["id"] for h in hits}
    assert [c["id"] for c in hits[0]["evolutionChain"]] == [v1["id"], v2["id"]]
    assert all(c["status"] == "superseded" for c in hits[0]["evolutionChain"])
    assert "Node 22" in hits[0]["passage"]["text"]
    # Asked about the past, the old versions are hits of their own, marked historical.
    hist = eng.recall("which node version did we pin in nvmrc previously", semantic=False, scope="full-vault")
    assert {v1["id"], v2["id"]} <= {h["id"] for h in hist["hits"]}
    assert all(h.get("historical") for h in hist["hits"] if h["id"] in (v1["id"], v2["id"]))


def test_match_only_in_an_old_version_is_shown_as_the_head(vault_path):
    v1 = remember("Staging secrets", "The staging database password rotates monthly through Vault.", "procedure")
    v2 = run("evolve", "--memory-id", v1["id"], "--content", "Staging secrets moved to Doppler; rotation is weekly.")
    eng = Engine.open()
    res = eng.recall("how often does the staging database password rotate monthly vault", semantic=False,
                     scope="full-vault", abstain=False)
    top = res["hits"][0]
    # Resolved from the old version, or (the head is a candidate too) credited with its evidence.
    d = top["scoreDetails"]
    assert top["id"] == v2["id"] and v1["id"] in (d.get("resolvedFrom"), d.get("creditedFrom"))
    assert "Doppler" in top["passage"]["text"]  # the head's passage, not the matched old one
    assert [c["id"] for c in top["evolutionChain"]] == [v1["id"]]
