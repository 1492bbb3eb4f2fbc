"""Issue 48, item 5: the diverse release's card was easy to misread about whose judgments it ships ("each pair
scored by a similarity regressor trained on human judgments, together with those judgments", when none of its
pairs had been judged). The manifest's ``judgment_sources`` and the card's *Whose judgments* say plainly, per
campaign, how many human judgments, of which resource's pairs, and whether the regressor learned from them; and
that ``score`` is the regressor's, never a person's."""

import pytest

from annotation.models import Campaign
from scoring.releases.export import release_write

from .resource_data import OverlapScorer, build_resource, make_regressor, score_with
from .test_release_layout import diverse_records
from .test_releases import scored  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def test_a_release_of_judged_pairs_says_they_are_its_own(scored, tmp_path):  # noqa: F811
    manifest = release_write(scored=scored, out_dir=tmp_path / "r", version="v1")
    [source] = manifest["judgment_sources"]
    assert source == {
        "campaign": "contract",
        "judgments": manifest["counts"]["judgments"],
        "pairs_judged": "this resource",
        "resource": "res",
        "trained_the_regressor": False,
    }
    assert source["judgments"] > 0 and "_judgments_by_campaign" not in manifest["counts"]
    card = (tmp_path / "r" / "README.md").read_text()
    assert "## Whose judgments" in card and "no person gave them" in card
    assert f"- {source['judgments']:,} of campaign `contract`: of a sample of this resource's own pairs." in card
    assert "No person judged this resource's own pairs" not in card


def test_a_diverse_release_says_no_person_judged_its_pairs(scored, tmp_path):  # noqa: F811
    contract = Campaign.objects.get(name="contract")  # it judged resource res, and trains the regressor
    diverse = build_resource(name="diverse", shards=[diverse_records()])
    released = score_with(diverse, make_regressor("trained", campaign=contract), OverlapScorer())
    manifest = release_write(scored=released, out_dir=tmp_path / "d", version="v1", layout="parabank2")
    [source] = manifest["judgment_sources"]
    assert source["pairs_judged"] == "another resource" and source["resource"] == "res"
    assert source["trained_the_regressor"] and source["judgments"] == manifest["counts"]["judgments"] > 0
    card = (tmp_path / "d" / "README.md").read_text()
    assert (
        f"- {source['judgments']:,} of campaign `contract`: of pairs of another resource `res`, none of them a pair "
        "of this release; the regressor was trained on them." in card
    )
    assert "- No person judged this resource's own pairs" in card
    assert "together with those judgments" not in card
