"""Prepares the embedded-default demo: a superuser whose fresh password is printed, and demo data.

Demo data, so that a person sees the researcher's whole path at once: the monolingual corpus ``demo``
(generation/demo/corpus.txt, 3,000 STS Benchmark sentences) and its IDF table; an evaluation sample decoded
with the shipped demo model under five ParaBank systems, 2 outputs each (resource and campaign ``demo-sample``;
the settings are ``generation.demo_settings``); a published local HIT batch of it, candidates with non-words
left out; three local annotator accounts whose fresh passwords are printed. All of it runs in this process
(under a minute on a laptop CPU). Re-runs keep what exists and reset the passwords.

``--paraphraser`` (after ``scripts/setup --model gemma3-270m``): the same sample decoded by the packaged
paraphraser too, under the same five systems (``demo-sample-paraphraser``) and in the diverse mode, ranks 1-2
(``demo-sample-paraphraser-diverse``), each on a published local HIT batch. ``scripts/start`` runs it as
``--paraphraser --samples-only`` in the background once the server is up (minutes on a 2-core CPU, once): the
logins it printed stay valid.

The shipped models are installed under the model root ``var/models/`` (``generation.demo_settings.
install_shipped_models``: hard links, else copies), with or without ``--no-data``, so that the admin's generate
form and ``POST /api/corpora/<id>/generations/`` offer them by name (``demo``; ``paraphraser`` once its base
gemma3-270m is installed).
"""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from generation.demo_settings import (
    DEMO_CORPUS,
    DEMO_CORPUS_FILE,
    DEMO_CORPUS_TERMS,
    DEMO_LENGTHS,
    DEMO_PARAPHRASER,
    DEMO_PARAPHRASER_DIVERSE,
    DEMO_PARAPHRASER_SAMPLE,
    DEMO_PER_LENGTH,
    DEMO_SAMPLE,
    DEMO_SYSTEMS,
    demo_diverse_params,
    demo_generation_params,
    install_shipped_models,
    shipped_models,
)

DEMO_ANNOTATORS = ("annotator1", "annotator2", "annotator3")


