"""The quick start's demo generation: its corpus, model, sample and decoding settings, in one place for
``manage.py demo_setup`` (what ``scripts/start`` runs) and the test that measures it.

Decoding: ParaBank systems 15, 22, 28, 29 and 34 (lowest-IDF ban, one random ban, unconstrained, a required
verb variant, the first 3 tokens banned at BOS), beam 4, and the **2 best outputs per system** (``nbest``).
The demo model rewrites a banned word by continuing its subword pieces, so a third to a half of its outputs
hold invented words ("reachinging", "foesity"); the HIT batch leaves those out (batch setting
``drop_non_words``), and ``nbest`` 2 keeps enough real-word candidates for the tutorial's regressor (20
judged candidates). Measured on the 9-reference sample (3 per length 5, 10, 20), the demo batch's non-check
candidates:

| decoding | screening | candidates in HITs | real words, not the reference | non-words | HITs |
|---|---|---:|---:|---:|---:|
| nbest 1 (before) | off | 23 | 14 (61%) | 9 | 9 |
| nbest 1 | on | 14 | 14 (100%) | 0 (9 left out) | 9 |
| nbest 2 (now) | on | 33 | 33 (100%) | 0 (22 left out) | 10 |

``manage.py demo_setup`` as a whole (import, IDF, decoding, batch) took 16 s of CPU with ``nbest`` 2 against 13 s
with 1, on a shared 2-core machine. ``tests/generation/test_demo_quality.py`` checks the two-thirds share and the
20 candidates on every run.

The shipped models are installed under the default model root ``var/models/`` (``PARAFORGE_VAR_DIR``), so that the
admin's generate form and the API offer them by name (``install_shipped_models``, run by ``demo_setup``): ``demo``
(generation/demo/model) and, once ``scripts/setup --model gemma3-270m`` installed its base, ``paraphraser``
(generation/demo/paraphraser, the packaged adapter). Each file is a hard link to the shipped one where the two
folders share a file system (no second 30 MB), else a copy: either way the model root holds the files themselves,
so the model roots' rule stays as it is (a symbolic link that leaves a root is refused). A folder of that name
that this did not install is left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .decode_options import DecodeOptions, DiverseOptions
from .generation_job.params import GenerateParams, generation_params
from .model_install import GEMMA3_270M, is_installed, models_root
from .models import Corpus

DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_CORPUS = "demo"
DEMO_CORPUS_FILE = DEMO_DIR / "corpus.txt"
DEMO_MODEL = DEMO_DIR / "model"
DEMO_PARAPHRASER = DEMO_DIR / "paraphraser"
# the file that marks a model folder this module installed (and may replace when the shipped one changes)
SHIPPED_MARK = ".paraforge-shipped"
DEMO_SAMPLE = "demo-sample"
# the demo corpus's origin and terms (generation/demo/README.md): STS-B sentences under their sources' licences,
# some share-alike, some Microsoft Research's: a release of it may state no licence but these terms or none
DEMO_CORPUS_TERMS = {
    "source": "STS Benchmark training sentences (Agirre et al., SemEval 2017), generation/demo/corpus.txt",
    "license": "LicenseRef-STSB-sources",
    "terms": "each sentence under its source's licence (MSR Paraphrase and Video: Microsoft Research terms; EMM "
    "headlines; DEFT news; PASCAL VOC-2008, SNLI, Stack Exchange: CC BY-SA): demo data for research and "
    "demonstration, not for redistribution",
}
# lowest-IDF ban, one random ban, unconstrained, a required verb variant, the first 3 tokens banned at BOS
DEMO_SYSTEMS = [15, 22, 28, 29, 34]
DEMO_LENGTHS = [5, 10, 20]
DEMO_PER_LENGTH = 3
DEMO_BEAM = 4
DEMO_NBEST = 2  # the second best output of each system doubles the real-word candidates left after screening


def demo_generation_settings(corpus_id: int, *, name: str = DEMO_SAMPLE, model: Path = DEMO_MODEL) -> GenerateParams:
    """The generation job's settings for the demo's evaluation sample (checked as values when made; the model and
    the database by :func:`demo_generation_params`); ``model``: the demo model, or the packaged paraphraser (its
    prompt is the one it was trained with; ``keep_facts`` on and itself as its backward model, since what it does
    most is change a fact: ``generation.facts``, ``generation.decoding.backward``; ``avoid_copies`` on, since
    unconstrained (system 28) or with a required word (29) it gives its input back: ``generation.copies``)."""
    paraphraser = model == DEMO_PARAPHRASER
    return GenerateParams(
        corpus=corpus_id,
        model=str(model),
        systems=DEMO_SYSTEMS,
        decode=DecodeOptions(
            beam=DEMO_BEAM, nbest=DEMO_NBEST, device="cpu", keep_facts=paraphraser, avoid_copies=paraphraser
        ),
        backward_model=str(model) if paraphraser else None,
        sample_per_length=DEMO_PER_LENGTH,
        lengths=DEMO_LENGTHS,
        name=name,
    )


def demo_generation_params(corpus: Corpus, *, name: str = DEMO_SAMPLE, model: Path = DEMO_MODEL) -> dict[str, Any]:
    """The generation job's params for the demo's evaluation sample (:func:`demo_generation_settings`), checked."""
    return generation_params(demo_generation_settings(corpus.pk, name=name, model=model))


# ``scripts/start`` (in the background, once Gemma 3 270M is installed): the same sample decoded by the packaged
# paraphraser (issue 47), under the same systems, and in ParaBank 2's diverse mode its two best ranks, sampled small
# enough for two CPU cores
DEMO_PARAPHRASER_SAMPLE = "demo-sample-paraphraser"
DEMO_PARAPHRASER_DIVERSE = "demo-sample-paraphraser-diverse"
DEMO_DIVERSE_RANKS = 2
DEMO_DIVERSE_SETS, DEMO_DIVERSE_SAMPLES = 3, 8


def demo_diverse_settings(corpus_id: int, *, name: str = DEMO_PARAPHRASER_DIVERSE) -> GenerateParams:
    """The diverse job's settings of the paraphraser's demo sample (checked as values when made; the model and the
    database by :func:`demo_diverse_params`): ranks 1-2 of each reference, those that keep the reference's facts
    first (``keep_facts``, one setting of the decoder's options and the diverse mode's: both say it), each
    candidate scored with the paraphraser itself as its backward model (ParaBank 2's score: rank 1 keeps closer to
    the reference's meaning, ``bench/results/paraphraser-diverse-backward.txt``)."""
    return GenerateParams(
        corpus=corpus_id,
        model=str(DEMO_PARAPHRASER),
        diverse=True,
        diverse_options=DiverseOptions(
            negative_sets=DEMO_DIVERSE_SETS, samples=DEMO_DIVERSE_SAMPLES, keep=DEMO_DIVERSE_RANKS, keep_facts=True
        ),
        decode=DecodeOptions(device="cpu", keep_facts=True),
        backward_model=str(DEMO_PARAPHRASER),
        sample_per_length=DEMO_PER_LENGTH,
        lengths=DEMO_LENGTHS,
        name=name,
    )


def demo_diverse_params(corpus: Corpus, *, name: str = DEMO_PARAPHRASER_DIVERSE) -> dict[str, Any]:
    """The diverse job's params of the paraphraser's demo sample (:func:`demo_diverse_settings`), checked."""
    return generation_params(demo_diverse_settings(corpus.pk, name=name))


def shipped_models() -> dict[str, Path]:
    """The shipped models to install, by the name they get under the model root: the demo model, and the
    packaged paraphraser where its base (gemma3-270m) is installed (without it the adapter cannot load)."""
    found = {"demo": DEMO_MODEL}
    if is_installed(GEMMA3_270M):
        found["paraphraser"] = DEMO_PARAPHRASER
    return found


def _same_files(source: Path, dest: Path) -> bool:
    """Whether ``dest`` holds ``source``'s files as installed (the same inode, or the same size and time)."""
    wanted = sorted(f.name for f in source.iterdir() if f.is_file())
    if sorted(f.name for f in dest.iterdir() if f.is_file() and f.name != SHIPPED_MARK) != wanted:
        return False
    for name in wanted:
        a, b = (source / name).stat(), (dest / name).stat()
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) and (a.st_size, a.st_mtime_ns) != (b.st_size, b.st_mtime_ns):
            return False
    return True


