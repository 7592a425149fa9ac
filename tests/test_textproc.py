from __future__ import annotations

import pytest

from hive_brain.index.textproc import MAX_TERM_CHARS, analyze, analyze_joined, content_words, query_terms


def test_accents_fold_both_ways():
    assert analyze("café") == analyze("cafe") == ["cafe"]
    assert analyze("Ångström") == ["angstrom"]
    assert "strass" in analyze("Straße")
    assert query_terms("CAFÉ") == ["cafe"]


def test_stemming_and_stop_words():
    assert analyze("installing") == analyze("installed") == analyze("installation")
    assert analyze("the and of is") == []
    assert analyze("user's") == analyze("users") == ["user"]


def test_numbers_and_identifiers():
    assert analyze("released 2025-03-01 v2") == ["releas", "2025", "03", "01", "v2"]
    terms = analyze("call split_passages on LexicalIndex")
    assert {"split", "passag", "split_passages", "lexic", "index", "lexicalindex"} <= set(terms)
    # content_words drops the joined identifier (it would double-count coverage)
    assert "split_passages" not in content_words("split_passages")


def test_cjk_unigrams_and_bigrams():
    terms = analyze("机器学习")
    assert terms == ["机", "器", "学", "习", "机器", "器学", "学习"]
    assert content_words("机器学习") == ["机", "器", "学", "习"]
    # Mixed scripts split at the boundary
    assert analyze("使用Python编程")[:2] == ["使", "用"]
    assert "python" in analyze("使用Python编程")


def test_long_unspaced_chinese_run_is_fully_indexed():
    run = ("自然语言处理是人工智能的一个重要方向" * 30)[:500]
    terms = set(analyze(run))
    middle = run[250:252]
    assert middle in terms
    assert all(len(t) <= 2 for t in terms)


def test_japanese_and_korean():
    terms = analyze("東京タワーに行きました")
    assert {"東京", "タワ", "ワー", "行き"} <= set(terms)
    ko = analyze("한국어 텍스트")
    assert {"한국", "국어", "텍스"} <= set(ko)
    # kana keep their voicing marks (no accent folding outside Latin/Greek)
    assert "が" in analyze("がか") and "か" in analyze("がか")


def test_long_latin_token_capped_not_dropped():
    blob = "a1" * 500
    (t,) = analyze(blob)
    assert len(t) == MAX_TERM_CHARS
    assert query_terms(blob) == [t]


@pytest.mark.parametrize(
    "prompt",
    [
        "foo AND (bar", "title:x", "*", "~~~", '"unbalanced', "", "   ", "😀🎉 emoji only 🚀",
        "SELECT * FROM users WHERE id = 1; DROP TABLE x;--", "def f(x):\n    return x ** 2  # {[(<",
        "a\ud800b", "\x00\x01\x02", "[[wikilink]] #tag @mention", "NOT OR AND +-!^", "\\\\\\", "ｆｕｌｌｗｉｄｔｈ",
        "x" * 10_000,
    ],
)
def test_nasty_prompts_never_raise(prompt):
    terms = query_terms(prompt)
    assert isinstance(terms, list)
    assert len(terms) == len(set(terms))
    assert all(t and " " not in t for t in terms)
    assert all(t.encode("utf-8") for t in terms)


def test_query_terms_dedup_keeps_order():
    assert query_terms("beta alpha beta Alpha") == ["beta", "alpha"]
    assert query_terms(None) == []  # type: ignore[arg-type]


def test_joined_has_no_empty_terms():
    assert analyze_joined("  The café,  the CAFÉ!  ") == "cafe cafe"