class Command(BaseCommand):
    help = "Create (or reset) the demo superuser and load the demo data; prints the credentials."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--no-data", action="store_true", help="only the superuser, no demo corpus")
        parser.add_argument(
            "--paraphraser",
            action="store_true",
            help="also decode the sample with the packaged paraphraser (Gemma 3 270M and its adapter: needs "
            "scripts/setup --model gemma3-270m), under the same systems and in the diverse mode (ranks 1-2), "
            "each on a published local HIT batch",
        )
        parser.add_argument(
            "--samples-only",
            action="store_true",
            help="only the demo corpus and the samples (with --paraphraser, the paraphraser's too), leaving every "
            "login and password as it is: scripts/start runs it in the background once the server is up",
        )

    def handle(
        self,
        *args,
        username: str,
        no_data: bool = False,
        paraphraser: bool = False,
        samples_only: bool = False,
        **options,
    ):
        if paraphraser and "paraphraser" not in shipped_models():
            raise CommandError(
                "--paraphraser needs the packaged paraphraser's base: run scripts/setup --model gemma3-270m"
            )
        if samples_only and no_data:
            raise CommandError("--samples-only and --no-data leave nothing to do: give one of them")
        if not samples_only:
            password = self.demo_superuser(username)
        for name, state in install_shipped_models().items():
            self.stdout.write(f"model {name} (the generate form and the API name it {name}): {state}")
        if samples_only:
            self.demo_samples(paraphraser=paraphraser)
            return
        if not no_data:
            self.demo_samples(paraphraser=paraphraser)
            self.demo_annotators()
        self.stdout.write(f"demo superuser: {username}  password: {password}")

    def demo_superuser(self, username: str) -> str:
        """Create or reset the demo superuser; its new password."""
        User = get_user_model()
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        return password

    def demo_samples(self, *, paraphraser: bool) -> None:
        """The demo corpus and the sample decoded by the demo model; with ``paraphraser``, by the packaged
        paraphraser too, under the five systems and in the diverse mode."""
        corpus = self.demo_corpus()
        self.demo_sample(corpus, DEMO_SAMPLE, lambda: demo_generation_params(corpus, name=DEMO_SAMPLE))
        if paraphraser:
            self.demo_sample(
                corpus,
                DEMO_PARAPHRASER_SAMPLE,
                lambda: demo_generation_params(corpus, name=DEMO_PARAPHRASER_SAMPLE, model=DEMO_PARAPHRASER),
            )
            self.demo_sample(corpus, DEMO_PARAPHRASER_DIVERSE, lambda: demo_diverse_params(corpus))

    def demo_corpus(self):
        from generation.corpus.corpora import corpus_discard
        from generation.models import Corpus, CorpusStatus
        from jobs.execution import job_run_inline, job_start

        corpus = Corpus.objects.filter(name=DEMO_CORPUS).first()
        if corpus is not None and corpus.status != CorpusStatus.READY:
            corpus_discard(corpus)  # an import that died half-way: start again
            corpus = None
        if corpus is None:
            job = job_start(
                kind="import_corpus",
                label=f"import {DEMO_CORPUS}",
                enqueue=False,
                params={
                    "name": DEMO_CORPUS,
                    "path": str(DEMO_CORPUS_FILE),
                    "format": "mono",
                    "on_error": "skip",
                    "display_name": "generation/demo/corpus.txt",
                    **DEMO_CORPUS_TERMS,
                },
            )
            job = job_run_inline(job_id=job.pk)
            if job.status != "succeeded":
                raise CommandError(f"importing the demo corpus failed: {job.error}")
            corpus = Corpus.objects.get(name=DEMO_CORPUS)
            self.stdout.write(f"demo corpus: {corpus.n_references} references")
        if not corpus.idf_tables.exists():
            job = job_start(
                kind="build_idf", params={"corpus": corpus.pk}, label=f"IDF of {DEMO_CORPUS}", enqueue=False
            )
            job = job_run_inline(job_id=job.pk)
            if job.status != "succeeded":
                raise CommandError(f"building the demo IDF table failed: {job.error}")
            self.stdout.write(f"demo IDF table: {job.result['name']} ({job.result['types']} types)")
        return corpus

    def demo_sample(self, corpus, name: str, params) -> None:
        """Decode the evaluation sample ``name`` (its job's ``params()``, made only when it is decoded) and put it
        on a published local HIT batch."""
        from annotation.batches.making import hit_batch_create
        from annotation.batches.params import BatchParams
        from annotation.models import Batch, Campaign
        from annotation.publishing import batch_publish
        from generation.generation_job import KIND
        from generation.models import Resource
        from jobs.execution import job_run_inline, job_start

        resource = Resource.objects.filter(name=name).first()
        if resource is not None and (resource.job is None or resource.job.status != "succeeded"):
            resource.delete()  # a run that died half-way: start again
            Campaign.objects.filter(name=name).delete()
            resource = None
        if resource is None:
            job = job_start(kind=KIND, params=params(), label=f"generate {name}", enqueue=False)
            job = job_run_inline(job_id=job.pk)
            if job.status != "succeeded":
                raise CommandError(f"decoding the demo sample {name} failed: {job.error}")
            resource = Resource.objects.get(name=name)
            how = "diverse ranks" if job.params.get("diverse") else "systems " + ",".join(map(str, DEMO_SYSTEMS))
            title = "demo sample" if name == DEMO_SAMPLE else name
            self.stdout.write(
                f"{title}: {resource.n_references} references, {resource.n_pairs} paraphrases "
                f"({how}; generation job {job.pk})"
            )
        campaign = Campaign.objects.get(job_id=resource.job_id)
        if not Batch.objects.filter(campaign=campaign).exists():
            batch = hit_batch_create(
                campaign=campaign,
                params=BatchParams(
                    provider="local",
                    per_length=DEMO_PER_LENGTH,
                    lengths=DEMO_LENGTHS,
                    assignments=3,
                    attention_rate=0.2,
                    seed=0,
                    label="demo" if name == DEMO_SAMPLE else name.removeprefix("demo-sample-"),
                ),
            )
            batch_publish(batch=batch)
            self.stdout.write(
                f"demo HIT batch {batch.pk}: {batch.hits.count()} HITs for local annotators "
                f"({batch.settings['non_words']['left_out']} candidates with non-words left out)"
            )

    def demo_annotators(self) -> None:
        User = get_user_model()
        for name in DEMO_ANNOTATORS:
            password = secrets.token_urlsafe(9)
            user, _ = User.objects.get_or_create(username=name)
            user.set_password(password)
            user.save()
            self.stdout.write(f"local annotator: {name}  password: {password}")
