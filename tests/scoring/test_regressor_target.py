"""``train_regressor --target raw|zscore``: the bias-corrected target trains and is recorded."""

import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.campaigns.importers import import_parabank
from scoring.models import Regressor
from scoring.regressor import training_data
from scoring.regressor.job import SUMMARY_KEYS
from tests.annotation.parabank_data import write_parabank
from tests.scoring.test_regressor import build_campaign

pytestmark = pytest.mark.django_db


def train(*args) -> dict:
    out = io.StringIO()
    call_command("train_regressor", *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


@pytest.fixture
def campaign(tmp_path, storage_dir):
    campaign = build_campaign(tmp_path)
    # worker 5 is 30 points harsher than the others on every candidate of the first 20 references,
    # and scores each reference's degraded copy 0
    refs, cands = [], []
    for ref in campaign.references.filter(ref_id__in=[str(r) for r in range(20)]):
        refs.append(f"{ref.ref_id}\t{ref.text}\t10\t1.0")
        for c in ref.candidates.exclude(text=ref.text):
            mean = np.mean([j.score for j in c.judgments.all()])
            cands.append(
                f"5\t{ref.ref_id}\t10\t{' '.join(s.system for s in c.systems.all())}\t{c.text}\t\t"
                f"{int(max(0, mean - 30))}\t2"
            )
        cands.append(f"5\t{ref.ref_id}\t10\tdegraded\tzzz {ref.text}\t\t0\t0")
    ref_path, cand_path = write_parabank(tmp_path, refs, cands)
    import_parabank(campaign_name=campaign.name, references_path=ref_path, candidates_path=cand_path)
    return campaign


def test_zscore_target_trains_and_is_recorded(campaign):
    raw = training_data(campaign, min_judgments=25)
    z = training_data(campaign, min_judgments=25, target="zscore")
    assert len(raw.pairs) == len(z.pairs) == 40 * 4  # degraded copies and attention copies are not targets
    assert all(not p["paraphrase"].startswith("zzz ") for p in z.pairs)
    assert not np.allclose(raw.y, z.y)
    result = train("synthetic", "--name", "syn-z", "--no-embeddings", "--target", "zscore", "--cv-folds", "0")
    assert set(result) == set(SUMMARY_KEYS) and result["spearman_cv"] is None
    assert "|target:zscore-sim|" in result["signature"] and result["spearman_test"] > 0.5
    row = Regressor.objects.get(name="syn-z")
    assert row.signature["target_estimate"] == "zscore" and row.metrics["target"] == "zscore"
    default = train("synthetic", "--name", "syn-raw", "--no-embeddings", "--cv-folds", "0")
    assert "|target:mean-sim|" in default["signature"]
    assert Regressor.objects.get(name="syn-raw").signature["target_estimate"] == "raw"


def test_bad_target_is_a_clear_error(campaign):
    with pytest.raises(CommandError, match="invalid choice: 'bias'"):
        train("synthetic", "--name", "x", "--target", "bias")
    assert not Regressor.objects.filter(name="x").exists()
