"""A GPU scoring chunk's lexical features on several processes (issue 31): ``ScoringDevice.cpu_workers`` and
``lexical_processes.cpu_workers_on``. The matrix, and so every score, must be the same as the one process's, value for
value, NaN rows of over-long references included; the lexical processes are started once and reused, carry no
torch, and start inside a Celery prefork child too (the GPU worker of docker/compose.yaml)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from jobs.models import Job
from jobs.params import from_values, to_json
from scoring.models import Regressor, ScoredResource
from scoring.scored.device import ScoringDevice, ScoringDeviceError
from scoring.scored.job import score_resource_launch
from scoring.similarity.embeddings import CPU_FLOAT32, EncoderPlacement
from scoring.similarity.features import PairError, pair_features
from scoring.similarity.lexical_processes import (
    LEXICAL_PROCESS_CODE,
    LexicalProcessError,
    close_lexical_processes,
    cpu_workers_on,
    current_cpu_workers,
    lexical_processes,
)

from .resource_data import PARAPHRASES, REFERENCES, build_resource, record, records
from .test_scoring_job import tiny_regressor

ROOT = Path(__file__).resolve().parents[2]
STSB_DEV = ROOT.parent / "shared" / "data" / "stsb" / "sts-dev.csv"
LONG_REFERENCE = " ".join(["unbelievably"] * 60)  # 60 words, well over 100 of the encoder's subword tokens


@pytest.fixture(scope="module", autouse=True)
def lexical_processes_stopped():
    """No lexical process left running for the rest of the suite."""
    yield
    close_lexical_processes()


def resource_pairs() -> list[dict]:
    """The resource's candidates as the job builds its pairs (constraints {system: set}), an unrelated pair per
    reference, pairs without an NLL, an empty paraphrase and two over-long references (NaN rows)."""
    pairs = []
    for r in records():
        for c in r["candidates"]:
            pairs.append(
                {"reference": r["reference"], "paraphrase": c["text"], "nll": c["nll"], "constraints": c["constraints"]}
            )
    for i, ref in enumerate(REFERENCES):
        pairs.append({"reference": ref, "paraphrase": PARAPHRASES[(i + 1) % len(PARAPHRASES)][0], "nll": None})
    pairs.insert(5, {"reference": LONG_REFERENCE, "paraphrase": "Unbelievable.", "nll": 2.0})
    pairs.insert(17, {"reference": REFERENCES[0], "paraphrase": "", "nll": None})
    pairs.append({"reference": LONG_REFERENCE + " indeed", "paraphrase": REFERENCES[1]})
    return pairs


def same(a, b) -> bool:
    return a.names == b.names and np.array_equal(a.keep, b.keep) and np.array_equal(a.matrix, b.matrix, equal_nan=True)


def test_two_processes_give_the_one_process_matrix_value_for_value():
    pairs = resource_pairs()
    one = pair_features(pairs, with_embeddings=False, families=("nll2", "systems", "group"))
    with cpu_workers_on(2):
        assert current_cpu_workers() == 2
        two = pair_features(pairs, with_embeddings=False, families=("nll2", "systems", "group"))
        again = pair_features(pairs[:7], with_embeddings=False)
    assert current_cpu_workers() == 1
    assert (~one.keep).sum() == 2 and np.isnan(one.matrix[~one.keep]).all()
    assert same(one, two)
    assert same(pair_features(pairs[:7], with_embeddings=False), again)


def test_with_the_encoder_the_lexical_rows_overlap_it_and_change_nothing():
    """The GPU path's order: rows sent off, the encoder's passes (here CPU float32), rows collected, then the
    families built on both."""
    pairs = resource_pairs()
    families = ("nll2", "group", "agree")
    one = pair_features(pairs, with_embeddings=True, families=families)
    with cpu_workers_on(2):
        two = pair_features(pairs, with_embeddings=True, families=families)
    assert (~one.keep).sum() == 2 and same(one, two)


@pytest.mark.skipif(not STSB_DEV.is_file(), reason="no STS-B dev file beside the project")
def test_stsb_dev_pairs_in_scoring_batches_give_the_same_matrix():
    lines = [f.split("\t") for f in STSB_DEV.read_text(encoding="utf-8").splitlines()]
    pairs = [{"reference": f[5], "paraphrase": f[6], "nll": 0.01 * i} for i, f in enumerate(lines) if len(f) >= 7]
    pairs = pairs[:1200] + [{"reference": LONG_REFERENCE, "paraphrase": pairs[0]["paraphrase"]}]
    batches = [pairs[i : i + 600] for i in range(0, len(pairs), 600)]  # several chunks per process, several calls
    one = [pair_features(b, with_embeddings=False) for b in batches]
    with cpu_workers_on(2):
        two = [pair_features(b, with_embeddings=False) for b in batches]
    assert all(same(a, b) for a, b in zip(one, two, strict=True))
    assert not one[-1].keep[-1]


def test_the_processes_are_started_once_carry_no_torch_and_report_errors_as_the_sequential_path():
    pool = lexical_processes(2)
    pids = pool.pids
    with cpu_workers_on(2):
        pair_features(resource_pairs(), with_embeddings=False)
        pair_features(resource_pairs()[:3], with_embeddings=False)
    assert lexical_processes(2) is pool and pool.pids == pids and len(set(pids)) == 2
    bad = [*resource_pairs()[:4], {"reference": "A b.", "paraphrase": "A c.", "constraints": "not a dict"}]
    with pytest.raises(PairError, match="constraints must be a dict"):
        pair_features(bad, with_embeddings=False)
    with cpu_workers_on(2), pytest.raises(PairError, match="constraints must be a dict"):
        pair_features(bad, with_embeddings=False)
    assert lexical_processes(2) is pool and not pool.broken  # an error in a pair leaves the processes working
    # what a lexical process imports: this module and its lexical dependencies, never torch or the encoder
    probe = LEXICAL_PROCESS_CODE.replace("lexical_process_main(lexical_rows)", "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_lexical_process_that_dies_fails_the_call_and_the_next_call_starts_fresh_ones():
    pool = lexical_processes(2)
    os.kill(pool.pids[0], signal.SIGKILL)
    time.sleep(0.2)
    with cpu_workers_on(2):
        with pytest.raises(LexicalProcessError, match="exited"):
            pair_features(resource_pairs(), with_embeddings=False)
        fresh = pair_features(resource_pairs(), with_embeddings=False)
    assert lexical_processes(2) is not pool and set(lexical_processes(2).pids).isdisjoint(pool.pids)
    assert same(fresh, pair_features(resource_pairs(), with_embeddings=False))


def test_the_processes_start_inside_a_daemonic_celery_prefork_child():
    """``celery worker`` (prefork) runs a task in a daemonic billiard child, where ``multiprocessing`` refuses to
    start processes; the lexical processes are plain subprocesses and start there too."""
    script = textwrap.dedent(
        """
        import billiard, numpy as np
        from scoring.similarity.features import pair_features
        from scoring.similarity.lexical_processes import close_lexical_processes, cpu_workers_on

        PAIRS = [{"reference": f"The cat sat on mat {i}.", "paraphrase": f"A cat sat on the mat {i}."}
                 for i in range(50)]

        def task(_):
            one = pair_features(PAIRS, with_embeddings=False).matrix
            with cpu_workers_on(2):
                two = pair_features(PAIRS, with_embeddings=False).matrix
            close_lexical_processes()
            return billiard.current_process().daemon, bool(np.array_equal(one, two))

        if __name__ == "__main__":
            pool = billiard.Pool(1)
            print(pool.apply(task, (0,)))
            pool.close()
            pool.join()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "(True, True)", out.stderr


