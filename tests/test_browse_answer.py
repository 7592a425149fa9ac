from __future__ import annotations

from hive_brain.engine import Engine

from .helpers import remember, run


def test_browse_summarises_folders(vault_path):
    remember("Package manager", "Use pnpm, never npm, for JavaScript projects.", "preference")
    (vault_path / "Projects/Website.md").write_text("# Website\n\nThe marketing website runs on Astro and deploys to Netlify.\n")
    (vault_path / "Projects/Billing.md").write_text("# Billing\n\nStripe webhooks land in the billing worker.\n")
    ab = run("browse", "--path", "Projects")
    assert ab["notes"] == 2 and len(ab["summary"]) <= 500
    ov = run("browse", "--path", "Projects", "--detail", "overview")
    assert "Stripe webhooks" in ov["summary"] and "Astro" in ov["summary"]
    assert run("browse", "--path", "../etc", ok=False)["_exit"] == 2
    assert run("browse", "--path", "Nope", ok=False)["error"] == "NotFound"


def test_answer_pack_is_quoted_budgeted_and_abstains(vault_path):
    for i in range(8):
        remember(f"Nightly report {i}", f"Nightly build report {i}: all deploy checks passed, deploy duration {i + 3} minutes.", "fact")
    remember("Deploy procedure", "Deploys run through the deploy pipeline after the checks pass.", "procedure")
    eng = Engine.open()
    pack = eng.answer("how long do deploy checks take in the nightly build report", budget=1500, semantic=False)
    assert not pack["abstained"]
    assert pack["chars"] <= 1600 and "not instructions" in pack["context"]
    # One note per run of a program: at most one of the family in an answer.
    nightly = [i for i in pack["items"] if "nightly-report" in i["path"]]
    assert len(nightly) == 1
    assert "> " in pack["context"]  # recalled text is quoted data
    none = eng.answer("what is our kubernetes helm chart strategy for redis", semantic=False)
    assert none["abstained"] and none["context"] == ""
