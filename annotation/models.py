"""Human evaluation (ParaBank §2.4, §5.3, §5.5): campaigns, the evaluated sample, workers, HITs, judgments.

A ``Campaign`` holds a sample of ``Reference`` rows (with a length bucket: 5/10/20/40 tokens) and their
``Candidate`` paraphrases. Candidates are merged by (reference, exact text): one candidate row stands
for every system that produced that text (``CandidateSystem``; system ``"0"`` is the attention-check
copy of the reference). Judgments belong to an ``Assignment`` (one worker's submitted work: a HIT on
MTurk or the local provider, or a group of imported rows) and are given to a candidate, so a system
output identical to its reference shares the attention copy's judgments.

``Batch`` / ``Hit`` / ``HitItem`` are the HIT side (one reference and five candidates per HIT), filled
by ``annotation.batches.making`` and served by the providers. A local annotator's taken-but-unsubmitted HIT is
an ``Assignment`` in status ``accepted`` with an ``expires_at``; it becomes ``submitted`` through the
submission API, or ``expired`` (and its slot returns to the pool) through the beat task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from jobs.models import Job

ATTENTION_SYSTEM = "0"
# pseudo-system of degraded copies of a reference (quality control: a careful rater scores them low)
DEGRADED_SYSTEM = "degraded"
QUALITY_CONTROL_SYSTEMS = (ATTENTION_SYSTEM, DEGRADED_SYSTEM)  # never a table row, never counted as output


def is_attention_copy(*, text: str, reference_text: str, systems: Iterable[str]) -> bool:
    """The one rule: a candidate is the attention-check copy when its text is the reference's (whichever
    systems produced it: they share its judgments) or it carries the pseudo-system "0"."""
    return text == reference_text or ATTENTION_SYSTEM in systems


def attention_copy_q(prefix: str = "") -> Q:
    """``is_attention_copy`` as a filter on candidates (``prefix``: the path to the candidate, e.g.
    ``"candidate__"`` from judgments)."""
    return Q(**{f"{prefix}systems__system": ATTENTION_SYSTEM}) | Q(**{f"{prefix}text": F(f"{prefix}reference__text")})


LENGTH_BUCKETS = (5, 10, 20, 40)

CAMPAIGN_DEFAULTS = {
    # a worker's judgments count only when they gave at least this many in the campaign (ParaBank: 25)
    "min_judgments_per_worker": 25,
    # judgments from this many different workers per candidate (ParaBank: 3)
    "redundancy": 3,
    # an attention check passes when the copied reference gets at least this score: in imported judgments and
    # batches made before the batch setting attention_pass_mark (a new batch states its own, default 85)
    "attention_pass_mark": 100,
    # a worker failing more than this share of their checks is disqualified (ParaBank: 10%)
    "max_attention_failure_rate": 0.10,
    # ... but only once they have done at least this many checks
    "min_attention_checks": 5,
    # degraded copies: a worker is tested once they judged at least this many ...
    "min_degraded_checks": 5,
    # ... and disqualified when a one-sided Mann-Whitney U test finds their degraded items not scored
    # lower than the real candidates they judged at this level (p above it)
    "degraded_p_max": 0.05,
    # ... and disqualified when, over at least min_agreement_items real candidates that other workers scored too,
    # a one-sided test finds their scores not rising with the others' mean (Fisher's z of Pearson's r, p above it)
    "min_agreement_items": 30,
    "agreement_p_max": 0.05,
}


def default_campaign_settings() -> dict:
    return dict(CAMPAIGN_DEFAULTS)


class Provider(models.TextChoices):
    LOCAL = "local", "local annotators"
    MTURK = "mturk", "Mechanical Turk"
    PROLIFIC = "prolific", "Prolific"
    IMPORT = "import", "imported judgments"


# platforms whose workers' identity is what the platform confirms (``annotation.quality.verification``)
CROWD_PROVIDERS = (Provider.MTURK, Provider.PROLIFIC)


class Fluency(models.IntegerChoices):
    NONSENSICAL = 0, "nonsensical"
    UNGRAMMATICAL = 1, "meaningful but ungrammatical"
    GRAMMATICAL = 2, "meaningful and grammatical"


class Campaign(models.Model):
    """One human evaluation: its sample, HIT batches and judgments.

    ``settings`` keys (defaults in ``CAMPAIGN_DEFAULTS``): min_judgments_per_worker, redundancy,
    attention_pass_mark, max_attention_failure_rate, min_attention_checks; optionally
    ``system_names`` ({"35": "PARANMT"}) overriding system names in reports, and ``source_format``.
    """

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    settings = models.JSONField(default=default_campaign_settings, blank=True)
    job = models.ForeignKey(
        Job,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the job that produced the evaluated sample",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def setting(self, key: str):
        """A setting with the default filled in."""
        value = (self.settings or {}).get(key)
        return CAMPAIGN_DEFAULTS.get(key) if value is None else value

    @property
    def min_judgments_per_worker(self) -> int:
        return int(self.setting("min_judgments_per_worker"))


class Reference(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="references")
    ref_id = models.CharField(max_length=100, help_text="the reference's id in its corpus or release")
    text = models.TextField()
    length_bucket = models.PositiveSmallIntegerField(
        db_index=True, help_text="5, 10, 20, 40 tokens (or the given ref_len)"
    )
    extra = models.JSONField(default=dict, blank=True, help_text="e.g. the source sentence, czeng_s")

    class Meta:
        ordering = ["campaign_id", "length_bucket", "id"]
        constraints = [models.UniqueConstraint(fields=["campaign", "ref_id"], name="unique_ref_id_per_campaign")]

    def __str__(self) -> str:
        return f"{self.ref_id}: {self.text[:60]}"


class Candidate(models.Model):
    """A paraphrase of a reference, merged by exact text across the systems that produced it."""

    reference = models.ForeignKey(Reference, on_delete=models.CASCADE, related_name="candidates")
    text = models.TextField()
    nll = models.FloatField(null=True, blank=True, help_text="the decoder's negative log-likelihood")
    degraded_from = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="degraded_copies",
        help_text="a degraded check: the real candidate it was made from (shown in the same HIT)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["reference_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["reference", "text"], name="unique_candidate_text_per_reference")
        ]

    def __str__(self) -> str:
        return self.text[:80]

    @property
    def is_attention_copy(self) -> bool:
        """The reference itself (shown as an attention check): ``is_attention_copy``."""
        return is_attention_copy(
            text=self.text, reference_text=self.reference.text, systems=[s.system for s in self.systems.all()]
        )


class CandidateSystem(models.Model):
    """A system that produced a candidate: "17", "28", … ; "0" = the attention-check copy of the reference."""

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="systems")
    system = models.CharField(max_length=32, db_index=True)

    class Meta:
        ordering = ["candidate_id", "system"]
        constraints = [models.UniqueConstraint(fields=["candidate", "system"], name="unique_system_per_candidate")]

    def __str__(self) -> str:
        return f"system {self.system}"


class Worker(models.Model):
    """An annotator. External ids are unique per provider (imported anonymised ids are namespaced by
    campaign: ``c<campaign pk>:<id>``, since they mean nothing across releases)."""

    external_id = models.CharField(max_length=200)
    provider = models.CharField(max_length=16, choices=Provider.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="annotator_workers",
        help_text="for local annotators",
    )
    disqualified = models.BooleanField(default=False, db_index=True)
    disqualified_reason = models.TextField(blank=True)
    disqualified_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["provider", "external_id"]
        constraints = [models.UniqueConstraint(fields=["provider", "external_id"], name="unique_worker_per_provider")]

    def __str__(self) -> str:
        username = self.user.username if self.user_id else None  # (lists select the user with the worker)
        return f"{self.provider}:{rater_name(provider=self.provider, external_id=self.external_id, username=username)}"


class BatchStatus(models.TextChoices):
    DRAFT = "draft"
    PUBLISHED = "published"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class Batch(models.Model):
    """A set of HITs published together on one provider. ``settings`` is what the researcher chose (reward,
    expiry, qualifications, quality-control rates, EASL options: ``annotation.batch_settings`` is its
    schema); ``provider_state`` is what the provider keeps for itself; an assignment's verification is
    the assignment's own field."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="batches")
    provider = models.CharField(max_length=16, choices=Provider.choices)
    label = models.CharField(max_length=200, blank=True)
    settings = models.JSONField(
        default=dict, blank=True, help_text="configuration, checked by annotation.batch_settings (its schema)"
    )
    provider_state = models.JSONField(
        default=dict,
        blank=True,
        help_text="what the provider set up or learned (MTurk: HIT type, block "
        "qualification, token nonce, missing assignments, last sync)",
    )
    status = models.CharField(max_length=16, choices=BatchStatus.choices, default=BatchStatus.DRAFT, db_index=True)
    publish_claim = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="the token of the publish under way (annotation.publishing): one at a time",
    )
    publish_claimed_until = models.DateTimeField(
        null=True, blank=True, help_text="when the publish under way counts as dead and may be taken over"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "batches"
        # what a batch's admin actions and API operations do on its platform (spend, pay, stop), each behind
        # its own permission; docs/reference/permissions.md lists who may do what
        permissions = [
            ("publish_batch", "Can publish batches"),
            ("sync_batch", "Can sync batches with their platform"),
            ("approve_batch", "Can approve (pay) batches' work"),
            ("expire_batch", "Can expire batches"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign} batch {self.pk} ({self.provider}, {self.status})"


class Hit(models.Model):
    """One page: a reference and (ParaBank) five candidates."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="hits")
    reference = models.ForeignKey(Reference, on_delete=models.CASCADE, related_name="hits")
    external_hit_id = models.CharField(max_length=200, blank=True, db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    max_assignments = models.PositiveSmallIntegerField(default=3)
    round = models.PositiveSmallIntegerField(default=0, help_text="0 in fixed-redundancy batches; EASL's round")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["batch_id", "id"]

    def __str__(self) -> str:
        return f"HIT {self.external_hit_id or self.pk}"


class HitView(models.Model):
    """Who opened a published crowd HIT's page as an accepted assignment, and how often (issue 46).

    A crowd page learns its worker and assignment ids from its URL, which anyone can write; the platform
    confirms them only after a submission. So the page binds an assignment id to the first (HIT, worker id)
    that opens it -- another worker id or HIT under the same assignment id sees nothing -- and counts the
    views, so that a researcher can see a scrape (``annotation.hits.access`` holds the rules)."""

    hit = models.ForeignKey(Hit, on_delete=models.CASCADE, related_name="views")
    provider = models.CharField(max_length=16, choices=Provider.choices)
    external_assignment_id = models.CharField(max_length=200)
    worker_external_id = models.CharField(max_length=200)
    address = models.CharField(max_length=64, blank=True, help_text="the client address of the first view")
    views = models.PositiveIntegerField(default=1)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["-first_seen"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "external_assignment_id"], name="one_view_binding_per_assignment"
            )
        ]
        indexes = [models.Index(fields=["address", "first_seen"], name="hitview_address_seen")]

    def __str__(self) -> str:
        return f"{self.external_assignment_id} by {self.worker_external_id} on HIT {self.hit_id}"


class HitItem(models.Model):
    hit = models.ForeignKey(Hit, on_delete=models.CASCADE, related_name="items")
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="hit_items")
    position = models.PositiveSmallIntegerField()
    is_attention_check = models.BooleanField(default=False)
    is_degraded_check = models.BooleanField(
        default=False, help_text="a degraded check (a damaged copy of a real candidate of the HIT)"
    )

    class Meta:
        ordering = ["hit_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["hit", "position"], name="unique_position_per_hit"),
            models.UniqueConstraint(fields=["hit", "candidate"], name="unique_candidate_per_hit"),
        ]


class AssignmentStatus(models.TextChoices):
    ACCEPTED = "accepted"  # taken by a local annotator, not yet submitted (holds one of the HIT's slots)
    EXPIRED = "expired"  # taken but not submitted in time: the slot went back to the pool
    RETURNED = "returned"  # taken, then given back by the local annotator: the slot went back to the pool
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    IMPORTED = "imported"


# the worker's work is in (its judgments are stored): what exports write and what a replay finds done
SUBMITTED_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
# ... and holding judgments, imported ones included (what ends an EASL round)
JUDGED_STATUSES = (*SUBMITTED_STATUSES, AssignmentStatus.IMPORTED)
# taking one of a HIT's slots once submitted (a rejected assignment gives its slot back)
SLOT_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)


class Verification(models.TextChoices):
    """Whether the platform confirmed who made an assignment; only ``verified`` ones count.

    A crowd worker's identity is what the platform says, not what a page URL says: a crowd submission is
    stored at once as ``unverified`` and counts (aggregates, EASL rounds, regressor targets, releases'
    judgments, "already judged", quality rules, HIT slots) only once the provider's ``sync`` confirmed the
    same worker on the same HIT. ``flagged``: the platform denied it; never counted. Local annotators
    (logged in) and imported judgments are ``verified`` when stored."""

    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    FLAGGED = "flagged"


class AssignmentQuerySet(models.QuerySet):
    def counted(self) -> AssignmentQuerySet:
        return self.filter(verification=Verification.VERIFIED)


class JudgmentQuerySet(models.QuerySet):
    def counted(self) -> JudgmentQuerySet:
        """Judgments of verified assignments (the only ones any rule, aggregate or export counts)."""
        return self.filter(assignment__verification=Verification.VERIFIED)


class Assignment(models.Model):
    """One worker's submitted work: a HIT assignment, or (``hit`` null) a group of imported judgments."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assignments")
    hit = models.ForeignKey(Hit, null=True, blank=True, on_delete=models.CASCADE, related_name="assignments")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="assignments")
    provider = models.CharField(max_length=16, choices=Provider.choices)
    external_assignment_id = models.CharField(max_length=200)
    accepted_at = models.DateTimeField(null=True, blank=True, help_text="when the worker took or opened the HIT")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="local provider: the end of the allotted time")
    submitted_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True)
    feedback = models.TextField(blank=True, help_text="what the worker was told on rejection")
    status = models.CharField(
        max_length=16, choices=AssignmentStatus.choices, default=AssignmentStatus.SUBMITTED, db_index=True
    )
    verification = models.CharField(
        max_length=16,
        choices=Verification.choices,
        default=Verification.VERIFIED,
        db_index=True,
        help_text="crowd submissions count only once verified",
    )
    verification_detail = models.JSONField(
        default=dict, blank=True, help_text="why it was flagged: what the platform reported"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AssignmentQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "external_assignment_id"], name="unique_assignment_per_provider"
            ),
            # one open (taken, unsubmitted) assignment per annotator, however many requests race for one
            models.UniqueConstraint(
                fields=["worker"], condition=Q(status="accepted"), name="one_open_assignment_per_worker"
            ),
        ]

    def __str__(self) -> str:
        return f"assignment {visible_id(self.external_assignment_id)} by {self.worker}"


