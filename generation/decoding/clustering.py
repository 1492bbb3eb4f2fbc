"""k-medoids over word edit distance, one cluster pinned on the reference (ParaBank 2, section 3).

Candidates are compared as lowercased word sequences (``\\w+`` runs: punctuation stripped) under word
Levenshtein distance (rapidfuzz). Point 0 is the reference: it is the first medoid and never moves, and
whatever falls strictly nearer to it than to any other medoid (copies, changes no other medoid shares) is
the cluster that yields no output. The other medoids start by farthest-point initialisation (each the
point farthest from every medoid so far, ties to the earlier point: callers list candidates best first)
and then move, as in Voronoi-iteration k-medoids, to the member with the least summed distance to its
cluster until nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from ..words import words_of

PINNED = 0  # the reference's cluster (and point)
MAX_ROUNDS = 100


def comparable_words(text: str) -> list[str]:
    """What clustering compares: the lowercased words, punctuation stripped."""
    return words_of(text.lower())


def distance_matrix(texts: Sequence[str]) -> np.ndarray:
    """[n, n] word Levenshtein distances between ``texts`` (as :func:`comparable_words`)."""
    words = [comparable_words(t) for t in texts]
    return process.cdist(words, words, scorer=Levenshtein.distance, dtype=np.int32, workers=1)


@dataclass
class Clustering:
    """``medoids[c]``: the point at the centre of cluster c (``medoids[0]`` is the pinned point 0);
    ``labels[i]``: point i's cluster."""

    medoids: list[int]
    labels: np.ndarray


def farthest_point_medoids(dist: np.ndarray, k: int) -> list[int]:
    """Point 0, then up to k-1 points each farthest from its nearest medoid so far (ties: earliest).
    Stops early when every remaining point coincides with a medoid (distance 0): fewer distinct points
    than clusters asked for make fewer clusters, never empty ones."""
    medoids = [PINNED]
    nearest = dist[PINNED].astype(np.int64)
    while len(medoids) < k:
        far = int(np.argmax(nearest))
        if nearest[far] <= 0:
            break
        medoids.append(far)
        nearest = np.minimum(nearest, dist[far])
    return medoids


def assign(dist: np.ndarray, medoids: list[int]) -> np.ndarray:
    """Each point's nearest medoid's cluster. The pinned cluster takes only the points strictly nearer the
    reference than any other medoid (copies, and changes no other medoid shares); other ties go to the
    earlier cluster. Why ties leave the pinned cluster: a one-word swap is one word from the reference
    and one word from a medoid that shares its swap, and with ties to the pinned cluster no one-word swap
    but a medoid could ever be kept, although they are the closest paraphrases a small rewriter writes
    (on 96 development lines of the demo corpus, 1032-1127: rank 1's similarity to the reference +0.04,
    pairwise 1-BLEU among the outputs -3 points, a trade the rank-1 target asked for).
    Medoids stay in their own cluster."""
    near = dist[:, medoids].astype(np.float64)
    near[:, PINNED] += 0.5  # distances are whole words: this only breaks ties against the pinned cluster
    labels = np.argmin(near, axis=1)
    labels[medoids] = np.arange(len(medoids))
    return labels


def k_medoids(dist: np.ndarray, k: int) -> Clustering:
    """k-medoids of the points of ``dist`` (point 0 pinned as cluster 0's medoid), farthest-point start."""
    medoids = farthest_point_medoids(dist, k)
    labels = assign(dist, medoids)
    for _ in range(MAX_ROUNDS):
        moved = list(medoids)
        for c in range(1, len(medoids)):
            members = np.flatnonzero(labels == c)
            cost = dist[np.ix_(members, members)].sum(axis=1)
            moved[c] = int(members[int(np.argmin(cost))])
        if moved == medoids:
            break
        medoids = moved
        labels = assign(dist, medoids)
    return Clustering(medoids=medoids, labels=labels)


def pick_per_cluster(clustering: Clustering, scores: Sequence[float | tuple]) -> list[tuple[int, int]]:
    """(point, cluster) of the best-scoring point (lowest score; ties: earliest) of every cluster but the
    pinned one, best first. ``scores[i]`` is point i's (point 0's is never read): a number, or a tuple compared
    in order (``keep_facts``: fewest changed facts, then the score)."""
    best: dict[int, int] = {}
    for i in range(1, len(clustering.labels)):
        c = int(clustering.labels[i])
        if c == PINNED:
            continue
        if c not in best or scores[i] < scores[best[c]]:
            best[c] = i
    return sorted(((i, c) for c, i in best.items()), key=lambda ic: (scores[ic[0]], ic[0]))
