"""The batch form's first *Preview* in a fresh web process (issue 37.7: 15.7 s with no feedback).

Each run is a new Python process, as a gunicorn worker that has not previewed yet: it signs in as a superuser,
opens the campaign's batch form and presses Preview once with the form's defaults (Prolific), timing the
POST. Two settings, interleaved, on the same quick start:

* ``cold``: the screen's cached words are not found (a fresh ``WORDS_CACHE_VERSION``), so it tokenizes the
  candidates with spaCy, which imports torch: what every first preview did before the words were cached;
* ``warm``: the words the campaign's generation cached (``annotation.campaigns.sample.words_warm``), as after
  ``scripts/start``.

Usage (on a var dir prepared by ``manage.py demo_setup``)::

    PARAFORGE_VAR_DIR=var .venv/bin/python bench/preview_first.py [--campaign demo-sample] [--rounds 3]

It prints each run's seconds, the medians and the ratio cold / warm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_RUN = r"""
import json, os, sys, time, uuid
sys.path.insert(0, {root!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
import django
django.setup()
import generation.vocabulary
if {cold!r}:
    generation.vocabulary.WORDS_CACHE_VERSION = "bench-" + uuid.uuid4().hex  # no cached words: tokenize
from django.contrib.auth import get_user_model
from django.test import Client
from annotation.admin import BatchForm
from annotation.models import Campaign
campaign = Campaign.objects.get(name={campaign!r})
user = get_user_model().objects.filter(is_superuser=True).first()
client = Client()
client.force_login(user)
url = f"/admin/annotation/campaign/{{campaign.pk}}/batch/"
client.get(url)
form = BatchForm(campaign=campaign)
data = {{n: str(form.get_initial_for_field(f, n)) for n, f in form.fields.items()
        if form.get_initial_for_field(f, n) is not None}}
data.update(provider="prolific", preview="Preview")
start = time.perf_counter()
answer = client.post(url, data)
took = time.perf_counter() - start
assert answer.status_code == 200 and b"Preview (nothing made yet)" in answer.content, answer.status_code
print(json.dumps({{"seconds": took, "spacy_loaded": "spacy" in sys.modules}}))
"""


def run(campaign: str, cold: bool) -> dict:
    code = ONE_RUN.format(root=str(ROOT), cold=cold, campaign=campaign)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", default="demo-sample")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    run(args.campaign, cold=False)  # fills the words once, should the quick start predate the cache
    for i in range(args.rounds):
        for setting in ("cold", "warm"):
            result = run(args.campaign, cold=setting == "cold")
            times[setting].append(result["seconds"])
            print(f"round {i + 1} {setting}: {result['seconds']:.2f} s (spaCy loaded: {result['spacy_loaded']})")
    cold, warm = statistics.median(times["cold"]), statistics.median(times["warm"])
    print(f"median first preview: cold {cold:.2f} s, warm {warm:.2f} s; cold / warm = {cold / warm:.1f}x")


if __name__ == "__main__":
    main()
