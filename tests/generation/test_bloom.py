import subprocess
import sys
from pathlib import Path

import pytest

from generation.constraints.bloom import BloomFilter

ROOT = Path(__file__).resolve().parents[2]
BUILD = (
    f"import sys; sys.path.insert(0, {str(ROOT)!r}); from generation.constraints.bloom import BloomFilter; "
    "sys.stdout.write(bytes(BloomFilter.build((f'w{i}' for i in range(500)), 500).bits).hex())"
)


def test_no_false_negatives_and_few_false_positives():
    members = [f"word{i}" for i in range(20_000)] + ["naïve", "über", "日本語"]
    bloom = BloomFilter.build(members, len(members))
    assert all(m in bloom for m in members)
    strangers = [f"other{i}" for i in range(20_000)]
    rate = sum(s in bloom for s in strangers) / len(strangers)
    assert rate < 0.03  # 10 bits and 3 probes a key: about 1.7%


def test_an_empty_filter_holds_nothing_and_a_filter_needs_bits():
    assert "anything" not in BloomFilter.build([], 0)
    with pytest.raises(ValueError):
        BloomFilter(b"")


def test_the_same_filter_in_every_process():
    """A filter is stored with its index and read by other processes: its bits must not depend on the
    per-process salt of Python's hash."""
    runs = {
        subprocess.run(
            [sys.executable, "-c", BUILD], env={"PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True
        ).stdout
        for seed in ("1", "2")
    }
    assert len(runs) == 1
    bloom = BloomFilter(bytes.fromhex(runs.pop()))
    assert all(f"w{i}" in bloom for i in range(500))
