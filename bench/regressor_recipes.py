"""Claim: which similarity-regressor recipe generalises to ParaBank references it never saw.

Grouped cross-validation on ParaBank's released judgments (``/work/shared/data/parabank-eval``, the 300
development references): ``GroupKFold`` by reference (5 folds, shuffled with a fixed seed, a reference's
candidates never split), out-of-fold predictions pooled over all candidates: Spearman's rho overall, per
reference length (5/10/20/40) and the mean of the per-fold rhos. The target is the product's
(``scoring.regressor.training_data``: counted workers, N/A and attention copies excluded), raw mean or
bias-corrected (zscore). Each recipe is also trained on STS-B train and evaluated on STS-B dev
(Spearman's rho; nothing tuned on dev). The baseline (the product's default recipe before issue 17) is in
the same run, so every line is comparable with it.

The campaign is imported into a scratch SQLite database and the features are computed once and cached
under ``--cache`` (default ``/tmp/regressor-recipes``): repeated runs are cheap. One thread.

    .venv/bin/python bench/regressor_recipes.py                 # all recipes (~20 min on the busy 2 cores)
    .venv/bin/python bench/regressor_recipes.py --recipes base v2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARABANK = Path("/work/shared/data/parabank-eval")
STSB = Path("/work/shared/data/stsb")
FOLDS = 5


def setup(cache: Path) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{cache / 'db.sqlite3'}"
    os.environ["PARAFORGE_STORAGE_URL"] = f"file://{cache / 'storage'}"
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    import django
    import torch

    torch.set_num_threads(1)
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def parabank_data(cache: Path, target: str):
    """(pairs, y, groups, buckets) of the parabank-eval campaign, as train_regressor would read them."""
    import numpy as np

    from annotation.importers import import_parabank
    from annotation.models import Campaign, Reference
    from scoring.regressor import training_data

    path = cache / f"parabank-{target}.json"
    if path.is_file():
        d = json.loads(path.read_text())
        return d["pairs"], np.array(d["y"]), np.array(d["groups"]), np.array(d["buckets"])
    if not Campaign.objects.filter(name="parabank-eval").exists():
        import_parabank(
            campaign_name="parabank-eval",
            references_path=PARABANK / "ref.tsv",
            candidates_path=PARABANK / "candidates.tsv",
        )
    campaign = Campaign.objects.get(name="parabank-eval")
    data = training_data(campaign, target=target)
    bucket = dict(Reference.objects.filter(campaign=campaign).values_list("pk", "length_bucket"))
    buckets = [bucket[g] for g in data.groups.tolist()]
    path.write_text(
        json.dumps({"pairs": data.pairs, "y": data.y.tolist(), "groups": data.groups.tolist(), "buckets": buckets})
    )
    return data.pairs, data.y, data.groups, np.array(buckets)


def stsb_data(name: str):
    """STS-B pairs as the product imports them (gold x 20 rounded, group = first sentence)."""
    import numpy as np

    from scoring.sts import sts_read

    rows = sts_read(STSB / name, kind="stsb")
    pairs = [{"reference": r.sentence1, "paraphrase": r.sentence2} for r in rows]
    groups = [int(hashlib.sha1(r.sentence1.encode()).hexdigest()[:12], 16) for r in rows]
    # group-aware feature batches need a reference's pairs next to each other
    order = sorted(range(len(rows)), key=lambda i: (groups[i], i))
    return (
        [pairs[i] for i in order],
        np.array([round(rows[i].score) for i in order], dtype=float),
        np.array([groups[i] for i in order]),
    )


def features(cache: Path, key: str, pairs):
    """All families' features of ``pairs`` (cached): matrix, keep, names."""
    import numpy as np

    from scoring.features import FAMILIES, feature_names
    from scoring.regressor import features_in_batches

    path = cache / f"features-{key}.npz"
    names = feature_names(with_embeddings=True, families=FAMILIES)
    if path.is_file():
        z = np.load(path, allow_pickle=False)
        if list(z["names"]) == names:
            return z["X"], z["keep"], names
    t = time.process_time()
    X, keep = features_in_batches(pairs, with_embeddings=True, families=FAMILIES)
    print(f"  features of {key}: {len(pairs)} pairs, {time.process_time() - t:.0f} CPU s", file=sys.stderr)
    np.savez(path, X=X, keep=keep, names=np.array(names))
    return X, keep, names


