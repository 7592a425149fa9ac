"""spmtok: the default pack's tokenizer without tokenizers' 280 MB Unigram gives the same ids."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

import hive_brain
from hive_brain.embedding import pack as modelpack
from hive_brain.embedding import spmtok
from hive_brain.embedding.embedder import Embedder

EDGES = [
    "", " ", "  ", "\t", "\n", "\u00a0", "\u200b", "\u3000", "a", " a", "a ", "  a  ", "a  b", "a\tb", "a\n\nb",
    "a\u00a0 b", "a \u200b b", "\u200b a", "a\u0301", "e\u0301\u0302", "Ａ\u0301", "\u0301", " \u0301", "\u0301 ",
    "ｆｕｌｌ　ｗｉｄｔｈ", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🇯🇵🇫🇷", "العربية \u200fنص\u200e", "\u202etext\u202c",
    "中文", "日本語", "한국어", "\u1100\u1161\u11a8", "<s>", "</s>", "<pad>", "<unk>", "<mask>", "a<s>b", "<s><s>",
    " <s> ", "<s ", "</s", "▁", "▁▁", " ▁ ", "a▁b", "\r\n", "\ufeffbom", "\x00nul", "ﬁ ﬂ ㍿ ① ½ ™", "İstanbul ß ẞ",
    "\U0001d400\U0001d401", "\ue000", "\U000f0000", "\U000e0041", "‴ ′′′", "=" * 40, "|---------------|",
    "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==" * 8,
]
_BITS = [" ", "  ", "\t", "\n", "\u00a0", "\u200b", "\u200d", "\u0301", "\u0308", "\ufe0f", "<s>", "</s>", "<mask>",
         "▁", "\r\n", "\u3000", "\u2028", "word", "hello", "中文", ".", "'s", "12", "=="]
_RANGES = [(0x20, 0x7F), (0xA0, 0x250), (0x300, 0x370), (0x370, 0x530), (0x590, 0x700), (0x900, 0xE00),
           (0x1100, 0x1200), (0x2000, 0x2C00), (0x3000, 0x3190), (0x4E00, 0x4F00), (0xAC00, 0xAC80),
           (0xFB00, 0xFB50), (0xFE00, 0xFFF0), (0x1F300, 0x1FA00), (0x1D400, 0x1D800), (0xE0000, 0xE0080),
           (0x10000, 0x10FFFF)]


def _generated(count: int, seed: int = 26) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rnd.randint(0, 40)):
            r = rnd.random()
            if r < 0.35:
                parts.append(rnd.choice(_BITS))
            else:
                low, high = rnd.choice(_RANGES)
                code = rnd.randrange(low, high)
                if not 0xD800 <= code < 0xE000:
                    parts.append(chr(code))
        out.append("".join(parts))
    return out


def _vault_texts() -> list[str]:
    root = Path(hive_brain.__file__).parent / "vault_template"
    texts = []
    for path in sorted(root.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        texts += [text, *text.split("\n\n")]
    return texts


@pytest.fixture(scope="module")
def reference(pack_dir: Path) -> Tokenizer:
    tok = Tokenizer.from_file(str(pack_dir / modelpack.TOKENIZER_FILE))
    tok.no_padding()
    tok.enable_truncation(max_length=512)
    return tok


@pytest.fixture(scope="module")
def spm_folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("spm")


@pytest.fixture(scope="module")
def fast(pack_dir: Path, spm_folder: Path) -> spmtok.SpmTokenizer:
    tok = spmtok.load(pack_dir / modelpack.TOKENIZER_FILE, _sha(pack_dir), [spm_folder], max_tokens=512)
    assert tok is not None
    return tok


def _sha(pack: Path) -> str:
    return str(modelpack.read_manifest(pack)["files"][modelpack.TOKENIZER_FILE]["sha256"])


def _assert_same(reference: Tokenizer, fast: spmtok.SpmTokenizer, texts: list[str], *, offsets: bool) -> None:
    texts = [p + t for t in texts for p in ("", "passage: ", "query: ")]
    expected = reference.encode_batch(texts)
    for text, want in zip(texts, expected, strict=True):
        got = fast.encode(text, offsets=offsets)
        assert got.ids == want.ids, text
        if offsets:
            assert got.offsets == list(want.offsets), text
            assert got.special_tokens_mask == list(want.special_tokens_mask), text


def test_same_ids_on_real_generated_and_edge_texts(reference, fast) -> None:
    long_texts = [" ".join(_generated(300, seed=s)) for s in range(4)] + ["word " * 509, "word " * 510, "中" * 3000]
    texts = EDGES + _vault_texts() + _generated(3000) + long_texts
    _assert_same(reference, fast, texts, offsets=False)
    assert [e.ids for e in fast.encode_batch(texts)] == [e.ids for e in reference.encode_batch(texts)]


def test_same_ids_offsets_and_special_mask_where_token_vectors_need_them(reference, fast) -> None:
    _assert_same(reference, fast, EDGES + _generated(600, seed=7), offsets=True)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_same_ids_on_any_text(reference, fast, text) -> None:
    _assert_same(reference, fast, [text], offsets=True)


def test_truncation_keeps_the_closing_token(reference, fast) -> None:
    for text in ("word " * 2000, "<s>" * 700, "a" * 9000):
        ids = fast.encode(text).ids
        assert len(ids) == 512 and ids[-1] == 2
        assert ids == reference.encode(text).ids
        bare = fast.encode(text, add_special_tokens=False)
        assert bare.ids == reference.encode(text, add_special_tokens=False).ids and len(bare.ids) == 512


def test_the_tokenizer_keeps_its_pieces_in_a_mapped_file_not_in_the_processes_memory(pack_dir, tmp_path) -> None:
    # A sentencepiece processor held e5's 250k pieces in ~34 MB of the server's own memory (issue 26,
    # stop 38); the piece table is read from a file mapped read-only: a few MB, the rest on disk.
    import subprocess

    code = """if True:
        import ctypes, gc, json, sys
        from pathlib import Path
        from hive_brain.embedding import pack as modelpack, spmtok
        def anon():
            gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
            return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("RssAnon")) / 1024
        pack, folder = Path(sys.argv[1]), Path(sys.argv[2])
        sha = modelpack.read_manifest(pack)["files"][modelpack.TOKENIZER_FILE]["sha256"]
        before = anon()
        tok = spmtok.load(pack / modelpack.TOKENIZER_FILE, sha, [folder], max_tokens=512)
        ids = tok.encode("which cloud runs our website? 日本語のテキスト").ids
        print(json.dumps({"anon_mb": anon() - before, "spm": "sentencepiece" in sys.modules, "ids": ids}))
    """
    assert spmtok.load(pack_dir / modelpack.TOKENIZER_FILE, _sha(pack_dir), [tmp_path], max_tokens=512) is not None
    out = subprocess.run([sys.executable, "-c", code, str(pack_dir), str(tmp_path)], capture_output=True,
                         text=True, check=True, timeout=120)
    got = json.loads(out.stdout)
    assert not got["spm"] and got["anon_mb"] < 12, got  # the processor alone was ~34 MB
    assert len(got["ids"]) > 5


def test_the_embedder_uses_it_on_the_default_pack_with_the_same_vectors(pack_dir, monkeypatch) -> None:
    light = Embedder.load(pack_dir)
    assert isinstance(light._tokenizer, spmtok.SpmTokenizer)
    monkeypatch.setenv("HIVE_BRAIN_TOKENIZER", "tokenizers")
    full = Embedder.load(pack_dir)
    assert isinstance(full._tokenizer, Tokenizer)
    texts = ["Use pnpm, not npm", "  日本語のテキスト <s> ‴ ", "=" * 40, ""]
    np.testing.assert_array_equal(light.embed_passages(texts), full.embed_passages(texts))
    np.testing.assert_array_equal(light.embed_queries(texts), full.embed_queries(texts))
    for a, b in zip(light.token_vectors(texts, query=True), full.token_vectors(texts, query=True), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(light.embed_query_tokens("中文 검색"), full.embed_query_tokens("中文 검색"), strict=True):
        np.testing.assert_array_equal(a, b)
    assert light.count_tokens("word " * 900) == full.count_tokens("word " * 900) == 512


def test_a_probe_mismatch_falls_back_to_tokenizers(pack_dir, tmp_path) -> None:
    sha = _sha(pack_dir)
    path = pack_dir / modelpack.TOKENIZER_FILE
    assert spmtok.load(path, sha, [tmp_path], max_tokens=512) is not None
    _model, probes, _none = spmtok.cache_paths(tmp_path, sha, 512)
    data = json.loads(probes.read_text())
    data["ids"][2] = [0, 5, 2]  # as if this sentencepiece build tokenised "hello world" otherwise
    probes.write_text(json.dumps(data))
    assert spmtok.load(path, sha, [tmp_path], max_tokens=512) is None


def test_another_tokenizer_shape_is_marked_and_left_to_tokenizers(pack_dir, tmp_path) -> None:
    rerank = modelpack.find_reranker(pack_dir.parent)
    assert rerank is not None
    sha = _sha(rerank)
    assert spmtok.load(rerank / modelpack.TOKENIZER_FILE, sha, [tmp_path], max_tokens=128) is None
    assert spmtok.cache_paths(tmp_path, sha, 128)[2].exists()  # not derived again at every load


def test_a_damaged_piece_table_falls_back_to_tokenizers(pack_dir, tmp_path) -> None:
    sha = _sha(pack_dir)
    path = pack_dir / modelpack.TOKENIZER_FILE
    assert spmtok.load(path, sha, [tmp_path], max_tokens=512) is not None
    table = spmtok.cache_paths(tmp_path, sha, 512)[0]
    table.write_bytes(table.read_bytes()[: 1 << 20])  # cut short
    assert spmtok.load(path, sha, [tmp_path], max_tokens=512) is None


def test_the_piece_table_gives_every_piece_its_id_and_anything_else_the_unknown_one(tmp_path) -> None:
    vocab = [("<unk>", 0.0), ("▁a", -1.5), ("a", -2.0), ("中文", -3.25), ("", -9.0), ("▁", -0.5)]
    spmtok.PieceTable.write(tmp_path / "t.pieces", vocab, 0)
    table = spmtok.PieceTable(tmp_path / "t.pieces")
    assert [table.piece_id(p) for p, _s in vocab] == list(range(len(vocab)))
    assert list(table.scores) == [s for _p, s in vocab]
    assert [table.piece_id(x) for x in ("b", "▁a▁", "中", "\ud800", "A")] == [0] * 5
