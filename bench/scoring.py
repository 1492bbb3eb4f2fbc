"""Claim: scoring a pair costs little beside the embedding; how long a 300-million-pair resource takes.

Scores the same pairs three times in one run, on ONE core (torch and tokenizers limited to one thread):
lexical features only (the baseline), lexical features + the all-MiniLM-L6-v2 cosine (the default
recipe), and those + the ``train_regressor --recipe v2`` families, each followed by a fitted
300-iteration HistGradientBoostingRegressor's predict; then the v2 features again with recipe v3's
estimator (the mean of the tuned ridge, the gradient boosting and the RBF-kernel SVR, fitted on 4,000 rows,
about ParaBank's judged candidates, so that the SVR keeps a campaign's number of support vectors); and
recipe v4's features (v3's plus those of the encoder's STS-tuned top two layers, run on the same pass
through the bottom four) with that estimator. Prints pairs/second/core of each, their ratios,
and the wall time of a 300M-pair resource on N single-core workers (N = 1, 8, 64).

Pairs: STS-B dev sentence pairs when the file exists (a realistic length mix), else seeded random
sentences. ``--paraphrases-per-reference K`` reuses each reference for K paraphrases, as a resource
does (ParaBank: one reference, many systems' outputs): each distinct text is embedded once per batch,
so the embedding cost per pair falls.

    .venv/bin/python bench/scoring.py                         # 800 pairs, ~1-2 minutes on 2 cores
    .venv/bin/python bench/scoring.py --pairs 2000 --paraphrases-per-reference 5

``--device`` (device mode, what a GPU worker's scoring job runs): the encoder on that device in ``--dtype``
(float16 by default on cuda, ``--encode-batch`` texts per forward pass, 1024 by default there), through the
job's code path (``embeddings.encoding_on``). Prints wall-clock pairs/s of one process for the embedding
features alone, the lexical features alone (the worker's CPU side) and both (the default recipe's features),
then the differences against CPU float32 -- the scores of every scoring so far -- on the first
``--check-pairs`` of the same pairs in the same run: each embedding feature's largest absolute difference, and
for stand-in regressors fitted on the float32 features (ridge, gradient boosting and histogram gradient
boosting, as ``train_regressor`` builds them) the largest and mean score difference (0-100), the pairs over one
point and the Spearman correlation of the two score lists.

    .venv/bin/python bench/scoring.py --device cuda --dtype float16 --pairs 50000 --paraphrases-per-reference 4
    .venv/bin/python bench/scoring.py --device cpu --dtype float32 --pairs 200   # the mode itself, on a CPU
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STSB_DEV = Path("/work/shared/data/stsb/sts-dev.csv")
RESOURCE_PAIRS = 300_000_000
WORKERS = (1, 8, 64)


def load_pairs(n: int, per_reference: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    sentences: list[tuple[str, str]] = []
    if STSB_DEV.is_file():
        for line in STSB_DEV.read_text(encoding="utf-8").splitlines():
            f = line.split("\t")
            if len(f) >= 7:
                sentences.append((f[5], f[6]))
    else:
        words = "the a of to and in is was for on that with as by at from it an be this are have".split()
        for _ in range(n):
            sentences.append(
                (
                    " ".join(rng.choices(words, k=rng.randint(5, 30))) + ".",
                    " ".join(rng.choices(words, k=rng.randint(5, 30))) + ".",
                )
            )
    pairs = []
    i = 0
    while len(pairs) < n:
        ref = sentences[i % len(sentences)][0]
        for k in range(per_reference):
            para = sentences[(i + k) % len(sentences)][1] if k else sentences[i % len(sentences)][1]
            pairs.append({"reference": ref, "paraphrase": para, "nll": rng.uniform(1, 20)})
        i += per_reference
    return pairs[:n]


WALL: dict[str, float] = {}


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    """CPU seconds of the call (one thread, so CPU time = core time, whatever else shares the machine);
    its wall seconds go to WALL."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    WALL[getattr(fn, "__name__", "?") + str(len(WALL))] = time.perf_counter() - wall
    return time.process_time() - cpu, out


def hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds < 72 * 3600 else f"{seconds / 86400:,.1f} d"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=800)
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        help="pairs per predict batch, as the scoring job (default 256; 2048 with --device cuda)",
    )
    parser.add_argument("--paraphrases-per-reference", type=int, default=1, dest="per_reference")
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default=None, help="device mode: the encoder on this device (docstring)"
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "float16", "bfloat16"),
        default=None,
        help="device mode: the encoder's dtype (default float16 on cuda, float32 on cpu)",
    )
    parser.add_argument(
        "--encode-batch",
        type=int,
        default=None,
        dest="encode_batch",
        help="device mode: texts per forward pass (default 1024 on cuda, the features' 64 on cpu)",
    )
    parser.add_argument(
        "--check-pairs",
        type=int,
        default=800,
        dest="check_pairs",
        help="device mode: pairs compared with CPU float32 (default 800)",
    )
    parser.add_argument("--threads", type=int, default=1, help="device mode: torch's CPU threads (default 1)")
    args = parser.parse_args()
    if args.device is not None or args.dtype is not None or args.encode_batch is not None:
        return device_main(args)
    args.batch = args.batch or 256

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")  # scoring.regressor's models
    import django

    django.setup()
    from sklearn.ensemble import HistGradientBoostingRegressor

    from scoring.embeddings import encoder
    from scoring.features import LEXICAL_FEATURES, pair_features
    from scoring.regressor import (
        RECIPES,
        candidate_estimators,
    )  # the recipes' estimators exactly as train_regressor builds them

    pairs = load_pairs(args.pairs, args.per_reference)
    load_s, _ = timed(encoder)
    pair_features(pairs[:32], with_embeddings=True)  # warm-up: first-call allocations

    def run(with_embeddings: bool, families=()):
        mats = []
        for start in range(0, len(pairs), args.batch):
            mats.append(
                pair_features(
                    pairs[start : start + args.batch], with_embeddings=with_embeddings, families=families
                ).matrix
            )
        return np.vstack(mats)

    lex_s, lex = timed(run, False)
    emb_s, emb = timed(run, True)
    v2_s, v2 = timed(run, True, RECIPES["v2"])
    v4_s, v4 = timed(run, True, RECIPES["v4"])
    y = np.nan_to_num(lex[:, LEXICAL_FEATURES.index("bleu")])  # any target: only predict time matters
    models = {}
    for name, X in (("lexical", lex), ("embedding", emb), ("v2", v2)):
        keep = ~np.isnan(X).any(axis=1)
        models[name] = HistGradientBoostingRegressor(max_iter=300, random_state=0).fit(X[keep], y[keep])
    lex_p, _ = timed(models["lexical"].predict, np.nan_to_num(lex))
    emb_p, _ = timed(models["embedding"].predict, np.nan_to_num(emb))
    v2_p, _ = timed(models["v2"].predict, np.nan_to_num(v2))

    def mean_of_three(X, recipe: str):
        keep = ~np.isnan(X).any(axis=1)
        rng = np.random.default_rng(0)
        rows = rng.integers(0, int(keep.sum()), 4000)  # a campaign-sized training set (jittered copies)
        X_fit = X[keep][rows] * (1 + 0.05 * rng.standard_normal((4000, X.shape[1])))
        y_fit = y[keep][rows] + rng.normal(0, 5, 4000)
        return candidate_estimators(4000, 0, recipe=recipe)["ridge_cv+gradient_boosting+svr"].fit(X_fit, y_fit)

    v3_model, v4_model = mean_of_three(v2, "v3"), mean_of_three(v4, "v4")
    v3_p, _ = timed(v3_model.predict, np.nan_to_num(v2))
    v4_p, _ = timed(v4_model.predict, np.nan_to_num(v4))
    n = len(pairs)
    rate_lex, rate_emb, rate_v2 = n / (lex_s + lex_p), n / (emb_s + emb_p), n / (v2_s + v2_p)
    rate_v3, rate_v4 = n / (v2_s + v3_p), n / (v4_s + v4_p)

    print(
        f"pairs: {n} ({'STS-B dev' if STSB_DEV.is_file() else 'random'} sentences, "
        f"{args.per_reference} paraphrase(s) per reference), batch {args.batch}, 1 thread; "
        f"encoder load {load_s:.1f} s (once per worker process)"
    )
    print(
        "times are CPU seconds of this one-thread process (= core seconds, robust to a busy machine); "
        f"wall seconds of the four runs: {sum(list(WALL.values())[1:5]):.1f}"
    )
    print(f"{'features':<22}{'pairs/s/core':>14}{'features s':>12}{'predict s':>11}")
    print(f"{'lexical (baseline)':<22}{rate_lex:>14,.0f}{lex_s:>12.2f}{lex_p:>11.3f}")
    print(f"{'lexical + embedding':<22}{rate_emb:>14,.0f}{emb_s:>12.2f}{emb_p:>11.3f}")
    print(f"{'+ recipe v2 families':<22}{rate_v2:>14,.0f}{v2_s:>12.2f}{v2_p:>11.3f}")
    print(f"{'  with v3 estimator':<22}{rate_v3:>14,.0f}{v2_s:>12.2f}{v3_p:>11.3f}")
    print(f"{'recipe v4 (+ sts head)':<22}{rate_v4:>14,.0f}{v4_s:>12.2f}{v4_p:>11.3f}")
    print(
        f"ratio embedding/baseline time per pair: {rate_lex / rate_emb:.1f}x slower "
        f"(throughput ratio {rate_emb / rate_lex:.3f})"
    )
    print(
        f"ratio recipe v2/embedding (the default) throughput: {rate_v2 / rate_emb:.3f} "
        f"({rate_emb / rate_v2:.2f}x the time per pair)"
    )
    print(
        f"ratio recipe v3/embedding (the default) throughput: {rate_v3 / rate_emb:.3f} "
        f"({rate_emb / rate_v3:.2f}x the time per pair; SVR support vectors: "
        f"{len(v3_model.named_estimators_['svr'][-1].support_)})"
    )
    print(
        f"ratio recipe v4/embedding (the default) throughput: {rate_v4 / rate_emb:.3f} "
        f"({rate_emb / rate_v4:.2f}x the time per pair; SVR support vectors: "
        f"{len(v4_model.named_estimators_['svr'][-1].support_)})"
    )
    print(f"\n{RESOURCE_PAIRS:,} pairs on N single-core workers (wall time, no I/O):")
    print(f"{'N':>4}{'lexical':>14}{'+ embedding':>16}")
    for workers in WORKERS:
        print(
            f"{workers:>4}{hours(RESOURCE_PAIRS / rate_lex / workers):>14}"
            f"{hours(RESOURCE_PAIRS / rate_emb / workers):>16}"
        )
    return 0


