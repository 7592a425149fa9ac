"""Embedding models: the packs, their install and the ONNX runtimes that load them."""

from pathlib import Path

# bert-base-uncased's WordPiece vocabulary (embedding/install.py): the reranker pack's tokenizer, and
# the English words search.spelling never takes for typos.
RERANK_VOCAB = Path(__file__).parent / "data" / "bert-uncased-vocab.txt"
