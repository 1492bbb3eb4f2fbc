"""Prepares the embedded-default demo: a superuser whose fresh password is printed, and demo data.

Demo data: the monolingual corpus ``demo`` (generation/demo/corpus.txt, 3,000 STS Benchmark sentences)
and its IDF table, built in this process (tokenizer only: a few seconds). Re-runs keep what exists.
"""
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

DEMO_CORPUS = "demo"
DEMO_CORPUS_FILE = Path(__file__).resolve().parents[3] / "generation" / "demo" / "corpus.txt"


class Command(BaseCommand):
    help = "Create (or reset) the demo superuser and load the demo data; prints the credentials."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--no-data", action="store_true", help="only the superuser, no demo corpus")

    def handle(self, *args, username: str, no_data: bool = False, **options):
        User = get_user_model()
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        if not no_data:
            self.demo_corpus()
        self.stdout.write(f"demo superuser: {username}  password: {password}")

    def demo_corpus(self) -> None:
        from generation.corpora import corpus_discard
        from generation.models import Corpus, CorpusStatus
        from jobs.execution import job_run_inline, job_start

        corpus = Corpus.objects.filter(name=DEMO_CORPUS).first()
        if corpus is not None and corpus.status != CorpusStatus.READY:
            corpus_discard(corpus)  # an import that died half-way: start again
            corpus = None
        if corpus is None:
            job = job_start(kind="import_corpus", label=f"import {DEMO_CORPUS}", enqueue=False, params={
                "name": DEMO_CORPUS, "path": str(DEMO_CORPUS_FILE), "format": "mono", "on_error": "skip",
                "display_name": "generation/demo/corpus.txt",
            })
            job = job_run_inline(job_id=job.pk)
            if job.status != "succeeded":
                raise CommandError(f"importing the demo corpus failed: {job.error}")
            corpus = Corpus.objects.get(name=DEMO_CORPUS)
            self.stdout.write(f"demo corpus: {corpus.n_references} references")
        if not corpus.idf_tables.exists():
            job = job_start(kind="build_idf", params={"corpus": corpus.pk}, label=f"IDF of {DEMO_CORPUS}",
                            enqueue=False)
            job = job_run_inline(job_id=job.pk)
            if job.status != "succeeded":
                raise CommandError(f"building the demo IDF table failed: {job.error}")
            self.stdout.write(f"demo IDF table: {job.result['name']} ({job.result['types']} types)")