def columns(names: list[str], *, embeddings: bool, families: tuple[str, ...]) -> list[int]:
    from scoring.features import feature_names

    wanted = feature_names(with_embeddings=embeddings, families=families)
    return [names.index(n) for n in wanted]


def make_estimator(kind: str, n: int, seed: int = 0):
    from scoring.regressor import _estimators

    return _estimators(n, seed, recipe="v3")[kind]  # v3's (= v4's) set: the base set plus ridge_cv, svr and the means


def grouped_cv(X, y, groups, kind: str, *, seed: int = 0):
    """Pooled out-of-fold predictions and the per-fold rhos of one estimator."""
    import numpy as np
    from sklearn.base import clone
    from sklearn.model_selection import GroupKFold

    from scoring.regressor import _one_thread, select_estimator, spearman

    pred = np.zeros(len(y))
    rhos = []
    for tr, te in GroupKFold(n_splits=FOLDS, shuffle=True, random_state=seed).split(X, y, groups):
        chosen = kind
        if kind.startswith("select-"):  # what train_regressor does: 3-fold grouped CV on the train part
            chosen, _ = select_estimator(X[tr], y[tr], groups[tr], seed=seed, recipe=kind[len("select-") :])
        with _one_thread():
            model = clone(make_estimator(chosen, len(tr), seed)).fit(X[tr], y[tr])
            pred[te] = model.predict(X[te])
        rhos.append(spearman(y[te], pred[te]))
    return pred, rhos


