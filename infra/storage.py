"""Where the big files live: a local directory or an S3 prefix, behind one small interface (every app's shards).

Keys are relative POSIX paths (``corpora/7/shard-00000.jsonl.gz``). Writes are atomic: a reader sees
the whole file or none of it, so a chunk that dies half-way leaves nothing behind and a chunk that runs
twice replaces its own output instead of duplicating it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlparse

from django.conf import settings

from .textfiles import atomic_write


class Storage(Protocol):
    """What every storage backend offers (a local folder, an S3 prefix): the rest of the project sees only this."""

    url: str

    def open_read(self, key: str) -> BinaryIO: ...
    def open_write(self, key: str) -> contextlib.AbstractContextManager[BinaryIO]: ...
    def exists(self, key: str) -> bool: ...
    def size(self, key: str) -> int: ...
    def list(self, prefix: str) -> list[str]: ...
    def delete(self, key: str) -> None: ...
    def delete_prefix(self, prefix: str) -> int: ...


def _clean_key(key: str) -> str:
    parts = [p for p in key.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"invalid storage key {key!r}")
    return "/".join(parts)


class LocalStorage:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.url = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        return self.root / _clean_key(key)

    def open_read(self, key: str) -> BinaryIO:
        try:
            return open(self._path(key), "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.url}/{key} does not exist") from None

    @contextlib.contextmanager
    def open_write(self, key: str) -> Iterator[BinaryIO]:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb", private=True) as fh:  # hidden .tmp name: list() skips it
            yield fh

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        return self._path(key).stat().st_size

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if base.is_file():
            return [_clean_key(prefix)]
        if not base.is_dir():
            return []
        return sorted(
            p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file() and not p.name.endswith(".tmp")
        )

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list(prefix)
        base = self._path(prefix)
        if base.is_dir():
            shutil.rmtree(base)
        else:
            for key in keys:
                self.delete(key)
        return len(keys)


class S3Storage:
    """S3 (or any S3-compatible store) through boto3. Credentials come from the environment."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None, client=None):
        import boto3

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.client = client or boto3.client("s3", endpoint_url=endpoint_url)

    def _key(self, key: str) -> str:
        key = _clean_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def open_read(self, key: str) -> BinaryIO:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        except self.client.exceptions.NoSuchKey:
            raise FileNotFoundError(f"{self.url}/{key} does not exist") from None

    @contextlib.contextmanager
    def open_write(self, key: str) -> Iterator[BinaryIO]:
        # Spool to a local temporary file, then upload in one go: S3 objects appear whole or not at all.
        with tempfile.TemporaryFile() as fh:
            yield fh
            fh.flush()
            fh.seek(0)
            self.client.upload_fileobj(fh, self.bucket, self._key(key))

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
                return False
            raise

    def size(self, key: str) -> int:
        return int(self.client.head_object(Bucket=self.bucket, Key=self._key(key))["ContentLength"])

    def list(self, prefix: str) -> list[str]:
        full = self._key(prefix)
        keys: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
            for obj in page.get("Contents", []):
                keys.append(obj["Key"][len(self.prefix) + 1 :] if self.prefix else obj["Key"])
        return sorted(keys)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list(prefix)
        for start in range(0, len(keys), 1000):
            batch = [{"Key": self._key(k)} for k in keys[start : start + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch})
        return len(keys)


def storage_from_url(url: str) -> Storage:
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return LocalStorage(parsed.path if parsed.scheme else url)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"storage URL {url!r} names no bucket")
        return S3Storage(parsed.netloc, parsed.path, endpoint_url=getattr(settings, "AWS_S3_ENDPOINT_URL", None))
    raise ValueError(f"unsupported storage URL {url!r}: use file:///path or s3://bucket/prefix")


def get_storage() -> Storage:
    """The storage configured by PARAFORGE_STORAGE_URL (read each call, so tests can override it)."""
    return storage_from_url(settings.PARAFORGE_STORAGE_URL)
