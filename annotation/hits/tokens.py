"""Signed submission tokens: the page of an accepted HIT carries one for (hit, assignment, worker).

The submission API requires it, so a submission cannot be made for another worker or assignment than
the page was opened for. ``django.core.signing`` with its own salt (a token of another feature never
verifies here) and a maximum age; the payload also keeps when the page was opened (time per HIT).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core import signing
from django.utils.crypto import salted_hmac

SALT = "paraforge.annotation.submission"
DEFAULT_MAX_AGE_S = 24 * 3600


class TokenError(ValueError):
    """The token is malformed, forged, for another (hit, assignment, worker), or too old."""


def token_max_age_s() -> int:
    return int(getattr(settings, "ANNOTATION_TOKEN_MAX_AGE_S", DEFAULT_MAX_AGE_S))


def submission_token_make(*, hit_id: int, assignment_id: str, worker_id: str, issued_at: float | None = None) -> str:
    payload = {
        "h": int(hit_id),
        "a": str(assignment_id),
        "w": str(worker_id),
        "t": int(time.time() if issued_at is None else issued_at),
    }
    return signing.dumps(payload, salt=SALT, compress=True)


def submission_token_verify(
    *, token: str, hit_id: int, assignment_id: str, worker_id: str, max_age_s: int | None = None
) -> int:
    """Check the token against what is submitted; returns when it was issued (Unix seconds)."""
    try:
        payload = signing.loads(token or "", salt=SALT, max_age=token_max_age_s() if max_age_s is None else max_age_s)
    except signing.SignatureExpired as exc:
        raise TokenError("the submission token has expired: reload the HIT page") from exc
    except signing.BadSignature as exc:
        raise TokenError("invalid submission token") from exc
    if not isinstance(payload, dict) or (payload.get("h"), payload.get("a"), payload.get("w")) != (
        int(hit_id),
        str(assignment_id),
        str(worker_id),
    ):
        raise TokenError("the submission token is for another HIT, assignment or worker")
    return int(payload.get("t") or 0)


ITEM_SALT = "paraforge.annotation.hit-item"


def item_key(*, hit_id: int, candidate_id: int) -> str:
    """The name a worker's page and the submission API give one sentence of one HIT.

    Candidate ids are never shown to workers: quality-check copies are made with their batch, after
    every real candidate, so "the highest id in the HIT" would find them. The key is a keyed hash of
    (HIT, candidate): stable for the HIT, different in every HIT, and it says nothing about the order
    in which sentences were made."""
    return salted_hmac(ITEM_SALT, f"{int(hit_id)}:{int(candidate_id)}", algorithm="sha256").hexdigest()[:16]
