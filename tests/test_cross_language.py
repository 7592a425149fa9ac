"""A question in one language finds the only note that answers it in another (issue 28: an English
question about the database choice abstained on the Chinese note that answers it)."""

from __future__ import annotations

import pytest

from .helpers import remember, run

NOTES = [
    ("preference", "Package manager", "Use pnpm, never npm, for JavaScript projects."),
    ("lesson", "Flaky CI cache", "Clear the CI cache when the build fails with ENOSPC."),
    ("procedure", "Release steps", "Tag the release, push the tag, and let CI publish the wheel."),
    ("fact", "API port", "The public API listens on port 8443 behind the load balancer."),
]


@pytest.mark.slow
def test_an_english_question_finds_the_chinese_note_that_answers_it(vault_path, with_model):
    for t, title, content in NOTES:
        remember(title, content, t)
    zh = remember("数据库选择", "我们决定使用 PostgreSQL 作为主数据库，因为它支持事务和 JSONB。", "decision")
    run("rebuild-index")
    for q in ("which database did we choose?", "which database did we decide on?"):
        res = run("recall", q)
        assert res["semantic"] is True
        assert not res["abstained"], (q, res.get("reason"))
        assert res["hits"][0]["id"] == zh["id"], (q, [h["title"] for h in res["hits"]])
        pack = run("answer", q)
        assert not pack["abstained"] and "PostgreSQL" in pack["context"], (q, pack.get("reason"))
