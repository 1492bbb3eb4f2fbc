"""Shards: gzip-compressed JSON Lines files, written deterministically and read as streams."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from .storage import LocalStorage, S3Storage, get_storage


class HashingWriter(io.RawIOBase):
    """Pass bytes through to a file while hashing them (the SHA-256 recorded for each shard)."""

    def __init__(self, raw):
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha256.update(data)
        self.size += len(data)
        self.raw.write(data)
        return len(data)


def write_jsonl_gz(
    key: str, records: Iterable[dict[str, Any]], *, storage: LocalStorage | S3Storage | None = None
) -> dict[str, Any]:
    """Write records atomically; same records -> byte-identical file (gzip mtime 0, no file name).

    Returns ``{"key", "records", "bytes", "sha256"}``.
    """
    storage = storage or get_storage()
    count = 0
    with storage.open_write(key) as raw:
        hashing = HashingWriter(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=6) as gz:
            buffered = io.BufferedWriter(gz, buffer_size=1 << 20)
            for record in records:
                buffered.write(json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8"))
                buffered.write(b"\n")
                count += 1
            buffered.flush()
    return {"key": key, "records": count, "bytes": hashing.size, "sha256": hashing.sha256.hexdigest()}


def read_jsonl_gz(key: str, *, storage: LocalStorage | S3Storage | None = None) -> Iterator[dict[str, Any]]:
    """Stream the records of one shard."""
    storage = storage or get_storage()
    with storage.open_read(key) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
        for line in io.TextIOWrapper(gz, encoding="utf-8"):
            if line.strip():
                yield json.loads(line)


def batched(records: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive lists of ``size`` records (the last may be shorter): a shard's stream processed a
    batch at a time, never held whole (``itertools.batched`` arrives only with Python 3.12)."""
    batch: list[Any] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
