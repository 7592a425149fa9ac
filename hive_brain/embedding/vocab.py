"""bert-base-uncased's WordPiece vocabulary (Apache-2.0, google-research/bert), shipped with the package:
the reranker pack's tokenizer (all-MiniLM-L6-v2 uses it unchanged; its package ships none), and the
English words ``search.spelling`` never takes for typos. A module of its own so that spelling reads the
path without importing the pack installer."""

from pathlib import Path

RERANK_VOCAB = Path(__file__).parent / "data" / "bert-uncased-vocab.txt"
