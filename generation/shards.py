"""Moved to :mod:`infra.shards`; this re-export keeps code still being edited elsewhere working until its
import lines change (then delete this file)."""
from infra.shards import HashingWriter, batched, read_jsonl_gz, write_jsonl_gz  # noqa: F401