def device_main(args) -> int:
    """Device mode (module docstring): rates on ``--device`` in ``--dtype``, differences against CPU float32."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")  # scoring.regressor's models
    import django

    django.setup()
    from scipy.stats import spearmanr

    from scoring.embeddings import CPU_FLOAT32, EncoderPlacement, encoder, encoding_on, pair_similarities
    from scoring.features import EMBEDDING_FEATURES, pair_features
    from scoring.regressor import candidate_estimators
    from scoring.scoring_device import DEFAULT_CUDA_DTYPE, DEFAULT_CUDA_ENCODE_BATCH

    device = args.device or "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: torch sees no CUDA device here", file=sys.stderr)
        return 2
    on_cuda = device == "cuda"
    placement = EncoderPlacement(
        device=device,
        dtype=args.dtype or (DEFAULT_CUDA_DTYPE if on_cuda else "float32"),
        batch_size=args.encode_batch or (DEFAULT_CUDA_ENCODE_BATCH if on_cuda else None),
    )
    batch = args.batch or (2048 if on_cuda else 256)
    pairs = load_pairs(args.pairs, args.per_reference)
    check = pairs[: min(args.check_pairs, len(pairs))]

    def batches(items):
        return [items[i : i + batch] for i in range(0, len(items), batch)]

    def wall(fn):
        if on_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if on_cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start, out

    load_s, _ = wall(lambda: encoder(placement.device, placement.dtype))
    pair_similarities([p["reference"] for p in pairs[:64]], [p["paraphrase"] for p in pairs[:64]], placement=placement)

    def embeddings_only():
        for part in batches(pairs):
            pair_similarities([p["reference"] for p in part], [p["paraphrase"] for p in part], placement=placement)

    def features(with_embeddings: bool):
        with encoding_on(placement):
            return np.vstack([pair_features(part, with_embeddings=with_embeddings).matrix for part in batches(pairs)])

    emb_s, _ = wall(embeddings_only)
    lex_s, _ = wall(lambda: features(False))
    all_s, device_matrix = wall(lambda: features(True))

    with encoding_on(CPU_FLOAT32):  # the first pairs as every scoring so far: the reference to stay close to
        reference = pair_features(check, with_embeddings=True)
    X32, X = reference.matrix, device_matrix[: len(check)]
    keep = reference.keep
    names = reference.names
    n = len(pairs)
    card = torch.cuda.get_device_name() if on_cuda else f"CPU, {args.threads} torch thread(s)"
    print(
        f"device mode: {card}; torch {torch.__version__}; encoder {placement.device}/{placement.dtype}, "
        f"{placement.batch_size or 64} texts per forward pass, {batch} pairs per batch; {n} pairs "
        f"({'STS-B dev' if STSB_DEV.is_file() else 'random'} sentences, {args.per_reference} paraphrase(s) per "
        f"reference); encoder load {load_s:.1f} s"
    )
    print("wall-clock rates of one process:")
    print(f"  embedding features alone (cosine, alignment)   {n / emb_s:>12,.0f} pairs/s")
    print(f"  lexical features alone (the CPU side)          {n / lex_s:>12,.0f} pairs/s")
    print(f"  lexical + embedding (the default recipe)       {n / all_s:>12,.0f} pairs/s")
    print(
        f"against CPU float32 on the first {len(check)} pairs ({int(keep.sum())} scored; 0 everywhere when this "
        "run is CPU float32 itself):"
    )
    for name in EMBEDDING_FEATURES:
        j = names.index(name)
        print(f"  {name:<10} max |difference| {np.abs(X[keep, j] - X32[keep, j]).max():.2e}")
    rows = np.flatnonzero(keep)
    cosine, align_f = X32[rows, names.index("cosine")], X32[rows, names.index("align_f")]
    target = np.clip(100 * (0.6 * cosine + 0.4 * align_f), 0, 100)  # a stand-in for human similarity
    for name, estimator in candidate_estimators(len(rows), 0).items():
        estimator.fit(X32[rows], target)
        a = np.clip(estimator.predict(X32[rows]), 0, 100)
        b = np.clip(estimator.predict(X[rows]), 0, 100)
        d = np.abs(a - b)
        rho = spearmanr(a, b)[0] if d.any() else 1.0
        print(
            f"  score, {name:<24} max |difference| {d.max():.3f}  mean {d.mean():.4f}  over 1 point "
            f"{int((d > 1).sum())}  Spearman {rho:.6f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
