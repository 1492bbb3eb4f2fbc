"""Issue 48, item 5: the release card said the release loads with ``datasets.load_dataset`` and showed a pandas
snippet, but a quick start installs neither. The card's snippet now runs with what Paraforge installs (pyarrow,
Python's csv, gzip and json), run here from the release folder with ``datasets`` and ``pandas`` made
unimportable; the card names them as optional, with how to install them."""

import re
import subprocess
import sys

import pytest

from .test_releases import export, scored  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db

# as on a quick start: neither optional reader can be imported
WITHOUT_OPTIONAL = """import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("datasets", "pandas"):
            raise ImportError(f"no module named {name!r} (not installed on a quick start)")
sys.meta_path.insert(0, Absent())
"""
CHECK = (
    "\nrows = pairs if 'pairs' in dir() else lines\n"
    "print(len(rows), len(judgments), sorted(judgments[0]) if judgments else None)\n"
)


@pytest.mark.parametrize(
    "options",
    [("--format", "parquet"), ("--format", "tsv"), ("--format", "jsonl"), ("--layout", "parabank2")],
    ids=["parquet", "tsv", "jsonl", "parabank2"],
)
def test_the_cards_snippet_runs_without_datasets_or_pandas(scored, tmp_path, options):  # noqa: F811
    folder = tmp_path / "release"
    result = export("res", "--out", str(folder), *options)
    card = (folder / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    assert "pandas" not in snippet and "datasets" not in snippet
    assert "Optional, with packages that do not come with Paraforge (`pip install datasets pandas`)" in card
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPTIONAL + snippet + CHECK], cwd=folder, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    n_rows, n_judgments, columns = done.stdout.split(" ", 2)
    counts = result["counts"]
    per_line = options == ("--format", "jsonl") or options == ("--layout", "parabank2")
    assert int(n_rows) == (counts["references"] if per_line else counts["pairs"])
    assert int(n_judgments) == counts["judgments"] > 0 and "human_score" in columns
