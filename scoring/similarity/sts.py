"""STS-B and SICK as development data for the similarity regressor: real human similarity judgments.

* ``sts_read`` (``scoring.similarity.sts_files``): pairs and gold scores on the regressor's 0-100 scale.
* ``sts_import``: a file as a campaign through ``annotation.campaigns.importers.import_generic``: sentence1 is the
  reference (its id a hash of its text, so pairs sharing a first sentence share a reference and the
  group split keeps them together), sentence2 the candidate of system "sts", the gold mean as one
  judgment (rounded to an integer, like a slider) of one imported pseudo-worker "gold".
* ``sts_evaluate``: Spearman's rho of a regressor on a file, next to the single features it is built from
  (embedding cosine, sentence BLEU, character trigram Jaccard), to see what the regressor adds.

Command line (the README's figures)::

    python -m scoring.similarity.sts import --kind stsb /work/shared/data/stsb/sts-train.csv --campaign stsb-train
    python -m scoring.similarity.sts evaluate --regressor stsb --kind stsb /work/shared/data/stsb/sts-dev.csv
"""

from __future__ import annotations

import csv
import hashlib
import tempfile
from pathlib import Path

import numpy as np

from scoring.similarity.features import pair_features
from scoring.similarity.sts_files import KINDS, StsPair, sts_read

__all__ = ["KINDS", "StsPair", "sts_evaluate", "sts_import", "sts_read"]

BASELINE_FEATURES = ("cosine", "align_f", "bleu", "char3_jaccard", "prec_1")


def _bucket(text: str) -> int:
    from annotation.models import LENGTH_BUCKETS

    n = len(text.split())
    return next((b for b in LENGTH_BUCKETS if n <= b), LENGTH_BUCKETS[-1])


def sts_import(*, path, kind: str, campaign_name: str):
    """Import an STS file as a campaign (idempotent: re-importing changes nothing)."""
    from annotation.campaigns.importers import import_generic

    pairs = sts_read(path, kind=kind)
    with tempfile.TemporaryDirectory() as tmp:
        tsv = Path(tmp) / "judgments.tsv"
        with open(tsv, "w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh, delimiter="\t")
            writer.writerow(
                ["worker", "reference", "reference_text", "length", "systems", "candidate", "score", "fluency"]
            )
            for p in pairs:
                ref_id = "s" + hashlib.sha1(p.sentence1.encode("utf-8")).hexdigest()[:16]
                writer.writerow(
                    ["gold", ref_id, p.sentence1, _bucket(p.sentence1), "sts", p.sentence2, int(round(p.score)), 2]
                )
        mapping = {
            f: f
            for f in ("worker", "reference", "reference_text", "length", "systems", "candidate", "score", "fluency")
        }
        return import_generic(campaign_name=campaign_name, path=tsv, mapping=mapping)


def _rho(y, x) -> float | None:
    from scoring.regressor import spearman  # after django.setup() (main): scoring.regressor imports the models

    return spearman(np.asarray(y), np.asarray(x))


def sts_evaluate(*, regressor_name: str, path, kind: str) -> dict:
    """Spearman's rho (and bootstrap interval over pairs) of a regressor on an STS file, with baselines."""
    # imported here, after main's django.setup(): scoring.regressor imports the Django models (not a cycle:
    # nothing it imports imports this module)
    from scoring.regressor import bootstrap_interval, regressor_load

    fitted = regressor_load(regressor_name)
    pairs = sts_read(path, kind=kind)
    dicts = [{"reference": p.sentence1, "paraphrase": p.sentence2} for p in pairs]
    gold = np.array([p.score for p in pairs])
    # the features once, with the cosine for the baselines; the regressor's columns are picked by name,
    # which is what FittedRegressor.predict computes (same features, same clipping)
    fb = pair_features(dicts, with_embeddings=True, families=getattr(fitted, "families", ()))
    keep = fb.keep
    columns = [fb.names.index(name) for name in fitted.features]
    pred = np.clip(fitted.estimator.predict(fb.matrix[keep][:, columns]), 0.0, 100.0)
    gold = gold[keep]
    out = {
        "regressor": fitted.name,
        "file": str(path),
        "kind": kind,
        "n": int(keep.sum()),
        "n_skipped": int((~keep).sum()),
        "spearman": _rho(gold, pred),
        "spearman_ci95": bootstrap_interval(gold, pred, np.arange(len(gold)), seed=0),
        "trained_on": fitted.signature.get("campaign"),
        "baselines": {},
    }
    for name in BASELINE_FEATURES:
        out["baselines"][name] = _rho(gold, fb.matrix[keep, fb.names.index(name)])
    return out


def main(argv=None) -> int:
    import argparse
    import json
    import os
    import sys

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    import django

    django.setup()
    parser = argparse.ArgumentParser(prog="python -m scoring.similarity.sts", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="import an STS-B / SICK file as a campaign")
    imp.add_argument("path")
    imp.add_argument("--kind", choices=KINDS, required=True)
    imp.add_argument("--campaign", required=True)
    ev = sub.add_parser("evaluate", help="Spearman's rho of a regressor on an STS-B / SICK file")
    ev.add_argument("path")
    ev.add_argument("--kind", choices=KINDS, required=True)
    ev.add_argument("--regressor", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "import":
            result = sts_import(path=args.path, kind=args.kind, campaign_name=args.campaign).as_dict()
        else:
            result = sts_evaluate(regressor_name=args.regressor, path=args.path, kind=args.kind)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
