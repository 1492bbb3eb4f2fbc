"""What the job benches (workers.py, generate_chunk.py) set up alike: a throwaway Django and a demo-corpus corpus.

Each run lives in a fresh temporary var/ folder on SQLite and the embedded broker, which need no service, so
a bench never touches a real database and nothing leaves the machine; the corpus is the first sentences of
the shipped demo corpus, imported like any corpus (``import_corpus``) with its IDF table built, both in this
process before any worker starts. The scripts import this module as a sibling (``bench/`` is their
``sys.path[0]``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from django.core.management import call_command
from django.test import override_settings

ROOT = Path(__file__).resolve().parents[1]
DEMO_CORPUS = ROOT / "generation" / "demo" / "corpus.txt"
DEMO_MODEL = ROOT / "generation" / "demo" / "model"


def throwaway_django(prefix: str, **env: str) -> Path:
    """Set Django up on a fresh var/ folder (SQLite, embedded broker; ``env`` added), migrated; return the folder.

    The environment is set before Django loads its settings, which read it once."""
    var = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        PARAFORGE_VAR_DIR=str(var),
        DATABASE_URL="",
        CELERY_BROKER_URL="",
        **env,
    )
    sys.path.insert(0, str(ROOT))
    import django  # (here, not at the top: only once the environment above is set)

    django.setup()
    call_command("migrate", verbosity=0)
    return var


def demo_sentences(n: int, *, max_chars: int | None = None) -> list[str]:
    """The demo corpus's first ``n`` sentences (of those up to ``max_chars`` characters, if given)."""
    sentences = DEMO_CORPUS.read_text(encoding="utf-8").splitlines()
    if max_chars is not None:
        sentences = [s for s in sentences if len(s) <= max_chars]
    return sentences[:n]


def corpus_import(var: Path, sentences: list[str], *, shard_size: int, name: str = "bench") -> None:
    """Import ``sentences`` as the mono corpus ``name`` in shards of ``shard_size`` and build its IDF table.

    Both run in this process (inline), whatever ``PARAFORGE_INLINE_WITHOUT_WORKER`` says, so that no worker
    has to be running yet; the commands' chatter goes nowhere."""
    corpus_file = var / f"{name}-corpus.txt"
    corpus_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    with open(os.devnull, "w") as quiet, override_settings(PARAFORGE_INLINE_WITHOUT_WORKER=True):
        call_command(
            "import_corpus", name, str(corpus_file), "--format", "mono", "--shard-size", str(shard_size), stdout=quiet
        )
        call_command("build_idf", name, "--wait", stdout=quiet, stderr=quiet)