def test_the_job_option_is_checked_travels_in_the_params_and_picks_the_processes():
    assert ScoringDevice().cpu_workers is None and from_values(ScoringDevice, {}) == ScoringDevice()
    device = ScoringDevice(device="cuda", cpu_workers=6)
    assert to_json(device)["cpu_workers"] == 6 and from_values(ScoringDevice, to_json(device)) == device
    for bad in (0, -1, 1.5, True, "4"):
        with pytest.raises(ScoringDeviceError, match="cpu_workers must be a whole number >= 1"):
            ScoringDevice(cpu_workers=bad)
    gpu = EncoderPlacement(device="cuda", dtype="float16", batch_size=1024)
    # the job's number wherever it runs; else the worker's own on a GPU, and 1 on the CPU
    assert device.chunk_cpu_workers(gpu, worker_default=15) == 6
    assert device.chunk_cpu_workers(CPU_FLOAT32, worker_default=15) == 6
    assert ScoringDevice(device="cuda").chunk_cpu_workers(gpu, worker_default=15) == 15
    assert ScoringDevice(device="auto").chunk_cpu_workers(CPU_FLOAT32, worker_default=15) == 1
    with pytest.raises(ScoringDeviceError, match="PARAFORGE_SCORING_CPU_WORKERS must be a whole number"):
        ScoringDevice(device="cuda").chunk_cpu_workers(gpu, worker_default=0)
    with pytest.raises(ValueError, match="cpu workers must be a whole number"):
        with cpu_workers_on(0):
            pass


@pytest.mark.django_db
def test_a_scoring_job_with_two_cpu_workers_writes_the_same_scores(storage_dir, tmp_path, monkeypatch):
    tiny_regressor(tmp_path)
    recs = records()
    recs.insert(2, record(99, LONG_REFERENCE, ["Unbelievable.", "Unbelievably so."]))  # null scores
    resource = build_resource(shards=[recs[:5], recs[5:]])
    regressor = Regressor.objects.get(name="tiny")

    def scored_files() -> list[bytes]:
        return [(storage_dir / e["key"]).read_bytes() for e in ScoredResource.objects.get().shards]

    one = score_resource_launch(resource=resource, regressor=regressor, wait=True, batch_size=8)
    assert one.status == "succeeded" and one.params["cpu_workers"] is None
    assert one.result["n_skipped"] == 2
    files = scored_files()

    def not_here(*args, **kwargs):
        raise AssertionError("with cpu_workers=2 the lexical rows are computed in the lexical processes")

    monkeypatch.setattr("scoring.similarity.features.lexical_row", not_here)  # (the lexical processes import their own)
    two = score_resource_launch(
        resource=resource, regressor=regressor, wait=True, batch_size=8, device=ScoringDevice(cpu_workers=2)
    )
    two = Job.objects.get(pk=two.pk)
    assert two.status == "succeeded", two.error
    assert two.params["cpu_workers"] == 2 and two.result["encoded_on"] == ["cpu/float32"]
    assert ScoredResource.objects.get().job_id == two.pk
    assert scored_files() == files  # the same bytes
