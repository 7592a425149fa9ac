"""Vectors a model computed from texts, kept in memory by text: a warm process (the server) runs the
model once per passage however many questions bring that passage back."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any


class TextCache:
    """Least-recently-used, thread-safe; values are stored as float16 (half the memory, and the
    scores read from them agree to 3 places). Bounded by count and, when given, by the values' bytes:
    per-token vectors vary 50-fold in size with the passage, so a count alone bounds nothing."""

    def __init__(self, max_items: int, max_bytes: int | None = None) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._items: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(namespace: str, text: str) -> tuple[str, str]:
        return namespace, hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._items

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.nbytes = 0

    def get(self, namespace: str, texts: Sequence[str], compute: Callable[[list[str]], Sequence[Any]]) -> list[Any]:
        """One value per text, in order: cached ones as they are, the rest from one ``compute`` call
        over the distinct missing texts."""
        keys = [self.key(namespace, t) for t in texts]
        with self._lock:
            have = {k: self._items[k] for k in keys if k in self._items}
            for k in have:
                self._items.move_to_end(k)
        todo: dict[tuple[str, str], str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in have:
                todo.setdefault(k, t)
        if todo:
            values = compute(list(todo.values()))
            with self._lock:
                for k, v in zip(todo, values, strict=True):
                    old = self._items.pop(k, None)  # another thread computed it meanwhile
                    if old is not None:
                        self.nbytes -= old.nbytes
                    have[k] = self._items[k] = v.astype("float16")
                    self.nbytes += have[k].nbytes
                while self._items and (len(self._items) > self.max_items
                                       or (self.max_bytes is not None and self.nbytes > self.max_bytes)):
                    self.nbytes -= self._items.popitem(last=False)[1].nbytes
        return [have[k] for k in keys]
