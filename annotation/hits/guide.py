"""What the slider page tells a worker about where they are: their place in the work, the pay, the time.

Crowd workers decide in seconds whether a task is worth it, and a worker who cannot see how much is
left gives up or rushes. So the page says, per platform:

* a Prolific participant: "HIT k of n" in their session, and the session's reward and estimated time
  (the study's own figures, ``batch_prolific_config``);
* an MTurk worker: the reward of this HIT and about how long one takes (``PROLIFIC_SECONDS_PER_HIT``,
  the same per-HIT estimate a Prolific study starts from);
* a local annotator: how many more HITs they may take after this one (``annotation.hits.taking``'s rules).

``slider_must_move`` (a batch setting, on by default) asks the worker to move or click every slider
before Submit; off, the page behaves as ParaBank's did (sliders start at 50 and count as set).
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from annotation.hits.page import HitPageFacts
from annotation.hits.taking import takeable_hits
from annotation.models import SUBMITTED_STATUSES, Assignment, BatchStatus, Hit, Provider, Worker
from annotation.providers.prolific.study import batch_prolific_config, session_id


@dataclasses.dataclass(frozen=True)
class WorkerGuide:
    progress: str = ""  # "HIT 3 of 10 in this session", "4 more HITs after this one"
    pay: str = ""  # "$0.50 for this HIT, about 1 minute"
    first_hit: bool = False  # the worker has submitted nothing yet: the instructions start open
    slider_must_move: bool = True


def _minutes(n: float) -> str:
    n = max(1, round(n))
    return f"about {n} minute{'s' if n != 1 else ''}"


def _money(amount, currency: str) -> str:
    amount = Decimal(str(amount)).quantize(Decimal("0.01"))
    return f"${amount}" if currency == "USD" else f"{amount} {currency}"


def worker_guide(facts: HitPageFacts, *, assignment_id: str, worker_id: str) -> WorkerGuide:
    """The guide for an accepted HIT's page (``facts`` as ``hit_page_facts`` read them)."""
    batch_settings = facts.batch_settings or {}
    must_move = batch_settings.get("slider_must_move")
    common = {"first_hit": not facts.worker_has_submitted, "slider_must_move": must_move is not False}
    if facts.provider == Provider.PROLIFIC:
        config = batch_prolific_config(batch_settings)
        done = Assignment.objects.filter(
            provider=Provider.PROLIFIC,
            external_assignment_id__startswith=f"{session_id(assignment_id)}:",
            status__in=SUBMITTED_STATUSES,
        ).count()
        hits = config["hits_per_session"]
        pay = (
            f"{_money(config['reward_per_session'], settings.PROLIFIC_CURRENCY)} for the session of {hits} HITs, "
            f"{_minutes(config['estimated_minutes'])} in all"
        )
        return WorkerGuide(progress=f"HIT {min(done + 1, hits)} of {hits} in this session", pay=pay, **common)
    if facts.provider == Provider.MTURK:
        reward = batch_settings.get("reward_usd") or settings.MTURK_REWARD_USD
        pay = f"{_money(reward, 'USD')} for this HIT, {_minutes(settings.PROLIFIC_SECONDS_PER_HIT / 60)}"
        return WorkerGuide(pay=pay, **common)
    worker = Worker.objects.filter(provider=Provider.LOCAL, external_id=worker_id).first()
    if worker is None:
        return WorkerGuide(**common)
    local = Hit.objects.filter(batch__provider=Provider.LOCAL, batch__status=BatchStatus.PUBLISHED)
    left = takeable_hits(worker=worker, hits=local.exclude(pk=facts.hit_id), now=timezone.now()).count()
    progress = f"{left} more HIT{'s' if left != 1 else ''} for you after this one" if left else "Your last HIT"
    return WorkerGuide(progress=progress, **common)
