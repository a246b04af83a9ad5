"""A bounded, thread-safe LRU cache of MiniLM embeddings, kept by the shared encoder.

Bulk runs over evaluation sets and retrieval logs meet the same texts again and again: one
query split into several tasks, a popular passage retrieved for many queries. An embedding
that cannot depend on its batch (see :meth:`._encoder.Encoder.encode` for when) is a function
of its text alone, so it is kept here and served again instead of encoded again.

An entry is keyed by the text's sha-256, not the text, so its size does not grow with the
text: the unit vector (384 float32, 1.5 KiB) and the text's word-piece count, about 1.9 KiB in
all with the key and the bookkeeping (measured with tracemalloc). The word-piece count is kept
so that a call's token usage is the same whether its texts came from the cache or not.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_ENTRIES", "Embedding", "EmbeddingCache", "text_key"]

DEFAULT_ENTRIES = 16384
"""About 30 MiB: modest next to the model and its session, and enough for the queries and
passages a bulk run meets again within a few thousand tasks."""

Embedding = tuple[npt.NDArray[np.float32], int]
"""A text's unit vector (read-only) and its word-piece count ([CLS] and [SEP] included)."""


def text_key(text: str) -> bytes:
    """The cache key of ``text``: its sha-256 (lone surrogates kept, so any str has one)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """At most ``entries`` embeddings; the least recently used goes first.

    One lock guards the table; encoding happens outside it, so two threads that miss the same
    text at once both encode it and store the same vector.
    """

    def __init__(self, entries: int) -> None:
        if entries < 1:
            raise ValueError(f"an embedding cache holds at least 1 entry, not {entries}")
        self.entries = entries
        self._table: OrderedDict[bytes, Embedding] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, Embedding]:
        """The cached embeddings among ``keys``, each marked as just used."""
        found: dict[bytes, Embedding] = {}
        with self._lock:
            for key in keys:
                hit = self._table.get(key)
                if hit is not None:
                    self._table.move_to_end(key)
                    found[key] = hit
        return found

    def put_many(self, embeddings: Mapping[bytes, Embedding]) -> None:
        """Store ``embeddings`` (vectors are copied and made read-only), evicting the least
        recently used beyond the size."""
        stored = {key: (_frozen(vector), pieces) for key, (vector, pieces) in embeddings.items()}
        with self._lock:
            for key, value in stored.items():
                self._table[key] = value
                self._table.move_to_end(key)
            while len(self._table) > self.entries:
                self._table.popitem(last=False)


def _frozen(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """A read-only copy of one row: a caller's array never aliases the cache."""
    out = np.array(vector, dtype=np.float32, copy=True)
    out.setflags(write=False)
    return out