class SessionOutcome(models.TextChoices):
    OPEN = "open"  # the participant is working through their HITs
    COMPLETED = "completed"  # did its HITs (or some, until none was left): sent back with the completion code
    FAILED = "failed"  # failed the quality checks mid-session: sent back with the other code


class ProlificSession(models.Model):
    """One Prolific participant's session (Prolific's ``SESSION_ID``, the id of their submission) on a batch's
    study: ``hits_per_session`` HITs in a row, each an ``Assignment`` named ``<session id>:<hit id>``. How
    it ended decides the completion code they were sent back with (``providers.prolific.sessions``)."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="prolific_sessions")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="prolific_sessions")
    session_id = models.CharField(max_length=64)
    study_id = models.CharField(max_length=64, blank=True)
    outcome = models.CharField(max_length=16, choices=SessionOutcome.choices, default=SessionOutcome.OPEN)
    reason = models.TextField(blank=True, help_text="why the session failed the quality checks")
    failed_attention = models.BooleanField(
        default=False,
        help_text="ParaBank's instructed attention check failed (Prolific lets such a session be rejected)",
    )
    confirmed_at = models.DateTimeField(
        null=True, blank=True, help_text="when Prolific confirmed it as a running submission of this participant"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["batch", "session_id"], name="unique_prolific_session")]

    def __str__(self) -> str:
        return f"Prolific session {self.session_id} of {self.worker}"


# What a platform's worker id may look like (MTurk: "A1B2C3..."; Prolific: 24 hex digits; test accounts):
# letters, digits, "-" and "_". Anything else -- control characters, zero-width or look-alike letters -- is
# no id a platform gives, and would be shown raw in the admin and the results files.
WORKER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# An assignment's id: the same, plus ":" (a Prolific assignment is "<session>:<hit>:<nonce>")
ASSIGNMENT_ID = re.compile(r"^[A-Za-z0-9_:-]{1,200}$")


def visible_id(value: str) -> str:
    """A platform id as a person can read it for what it is: anything but printable ASCII (control and
    zero-width characters, look-alike letters) written as a ``\\uXXXX`` escape. Ids are checked when they
    arrive (``WORKER_ID``); rows stored before that are shown this way."""
    return "".join(ch if ch.isascii() and ch.isprintable() else ascii(ch)[1:-1] for ch in str(value))


def rater_name(*, provider: str, external_id: str, username: str | None = None) -> str:
    """The one name a rater goes by on every screen and file (the admin's worker list, the dashboard's tables
    and plots, ``report``), so that a researcher can follow one person across them: a local annotator's
    login name, a crowd worker's platform id, an imported rater's id in the file (without the campaign
    namespace ``c<pk>:`` the importer adds). Platform and file ids are shown escaped (``visible_id``)."""
    if provider == Provider.LOCAL and username:
        return username
    if provider == Provider.IMPORT and re.match(r"c\d+:", external_id):
        external_id = external_id.split(":", 1)[1]
    return visible_id(external_id)


def judgment_value_error(score, fluency) -> str | None:
    """The one rule of a judgment's values (the table's check constraints below say the same): fluency is
    0 (nonsensical), 1 (meaningful but ungrammatical) or 2 (meaningful and grammatical); the score is an
    integer from 0 to 100, or null (the N/A slider) only for a nonsensical candidate. Returns what is
    wrong, starting with the field's name, or None."""

    def whole(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not whole(fluency) or fluency not in Fluency.values:
        return "fluency must be 0 (nonsensical), 1 (meaningful but ungrammatical) or 2 (meaningful and grammatical)"
    if score is None:
        return (
            None if fluency == Fluency.NONSENSICAL else "score may be null (N/A) only when fluency is 0 (nonsensical)"
        )
    if not whole(score) or not 0 <= score <= 100:
        return "score must be an integer from 0 to 100, or null for N/A"
    return None


class Judgment(models.Model):
    """A slider score (0-100; null = the N/A slider of a nonsensical candidate) and a fluency choice."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="judgments")
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="judgments")
    worker = models.ForeignKey(
        Worker,
        on_delete=models.PROTECT,
        related_name="judgments",
        help_text="the assignment's worker, repeated for aggregation",
    )
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    fluency = models.PositiveSmallIntegerField(choices=Fluency.choices)
    slider_moved = models.BooleanField(
        null=True,
        blank=True,
        help_text="the worker moved the slider (false: clicked it to keep where it started; empty: not recorded, "
        "e.g. imported judgments or a page that did not ask)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = JudgmentQuerySet.as_manager()

    class Meta:
        ordering = ["assignment_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "candidate"], name="unique_judgment_per_assignment_candidate"
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=0, score__lte=100), name="judgment_score_0_100"
            ),
            models.CheckConstraint(condition=Q(fluency__in=[0, 1, 2]), name="judgment_fluency_0_1_2"),
            models.CheckConstraint(
                condition=Q(score__isnull=False) | Q(fluency=0), name="judgment_score_null_only_if_nonsensical"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.worker} -> {self.candidate_id}: {self.score} / {self.fluency}"


class Bonus(models.Model):
    """A bonus paid (or to be paid) to a worker. ``unique_request_token`` is sent to MTurk's
    ``send_bonus`` as ``UniqueRequestToken`` so a retried call never pays twice."""

    assignment = models.ForeignKey(Assignment, on_delete=models.PROTECT, related_name="bonuses")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="bonuses")
    amount_usd = models.DecimalField(max_digits=8, decimal_places=2)
    reason = models.TextField()
    unique_request_token = models.CharField(max_length=64, unique=True)
    sent_at = models.DateTimeField(null=True, blank=True, help_text="null until the provider confirmed it")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "bonuses"

    def __str__(self) -> str:
        return f"${self.amount_usd} to {self.worker}"
