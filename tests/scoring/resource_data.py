"""A small generated resource built in code, in the candidate-shard record format documented on
``generation.models.Resource``, and helpers to score it, for the scoring-job and release tests."""

from __future__ import annotations

import numpy as np

from generation.models import Corpus, CorpusStatus, Resource, ResourceShard
from infra.shards import write_jsonl_gz
from jobs.models import Job, JobStatus
from scoring.diversity import tokens
from scoring.models import Regressor, ScoredResource
from scoring.scored.job import score_shard

REFERENCES = [
    "How often do earthquakes occur in this region?",
    "He left the house very early this morning to catch the train.",
    "The committee approved the new budget yesterday.",
    "She could not find her keys anywhere.",
    "The river flooded the whole valley last spring.",
    "They decided to postpone the meeting until Friday.",
    "A small dog was barking at the mailman.",
    "We need more time to finish the report.",
]
PARAPHRASES = [
    [
        "How frequently do earthquakes happen in this area?",
        "How often do earthquakes occur in this region?",
        "Earthquakes occur here how often?",
    ],
    ["He departed from home very early today.", "He left the home very early this morning."],
    [
        "Yesterday the committee passed the new budget.",
        "The new budget was approved by the committee.",
        "The committee approved the budget.",
    ],
    ["She was unable to locate her keys.", "Her keys could not be found anywhere."],
    ["Last spring the river flooded the entire valley.", "The whole valley was flooded by the river."],
    ["They chose to delay the meeting until Friday.", "The meeting was postponed to Friday."],
    ["A little dog barked at the postman.", "The mailman was barked at by a small dog."],
    ["We require additional time to complete the report.", "More time is needed to finish the report."],
]
SETTINGS = {"model": "demo", "model_sha256": "abc", "systems": [17, 21, 28], "beam": 4, "nbest": 1, "seed": 7}


def record(i: int, reference: str, paraphrases: list[str]) -> dict:
    candidates = []
    for j, text in enumerate(paraphrases):
        systems = [str(17 + 4 * (j % 3))] + (["28"] if j == 0 else [])
        candidates.append(
            {
                "text": text,
                "nll": round(1.5 + 0.25 * j + 0.01 * i, 4),
                "systems": systems,
                "constraints": {
                    s: {"positive": [[reference.split()[0].lower()]], "negative": [], "bos_avoid": []} for s in systems
                },
            }
        )
    return {
        "ref_index": i,
        "reference": reference,
        "source": f"Quelle {i}.",
        "length": len(reference.split()),
        "candidates": candidates,
        "no_constraints": [],
    }


def records(n: int | None = None) -> list[dict]:
    refs = (
        REFERENCES
        if n is None
        else [REFERENCES[i % len(REFERENCES)] + f" #{i}" * (i >= len(REFERENCES)) for i in range(n)]
    )
    return [record(i, r, PARAPHRASES[i % len(PARAPHRASES)]) for i, r in enumerate(refs)]


def build_resource(
    *, name: str = "res", shards: list[list[dict]] | None = None, job: Job | None = None, corpus: Corpus | None = None
) -> Resource:
    """A Resource whose candidate shards are written to the configured storage (default: 3 shards)."""
    if shards is None:
        all_records = records()
        shards = [all_records[0:3], all_records[3:6], all_records[6:]]
    corpus = corpus or Corpus.objects.create(name=f"{name}-corpus", format="mono", status=CorpusStatus.READY)
    resource = Resource.objects.create(name=name, corpus=corpus, job=job, settings=SETTINGS)
    n_refs = n_pairs = 0
    for index, recs in enumerate(shards):
        key = f"resources/{resource.pk}/shard-{index:05d}.jsonl.gz"
        info = write_jsonl_gz(key, recs)
        pairs = sum(len(r["candidates"]) for r in recs)
        ResourceShard.objects.create(
            resource=resource, index=index, key=key, n_references=len(recs), n_pairs=pairs, sha256=info["sha256"]
        )
        n_refs, n_pairs = n_refs + len(recs), n_pairs + pairs
    resource.n_references, resource.n_pairs = n_refs, n_pairs
    resource.save(update_fields=["n_references", "n_pairs"])
    return resource


class OverlapScorer:
    """A stand-in regressor for the release tests (passed to ``score_shard(regressor=...)``): 100 x the
    unigram F1 of the pair; NaN (skipped) for references longer than ``max_words``."""

    def __init__(self, max_words: int = 100):
        self.max_words = max_words
        self.calls = 0

    def predict(self, pairs: list[dict]) -> np.ndarray:
        self.calls += 1
        out = []
        for p in pairs:
            ref, para = tokens(p["reference"]), tokens(p["paraphrase"])
            if len(ref) > self.max_words:
                out.append(float("nan"))
                continue
            common = len(set(ref) & set(para))
            out.append(100.0 * 2 * common / max(1, len(set(ref)) + len(set(para))))
        return np.array(out)


def make_regressor(name: str = "overlap", campaign=None, rho: float = 0.71) -> Regressor:
    return Regressor.objects.create(
        name=name,
        campaign=campaign,
        key=f"regressors/{name}.joblib",
        metrics={"spearman_test": rho, "n_train": 80, "n_test": 20},
        signature={"features": "lexical", "estimator": "test"},
    )


def score_with(resource: Resource, regressor: Regressor, scorer) -> ScoredResource:
    """Score every shard through ``score_shard`` with an injected scorer and record a completed job."""
    job = Job.objects.create(
        kind="score_resource", status=JobStatus.SUCCEEDED, params={"resource": resource.pk, "regressor": regressor.name}
    )
    scored = ScoredResource.objects.create(resource=resource, regressor=regressor, job=job)
    scored.shards = [
        score_shard(shard=shard, scored=scored, job_id=job.pk, regressor=scorer, batch_size=4)
        for shard in resource.shards.order_by("index")
    ]
    scored.n_pairs = sum(e["n_pairs"] for e in scored.shards)
    scored.save(update_fields=["shards", "n_pairs"])
    return scored