# name: (embeddings, families, estimator or "select", target)
RECIPES = {
    "base-ridge": (True, (), "ridge", "raw"),
    "base-gb": (True, (), "gradient_boosting", "raw"),
    "base-hgb": (True, (), "hist_gradient_boosting", "raw"),
    "lexical-ridge": (False, (), "ridge", "raw"),
    "+nll2-ridge": (True, ("nll2",), "ridge", "raw"),
    "+systems-ridge": (True, ("systems",), "ridge", "raw"),
    "+group-ridge": (True, ("group",), "ridge", "raw"),
    "+agree-ridge": (True, ("agree",), "ridge", "raw"),
    "v2-ridge": (True, ("nll2", "systems", "group", "agree"), "ridge", "raw"),
    "v2-gb": (True, ("nll2", "systems", "group", "agree"), "gradient_boosting", "raw"),
    "v2-hgb": (True, ("nll2", "systems", "group", "agree"), "hist_gradient_boosting", "raw"),
    "v2-ridge-zscore": (True, ("nll2", "systems", "group", "agree"), "ridge", "zscore"),
    "v2-gb-zscore": (True, ("nll2", "systems", "group", "agree"), "gradient_boosting", "zscore"),
    "v2-hgb-zscore": (True, ("nll2", "systems", "group", "agree"), "hist_gradient_boosting", "zscore"),
    "v2-lexical-ridge": (False, ("nll2", "systems", "group"), "ridge", "raw"),
    "v2-lexical-gb": (False, ("nll2", "systems", "group"), "gradient_boosting", "raw"),
    "base-ridge_cv": (True, (), "ridge_cv", "raw"),
    "v2-ridge_cv": (True, ("nll2", "systems", "group", "agree"), "ridge_cv", "raw"),
    "v2-ridge_cv-zscore": (True, ("nll2", "systems", "group", "agree"), "ridge_cv", "zscore"),
    "v2-vote": (True, ("nll2", "systems", "group", "agree"), "ridge_cv+gradient_boosting", "raw"),
    "v2-vote-zscore": (True, ("nll2", "systems", "group", "agree"), "ridge_cv+gradient_boosting", "zscore"),
    "v3-svr": (True, ("nll2", "systems", "group", "agree"), "svr", "raw"),
    "v3-vote3": (True, ("nll2", "systems", "group", "agree"), "ridge_cv+gradient_boosting+svr", "raw"),
    "v3-vote3-zscore": (True, ("nll2", "systems", "group", "agree"), "ridge_cv+gradient_boosting+svr", "zscore"),
    "base (product default)": (True, (), "select-base", "raw"),
    "v2 (product --recipe v2)": (True, ("nll2", "systems", "group", "agree"), "select-v2", "raw"),
    "v2 --target zscore": (True, ("nll2", "systems", "group", "agree"), "select-v2", "zscore"),
    "v3 (product --recipe v3)": (True, ("nll2", "systems", "group", "agree"), "select-v3", "raw"),
    "+sts-ridge": (True, ("sts",), "ridge", "raw"),
    "v4-ridge_cv": (True, ("nll2", "systems", "group", "agree", "sts"), "ridge_cv", "raw"),
    "v4-vote3": (True, ("nll2", "systems", "group", "agree", "sts"), "ridge_cv+gradient_boosting+svr", "raw"),
    "v4 (product --recipe v4)": (True, ("nll2", "systems", "group", "agree", "sts"), "select-v4", "raw"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/regressor-recipes"))
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES))
    parser.add_argument("--no-stsb", action="store_true", help="skip the STS-B dev column")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    setup(args.cache)
    import numpy as np

    from scoring.regressor import _one_thread, spearman

    data, feats = {}, {}
    for target in sorted({RECIPES[r][3] for r in args.recipes} | {"raw"}):
        data[target] = parabank_data(args.cache, target)
        feats[target] = features(args.cache, f"parabank-{target}", data[target][0])
    if not args.no_stsb:
        sts_train, sts_dev = stsb_data("sts-train.csv"), stsb_data("sts-dev.csv")
        sts_feats = features(args.cache, "stsb-train", sts_train[0]), features(args.cache, "stsb-dev", sts_dev[0])

    print(
        f"ParaBank dev references, GroupKFold({FOLDS}, shuffle, seed {args.seed}) by reference, pooled "
        f"out-of-fold Spearman's rho; STS-B dev: trained on STS-B train"
    )
    print(
        "rho: against the recipe's own target; rho raw: against the raw mean similarity (the common "
        "yardstick, ParaBank's); folds: mean and SD of the 5 per-fold rhos; lenN: rho raw per reference length"
    )
    raw_pairs, raw_y = data["raw"][0], data["raw"][1]
    raw_index = {(p["reference"], p["paraphrase"]): i for i, p in enumerate(raw_pairs)}
    header = (
        f"{'recipe':<26}{'target':>7}{'n':>6}{'rho':>7}{'rho raw':>8}{'folds':>13}{'len5':>7}{'len10':>7}"
        f"{'len20':>7}{'len40':>7}{'STS-B dev':>11}"
    )
    print(header)
    for name in args.recipes:
        emb, fams, kind, target = RECIPES[name]
        pairs, y, groups, buckets = data[target]
        X_all, keep, names = feats[target]
        cols = columns(names, embeddings=emb, families=fams)
        X, yk, gk, bk = X_all[keep][:, cols], y[keep], groups[keep], buckets[keep]
        pred, rhos = grouped_cv(X, yk, gk, kind, seed=args.seed)
        kept_pairs = [p for p, k in zip(pairs, keep) if k]
        y_raw = np.array([raw_y[raw_index[(p["reference"], p["paraphrase"])]] for p in kept_pairs])
        per = [spearman(y_raw[bk == b], pred[bk == b]) for b in (5, 10, 20, 40)]
        folds = f"{np.mean(rhos):.3f}±{np.std(rhos):.3f}"
        sts = ""
        if not args.no_stsb:
            (Xt, kt, _), (Xd, kd, _) = sts_feats
            chosen = kind
            if kind.startswith("select-"):
                from scoring.regressor import select_estimator

                chosen, _ = select_estimator(
                    Xt[kt][:, cols], sts_train[1][kt], sts_train[2][kt], seed=args.seed, recipe=kind[len("select-") :]
                )
            with _one_thread():
                model = make_estimator(chosen, int(kt.sum()), args.seed).fit(Xt[kt][:, cols], sts_train[1][kt])
                sts = f"{spearman(sts_dev[1][kd], model.predict(Xd[kd][:, cols])):.4f}"
        print(
            f"{name:<26}{target:>7}{len(yk):>6}{spearman(yk, pred):>7.3f}{spearman(y_raw, pred):>8.4f}{folds:>13}"
            + "".join(f"{r:>7.3f}" for r in per)
            + f"{sts:>11}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
