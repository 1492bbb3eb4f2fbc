"""The diverse mode's finished rows leave the batch (issue 39, speed) without changing a bit of what is sampled.

On the shipped demo model (generation/demo/model), CPU.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from generation.decode_options import DiverseOptions
from generation.decoding import diverse

DEMO_MODEL = Path(__file__).resolve().parents[2] / "generation" / "demo" / "model"
# "Children ...": a 6-token source, where MKL's query-key products gave other last bits at another row count
SOURCES = ["Children jumping on a trampoline.", "Suicide bomber kills guard at US embassy in Ankara."]


@pytest.fixture(scope="module")
def demo():
    from generation.decoding import load_model

    return load_model(str(DEMO_MODEL), device="cpu")


def test_rows_to_keep_keeps_every_unfinished_row_and_as_many_per_input():
    done = torch.ones(2, 40, dtype=torch.bool)
    done[0, [3, 7, 20]] = False
    done[1, 5] = False
    keep = diverse.rows_to_keep(done).tolist()
    per = max(diverse.MIN_ROWS, 3)
    assert len(keep) == 2 * per and keep == sorted(keep)
    assert {3, 7, 20, 45} <= set(keep)  # every unfinished row (input 1's row 5 is flat row 45)
    assert sum(k < 40 for k in keep) == per  # the same count from each input
    assert diverse.rows_to_keep(torch.zeros(1, 40, dtype=torch.bool)) is None  # nothing finished: no copy
    assert diverse.rows_to_keep(torch.ones(1, 6, dtype=torch.bool)) is None  # fewer rows than MIN_ROWS


@pytest.mark.parametrize("batch", [SOURCES[:1], SOURCES])
def test_rows_leaving_the_batch_change_no_sampled_token_or_log_probability(demo, monkeypatch, batch):
    options = DiverseOptions(negative_sets=5, samples=30, max_length=40, seed=3)

    def sample():
        seeds = [diverse.input_seed(options.seed, s, s) for s in batch]
        sets = [diverse.draw_negative_sets(s, options, random.Random(seed)) for s, seed in zip(batch, seeds)]
        gens = [torch.Generator().manual_seed(seed) for seed in seeds]
        return diverse.sample_batch(demo, batch, sets, gens, options)

    compacted = []
    real = diverse.rows_to_keep

    def counted(done):
        keep = real(done)
        compacted.append(keep is not None)
        return keep

    monkeypatch.setattr(diverse, "rows_to_keep", counted)
    shrunk = sample()
    assert any(compacted)  # rows did leave the batch
    monkeypatch.setattr(diverse, "rows_to_keep", lambda done: None)
    full = sample()
    assert shrunk == full  # token ids, float64 sums of log-probabilities, lengths: all equal
