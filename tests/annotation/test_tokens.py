import pytest
from django.core import signing

from annotation.hits.tokens import SALT, TokenError, submission_token_make, submission_token_verify


def test_a_token_verifies_only_for_its_hit_assignment_and_worker():
    token = submission_token_make(hit_id=7, assignment_id="A1", worker_id="W1")
    assert submission_token_verify(token=token, hit_id=7, assignment_id="A1", worker_id="W1") > 0
    for other in ({"hit_id": 8}, {"assignment_id": "A2"}, {"worker_id": "W2"}):
        args = {"hit_id": 7, "assignment_id": "A1", "worker_id": "W1", **other}
        with pytest.raises(TokenError, match="another"):
            submission_token_verify(token=token, **args)


def test_forged_tampered_and_foreign_tokens_are_refused():
    forged = signing.dumps({"h": 7, "a": "A1", "w": "W1", "t": 0}, key="not-our-secret", salt=SALT)
    other_salt = signing.dumps({"h": 7, "a": "A1", "w": "W1", "t": 0}, salt="something-else")
    good = submission_token_make(hit_id=7, assignment_id="A1", worker_id="W1")
    tampered = good[:-3] + ("aaa" if not good.endswith("aaa") else "bbb")
    for token in (forged, other_salt, tampered, "", "garbage"):
        with pytest.raises(TokenError, match="invalid"):
            submission_token_verify(token=token, hit_id=7, assignment_id="A1", worker_id="W1")


def test_old_tokens_expire():
    token = submission_token_make(hit_id=7, assignment_id="A1", worker_id="W1")
    with pytest.raises(TokenError, match="expired"):
        submission_token_verify(token=token, hit_id=7, assignment_id="A1", worker_id="W1", max_age_s=-1)
