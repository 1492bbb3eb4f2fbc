"""The researcher's whole path, end to end, through the real CLIs, HTTP API and background jobs.

Import a corpus, build its IDF, generate with the demo model over several systems, build a local HIT
batch, have three annotators submit through the HTTP API of a live server (one fails attention checks
and is disqualified), compute the reports, train the regressor, score the resource, export a release.

On PostgreSQL + Redis, the jobs run in a real Celery worker process (the ``celery_worker_process``
fixture); on the embedded default, in that worker too, or in this process when no worker answers.
"""

from __future__ import annotations

import gzip
import hashlib
import http.cookiejar
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotation.hits.tokens import item_key
from annotation.models import Campaign, Candidate, Hit, HitItem, Judgment, Worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.worker]

ROOT = Path(__file__).resolve().parents[2]
DEMO_MODEL = ROOT / "generation" / "demo" / "model"
DEMO_CORPUS = ROOT / "generation" / "demo" / "corpus.txt"


def _cli(capsys, *args) -> dict:
    call_command(*args)
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


class Annotator:
    """A person with a browser session: logs in, takes the next HIT, posts judgments as the page's JS does."""

    def __init__(self, base_url: str, username: str, password: str):
        self.base = base_url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        page = self.opener.open(f"{base_url}/annotate/login/").read().decode()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        data = urllib.parse.urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": csrf}
        ).encode()
        req = urllib.request.Request(
            f"{base_url}/annotate/login/", data=data, headers={"Referer": f"{base_url}/annotate/login/"}
        )
        self.opener.open(req).read()

    def next_hit(self) -> dict | None:
        """Take the next HIT as the page's button does (a POST to /annotate/next/), follow it to the HIT
        page and read what its form holds; None when nothing is left."""
        try:
            resp = self.opener.open(f"{self.base}/annotate/next/")
            page = offer = resp.read().decode()
            if "submission-token" not in offer:  # no open assignment (else the GET went back to it)
                csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', offer).group(1)
                req = urllib.request.Request(
                    f"{self.base}/annotate/next/",
                    data=urllib.parse.urlencode({"csrfmiddlewaretoken": csrf}).encode(),
                    headers={"Referer": f"{self.base}/annotate/next/"},
                )
                resp = self.opener.open(req)
                page = resp.read().decode()
        except urllib.error.HTTPError as exc:
            return {"status": exc.code}
        if "submission-token" not in page:
            return None
        field = lambda name: re.search(rf'{name}="([^"]*)"', page).group(1)  # noqa: E731
        return {
            "status": 200,
            "hit": int(re.search(r"/hits/(\d+)/", resp.geturl()).group(1)),
            "token": re.search(r'<meta name="submission-token" content="([^"]+)"', page).group(1),
            "assignment_id": field("data-assignment"),
            "worker_id": field("data-worker"),
            "api": field("data-api"),
            "items": re.findall(r'data-item="([0-9a-f]+)"', page),  # the page names sentences by opaque keys
        }

    def submit(self, hit: dict, judgments: list[dict]) -> int:
        body = json.dumps(
            {
                "assignment_id": hit["assignment_id"],
                "worker_id": hit["worker_id"],
                "token": hit["token"],
                "judgments": judgments,
                "comment": "",
            }
        ).encode()
        req = urllib.request.Request(
            self.base + hit["api"], data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            return self.opener.open(req).status
        except urllib.error.HTTPError as exc:
            return exc.code


def _judge(candidate_ids, attention: set[int], *, careless: bool, texts: dict[int, str], ref: str) -> list[dict]:
    """Careful annotators give the copied reference 100 and others a score that falls with word changes;
    the careless one gives everything 30."""
    out = []
    for cid in candidate_ids:
        if careless:
            out.append({"candidate": cid, "score": 30, "fluency": 2})
        elif cid in attention:
            out.append({"candidate": cid, "score": 100, "fluency": 2})
        else:
            a, b = set(ref.lower().split()), set(texts[cid].lower().split())
            overlap = len(a & b) / max(1, len(a | b))
            out.append({"candidate": cid, "score": int(round(40 + 55 * overlap)), "fluency": 2})
    return out


def _assert_ran_where_expected(job_id: int, worker_pid: int) -> None:
    """On a real broker the chunks ran in the worker process. On the embedded one they ran there too when
    it answered the ping of ``--wait``, else here (inline): never split between the two."""
    from jobs.execution import uses_embedded_broker
    from jobs.models import Job

    job = Job.objects.get(pk=job_id)
    assert job.status == "succeeded", job.error
    pids = {int(c.ran_on.rsplit(":", 1)[1]) for c in job.chunks.all()}
    assert pids in ([{worker_pid}, {os.getpid()}] if uses_embedded_broker() else [{worker_pid}])


def test_the_researchers_whole_path(live_server, tmp_path, capsys, celery_worker_process):
    # 1. the demo corpus (3,000 sentences: enough for IDF values inside ParaBank's 7-17 window) and its IDF
    imported = _cli(capsys, "import_corpus", "e2e", str(DEMO_CORPUS), "--format", "mono")
    assert imported["references"] == 3000
    call_command("build_idf", "e2e", "--wait")
    capsys.readouterr()

    # 2. a generation job over three systems (lowest-IDF ban, unconstrained, first 3 tokens banned at
    #    the start), 2 outputs each (the batch leaves out those with non-words), with an evaluation sample
    gen = _cli(
        capsys,
        "generate",
        "e2e",
        "--model",
        str(DEMO_MODEL),
        "--systems",
        "15,28,34",
        "--sample-per-length",
        "6",
        "--lengths",
        "5,10",
        "--beam",
        "3",
        "--nbest",
        "2",
        "--wait",
    )
    job_id = gen["job"]
    _assert_ran_where_expected(job_id, celery_worker_process.pid)
    campaign = Campaign.objects.get(job_id=job_id)
    campaign.settings = {**campaign.settings, "min_attention_checks": 2, "min_judgments_per_worker": 5}
    campaign.save(update_fields=["settings"])
    assert campaign.references.count() == 12

    # 3. a local HIT batch with frequent attention checks
    batch = _cli(
        capsys,
        "create_hit_batch",
        "--job",
        str(job_id),
        "--provider",
        "local",
        "--per-length",
        "6",
        "--lengths",
        "5,10",
        "--assignments",
        "3",
        "--attention-rate",
        "1.0",
        "--seed",
        "7",
    )
    assert batch["hits"] > 0 and batch["cost_estimate_usd"] is None

    # 4. three annotators through the live HTTP server; "carol" fails every attention check
    User = get_user_model()
    people = {}
    for name in ("alice", "bob", "carol"):
        User.objects.create_user(name, password=f"{name}-pass-123")
        people[name] = Annotator(live_server.url, name, f"{name}-pass-123")
    attention = set(HitItem.objects.filter(is_attention_check=True).values_list("candidate_id", flat=True))
    texts = dict(Candidate.objects.values_list("id", "text"))
    submitted = {name: 0 for name in people}
    barred = set()
    for _ in range(batch["hits"] + 2):
        progressed = False
        for name, person in people.items():
            if name in barred:
                continue
            hit = person.next_hit()
            if hit is None:
                continue
            if hit["status"] == 403:
                barred.add(name)
                continue
            shown = Hit.objects.get(pk=hit["hit"])
            ref = shown.reference.text
            candidate_of = {
                item_key(hit_id=shown.pk, candidate_id=i.candidate_id): i.candidate_id for i in shown.items.all()
            }  # what the test knows, not the annotator
            judgments = _judge(
                [candidate_of[key] for key in hit["items"]], attention, careless=name == "carol", texts=texts, ref=ref
            )
            key_of = {cid: key for key, cid in candidate_of.items()}
            status = person.submit(hit, [{"item": key_of[j.pop("candidate")], **j} for j in judgments])
            assert status in (200, 201, 403), status
            if status == 201:
                submitted[name] += 1
                progressed = True
        if not progressed:
            break
    assert barred == {"carol"}
    carol = Worker.objects.get(user__username="carol")
    assert carol.disqualified and Judgment.objects.filter(worker=carol).exists()
    assert submitted["alice"] == submitted["bob"] == batch["hits"]

    # 5. the paper's tables: carol's judgments stored but excluded
    sim = _cli(capsys, "report", campaign.name, "--table", "similarity", "--format", "json")
    rows = {r["system"]: r for r in sim["rows"]}
    assert {"15", "28", "34"} <= set(rows) and "0" not in rows
    for row in rows.values():
        assert 40 <= row["avg"] <= 100  # the careful annotators' range: carol's 30s are not in it
    # cross-check one cell by hand: system 28 at length 5 = mean over its candidates of the counted
    # workers' scores (an output identical to its reference shares the attention copy's judgments)
    cells = []
    for cand in Candidate.objects.filter(
        systems__system="28", reference__length_bucket=5, reference__campaign=campaign
    ).distinct():
        scores = [j.score for j in cand.judgments.filter(worker__disqualified=False, score__isnull=False)]
        if scores:
            cells.append(sum(scores) / len(scores))
    assert rows["28"]["by_length"]["5"] == pytest.approx(sum(cells) / len(cells))
    flu = _cli(capsys, "report", campaign.name, "--table", "fluency", "--format", "json")
    assert all(r["avg"] == 100.0 for r in flu["rows"])

    # 6. the regressor, the scored resource and the release
    reg = _cli(
        capsys, "train_regressor", campaign.name, "--name", "e2e-reg", "--test-fraction", "0.3", "--seed", "1", "--json"
    )
    assert reg["name"] == "e2e-reg" and reg["n_train"] > 0 and reg["n_test"] > 0
    from generation.models import Resource

    resource = Resource.objects.get(job_id=job_id)
    scored = _cli(capsys, "score_resource", resource.name, "--regressor", "e2e-reg", "--wait")
    _assert_ran_where_expected(scored["job"], celery_worker_process.pid)
    out = tmp_path / "release"
    _cli(capsys, "export_release", resource.name, "--out", str(out), "--regressor", "e2e-reg")
    manifest = json.loads(next(out.rglob("manifest.json")).read_text())
    assert manifest["regressor"]["name"] == "e2e-reg"
    files = manifest["files"]
    assert files, manifest
    n_pairs = 0
    for entry in files.values() if isinstance(files, dict) else files:
        name = entry["name"] if isinstance(entry, dict) and "name" in entry else entry["path"]
        path = next(out.rglob(Path(name).name))
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
        if "pair" in path.name:
            with gzip.open(path, "rt") as fh:
                lines = [line for line in fh if line.strip()]
            n_pairs += len(lines)
    assert n_pairs > 0
