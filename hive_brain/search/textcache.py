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
    scores read from them agree to 3 places)."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
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
                    have[k] = self._items[k] = v.astype("float16")
                while len(self._items) > self.max_items:
                    self._items.popitem(last=False)
        return [have[k] for k in keys]
