"""Which job a data set folder is for, from the files it holds.

Apart from :mod:`.datasets` (which reads the folders) and :mod:`.golden` (which reads golden
files), so that both can tell a folder's job without importing each other.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["LAYOUTS", "layout_job"]

LAYOUTS: dict[str, tuple[str, ...]] = {
    # job → files (relative to the folder) that identify its data set layout
    "rerank": ("queries.tsv", "qrels.txt", "passages.jsonl", "bm25_top100.run"),
    "classify": ("claims_train.jsonl", "corpus.jsonl"),
    "audit": ("oracle_chunks/dev.jsonl",),
}


def layout_job(root: str | Path) -> str | None:
    """The job whose data set layout the folder ``root`` has (rerank, classify, audit), or
    None. A TREC DL folder also serves tier; name the job to get that."""
    root = Path(root)
    for job, files in LAYOUTS.items():
        if all((root / f).is_file() for f in files):
            return job
    if (root / "qrels_dev.txt").is_file():
        return "tier"
    return None
