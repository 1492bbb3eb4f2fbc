"""Corpora, their shards and IDF tables. Sentences live in shards (see storage.py), not in rows."""

from django.db import models

from jobs.models import Job


class CorpusFormat(models.TextChoices):
    BITEXT = "bitext", "bitext (source<TAB>reference)"
    MONO = "mono", "English, one sentence per line"


class CorpusStatus(models.TextChoices):
    IMPORTING = "importing"
    READY = "ready"
    FAILED = "failed"


class Corpus(models.Model):
    name = models.CharField(max_length=200, unique=True)
    format = models.CharField(max_length=8, choices=CorpusFormat.choices)
    status = models.CharField(max_length=16, choices=CorpusStatus.choices, default=CorpusStatus.IMPORTING)
    source_name = models.CharField(max_length=500, blank=True, help_text="the file it was imported from")
    # where the sentences come from and under which terms (infra.licences): the release card names both, and an
    # export under a licence the terms do not allow is refused (import_corpus --source ... --license ...)
    source = models.CharField(
        max_length=500, blank=True, help_text="where the sentences come from (a dataset's name, a URL, a citation)"
    )
    license = models.CharField(
        max_length=100,
        default="NOASSERTION",
        help_text="the sentences' licence as an SPDX id (NOASSERTION: not stated; LicenseRef-NAME: terms of their own)",
    )
    terms = models.CharField(
        max_length=500, blank=True, help_text="the terms in words, for the release card (e.g. research use only)"
    )
    storage_prefix = models.CharField(max_length=500, blank=True)
    n_references = models.PositiveBigIntegerField(default=0)
    n_lines_read = models.PositiveBigIntegerField(default=0)
    n_bad_lines = models.PositiveBigIntegerField(default=0)
    bad_lines = models.JSONField(default=list, blank=True, help_text="the first bad lines: file, line, reason")
    import_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "corpora"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CorpusShard(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="shards")
    index = models.PositiveIntegerField()
    key = models.CharField(max_length=500)
    n_records = models.PositiveIntegerField()
    first_record = models.PositiveBigIntegerField(help_text="corpus-wide index of this shard's first reference")
    sha256 = models.CharField(max_length=64)
    bytes = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["corpus_id", "index"]
        constraints = [models.UniqueConstraint(fields=["corpus", "index"], name="unique_shard_index_per_corpus")]

    def __str__(self) -> str:
        return f"{self.corpus} shard {self.index}"


class IdfTable(models.Model):
    """IDF = ln(N / df) over the corpus's English side, a sentence being a document. Stored as a TSV."""

    corpus = models.ForeignKey(Corpus, null=True, blank=True, on_delete=models.CASCADE, related_name="idf_tables")
    name = models.CharField(max_length=200, unique=True)
    key = models.CharField(max_length=500, blank=True, help_text="token<TAB>idf TSV in storage")
    n_documents = models.PositiveBigIntegerField(default=0)
    n_types = models.PositiveBigIntegerField(default=0)
    tokenizer = models.CharField(max_length=200, blank=True, help_text="spaCy pipeline and version that counted")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class Resource(models.Model):
    """A generated paraphrase resource: the output of one generation job (corpus x systems x model).

    The pairs live in candidate shards (``ResourceShard``), never in rows. Each shard is gzip JSONL
    (``infra/shards.py``), one record per reference, written once per (job, chunk)::

        {"ref_index": 1234,                 # corpus-wide index of the reference
         "reference": "...", "source": "...",  # source = the bitext's other side ("" for mono corpora)
         "length": 12,                      # reference length in spaCy tokens
         "candidates": [                    # merged by exact text; one entry per distinct output
            {"text": "...", "nll": 3.21,    # nll = -(sum log-prob) of the best-scoring system's output
             "systems": ["17", "21"],        # every system that produced this text
             "constraints": {"17": {"positive": [...], "negative": [...], "bos_avoid": [...]}, ...}}],
         "no_constraints": ["18"]}          # systems whose pool was too small for this reference

    A diverse job's records (``generate --diverse``, ParaBank 2) hold its kept outputs in rank order, each of
    system ``"r<rank>"``, its negative set as that system's ``constraints``, and three keys more:
    ``diverse_score`` (the engine's score), ``cluster`` and ``banned``
    (``generation.generation_job.diverse_chunk``).

    ``settings`` records how it was made (model folder and its hash, systems, beam, nbest, stopping rule,
    max length, length penalty, IDF table, seed; a diverse job's options under ``diverse``), so that a
    release's manifest can state it.
    """

    name = models.CharField(max_length=200, unique=True)
    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="resources")
    job = models.OneToOneField(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="resource")
    settings = models.JSONField(default=dict, blank=True)
    n_references = models.PositiveBigIntegerField(default=0)
    n_pairs = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class ResourceShard(models.Model):
    """One candidate shard of a resource (written by one generation chunk; same key if re-run)."""

    resource = models.ForeignKey(Resource, on_delete=models.CASCADE, related_name="shards")
    index = models.PositiveIntegerField()
    key = models.CharField(max_length=500)
    n_references = models.PositiveIntegerField(default=0)
    n_pairs = models.PositiveIntegerField(default=0)
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["resource_id", "index"]
        constraints = [models.UniqueConstraint(fields=["resource", "index"], name="unique_shard_index_per_resource")]

    def __str__(self) -> str:
        return f"{self.resource} shard {self.index}"