def install_shipped_models(root: Path | None = None) -> dict[str, str]:
    """Install :func:`shipped_models` under ``root`` (default: ``var/models``, a default model root), hard
    linked (else copied); a name already installed and up to date is kept. Returns each name's state:
    "installed", "up to date", or "kept: ..." for a folder of that name that this did not install."""
    root = Path(root or models_root())
    root.mkdir(parents=True, exist_ok=True)
    states: dict[str, str] = {}
    for name, source in shipped_models().items():
        dest = root / name
        if dest.is_symlink() or (dest.exists() and not (dest / SHIPPED_MARK).is_file()):
            states[name] = f"kept: {dest} is not one this installed"
            continue
        if dest.is_dir() and _same_files(source, dest):
            states[name] = "up to date"
            continue
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{name}-") as tmp:
            staged = Path(tmp) / name
            staged.mkdir()
            for f in sorted(source.iterdir()):
                if not f.is_file():
                    continue
                try:
                    os.link(f, staged / f.name)
                except OSError:  # another file system (or one without hard links): a copy
                    shutil.copy2(f, staged / f.name)
            (staged / SHIPPED_MARK).write_text(f"installed by manage.py demo_setup from {source.name}\n")
            if dest.exists():
                shutil.rmtree(dest)
            staged.replace(dest)
        states[name] = "installed"
    return states
