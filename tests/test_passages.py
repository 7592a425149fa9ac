from __future__ import annotations

from hive_brain.index.passages import Passage, count_words, embed_text, split_passages


def _words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_short_note_without_headings_is_one_passage():
    ps = split_passages("Title", "\nJust a short note.\n")
    assert ps == [Passage(0, "", "Just a short note.", 2)]


def test_empty_body_still_one_passage():
    assert split_passages("Title", "") == [Passage(0, "", "", 1)]


def test_heading_split():
    body = f"# Setup\n\n{_words(150, 'a')}\n\n## Install\n\n{_words(150, 'b')}\n\n## Usage\n\n{_words(150, 'c')}\n"
    ps = split_passages("T", body)
    assert [p.heading for p in ps] == ["Setup", "Install", "Usage"]
    assert [p.index for p in ps] == [0, 1, 2]
    assert ps[1].text.startswith("b0") and "a0" not in ps[1].text
    lines = body.splitlines()
    assert lines[ps[1].start_line - 1] == "## Install"


def test_short_sections_are_merged_and_keep_their_headings():
    body = "# A\none two\n\n## B\nthree four\n\n## C\nfive"
    ps = split_passages("T", body)
    assert len(ps) == 1
    assert ps[0].heading == "A"
    assert "## B" in ps[0].text and "five" in ps[0].text


def test_fence_aware():
    code = "\n".join(["```python", "# not a heading", *[f"x{i} = {i}" for i in range(10)], "```"])
    body = f"# Real\n\n{_words(150)}\n\n{code}\n\n# Second\n\n{_words(150, 'z')}"
    ps = split_passages("T", body)
    assert [p.heading for p in ps] == ["Real", "Second"]
    assert "# not a heading" in ps[0].text
    # Obsidian tags are not headings
    assert [p.heading for p in split_passages("T", "#tag\nbody")] == [""]


def test_long_section_is_windowed_with_overlap():
    paras = [" ".join(f"p{k}w{i}" for i in range(30)) + "." for k in range(30)]  # 900 words
    body = "# Long\n\n" + "\n\n".join(paras)
    ps = split_passages("T", body, max_words=200)
    assert len(ps) >= 5
    assert all(count_words(p.text) <= 200 for p in ps)
    assert all(p.heading == "Long" for p in ps)
    # every paragraph survives, none is cut in half
    joined = "\n\n".join(p.text for p in ps)
    for para in paras:
        assert para in joined
    # a short paragraph carries over as overlap between consecutive windows
    first_last = ps[0].text.split("\n\n")[-1]
    assert ps[1].text.startswith(first_last)


def test_long_paragraph_split_on_sentences():
    body = "Sentence number one is here. " * 300
    ps = split_passages("T", body)
    assert len(ps) > 3
    assert all(p.text.endswith(".") for p in ps)


def test_conversation_keeps_turns_whole():
    turns = [f"**{'Ann' if i % 2 == 0 else 'Bob'}** (D3:{i}): " + _words(25, f"t{i}x") for i in range(30)]
    ps = split_passages("Session 3", "\n".join(turns), date="2023-05-08")
    assert len(ps) > 2
    for p in ps:
        for line in p.text.splitlines():
            assert line in turns  # no turn is cut
    # neighbours: consecutive windows share a turn
    assert ps[0].text.splitlines()[-1] == ps[1].text.splitlines()[0]


def test_dash_speaker_conversation():
    turns = [f"- {'Caroline' if i % 2 == 0 else 'Melanie'}: " + _words(30, f"t{i}y") for i in range(20)]
    ps = split_passages("Chat", "\n".join(turns))
    assert len(ps) > 1
    for p in ps:
        assert all(line in turns for line in p.text.splitlines())


def test_cjk_text_is_split():
    body = "机器学习很有趣，我们今天讨论自然语言处理。" * 100  # 2,100 characters, no spaces
    ps = split_passages("中文笔记", body)
    assert len(ps) > 3
    assert "".join(p.text for p in ps).replace("\n", "").count("机器学习") >= 100
    # a small tail may be folded into the last window (up to 1.25x the budget)
    assert all(count_words(p.text) <= 250 for p in ps)


def test_embed_text_has_title_and_date_in_front():
    p = Passage(0, "Install", "pip install hive-brain", 3)
    assert embed_text("Setup notes", p, "2024-01-02") == "Setup notes (2024-01-02)\nInstall\npip install hive-brain"
    assert embed_text("Setup", Passage(0, "Setup", "text", 1)) == "Setup\ntext"
    assert embed_text("T", "raw text").startswith("T\n")
