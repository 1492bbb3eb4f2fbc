"""The admin's dead ends (issue 37, item 6): a campaign's worker comments on one page, the research pages linked
from the admin's index, the login lockout tables for superusers only, no "Add job", the campaign page's settings
in words and its model by name, and *Recent actions* that list what the admin's own actions did."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from annotation.batches.making import hit_batch_create
from annotation.batches.params import BatchParams
from annotation.models import Assignment, Worker
from jobs.models import Job
from tests.annotation.builders import sample_campaign

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "generation" / "demo" / "model"


def staff(username: str, *codenames: str, superuser: bool = False):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True, is_superuser=superuser)
    perms = Permission.objects.all() if codenames == ("*",) else Permission.objects.filter(codename__in=codenames)
    user.user_permissions.set(perms)
    return user


def test_the_admin_index_links_results_and_constraints(client):
    client.force_login(staff("researcher", "view_campaign", "view_judgment", "view_corpus"))
    page = client.get("/admin/").content.decode()
    assert f'href="{reverse("campaign_list")}"' in page and ">Results<" in page
    assert f'href="{reverse("constraint_systems")}"' in page and ">Constraints<" in page
    # a staff member who may open neither page is not sent to a 403
    client.force_login(staff("intern"))
    page = client.get("/admin/").content.decode()
    assert reverse("campaign_list") not in page and reverse("constraint_systems") not in page


def test_the_lockout_tables_are_for_superusers_only(client):
    client.force_login(staff("researcher", "*"))  # every permission there is, axes' own included
    page = client.get("/admin/").content.decode()
    assert "/admin/axes/" not in page and "Access attempts" not in page
    for url in ("/admin/axes/accessattempt/", "/admin/axes/accesslog/", "/admin/axes/accessfailurelog/"):
        assert client.get(url).status_code in (403, 404), url
    client.force_login(staff("root", superuser=True))
    assert "/admin/axes/accessattempt/" in client.get("/admin/").content.decode()
    assert client.get("/admin/axes/accessattempt/").status_code == 200


def test_jobs_cannot_be_added_empty(admin_client):
    assert admin_client.get("/admin/jobs/job/add/").status_code == 403
    assert "/admin/jobs/job/add/" not in admin_client.get("/admin/jobs/job/").content.decode()
    assert "/admin/jobs/job/add/" not in admin_client.get("/admin/").content.decode()
    assert not Job.objects.exists()


def test_the_campaign_page_shows_its_settings_in_words_and_its_model_by_name(admin_client):
    job = Job.objects.create(kind="generate", params={"model": str(DEMO_MODEL)}, status="succeeded")
    campaign = sample_campaign("pilot", job=job, settings={"redundancy": 5, "max_attention_failure_rate": 0.2})
    campaign.description = f"evaluation sample of corpus demo: systems 15, 22, model {DEMO_MODEL}"  # as written before
    campaign.save()
    page = admin_client.get(f"/admin/annotation/campaign/{campaign.pk}/change/").content.decode()
    assert str(ROOT) not in page  # no server path anywhere on the page
    assert '<div class="readonly">generation/demo/model</div>' in page  # the model's own row, by name
    assert "model generation/demo/model" in page  # and in the description an older version wrote
    assert '"redundancy"' not in page and "{&quot;" not in page  # not raw JSON
    assert '<th scope="row">different workers per candidate</th><td>5</td><td class="help">default: 3</td>' in page
    assert '<th scope="row">share of failed checks that disqualifies a worker</th><td>20%</td>' in page
    assert '<th scope="row">judgments a worker gives before theirs count</th><td>25</td>' in page  # a default


def comment(campaign, hit, name: str, text: str) -> Assignment:
    worker = Worker.objects.create(external_id=name, provider="mturk")
    return Assignment.objects.create(
        campaign=campaign,
        hit=hit,
        worker=worker,
        provider="mturk",
        external_assignment_id=f"A-{name}",
        submitted_at=timezone.now(),
        comment=text,
    )


def test_a_campaign_lists_its_workers_comments_on_one_page(admin_client):
    campaign = sample_campaign("pilot")
    other = sample_campaign("other")
    batch = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", per_length=1, lengths=[5], assignments=2)
    )
    hit = batch.hits.first()
    comment(campaign, hit, "W1", "The slider is hard to move on a phone.")
    comment(campaign, hit, "W2", "")
    comment(other, None, "W3", "A comment of another campaign.")

    page = admin_client.get(f"/admin/annotation/campaign/{campaign.pk}/change/").content.decode()
    url = reverse("admin:annotation_campaign_comments", args=[campaign.pk])
    assert f'href="{url}"' in page
    assert f'href="{url}"' in admin_client.get(reverse("campaign_dashboard", args=[campaign.pk])).content.decode()
    listing = admin_client.get(url).content.decode()
    assert "The slider is hard to move on a phone." in listing and "W1" in listing
    assert hit.reference.text in listing
    assert "1 comment that workers left" in listing
    # an empty comment is no comment (read in the table: the page's CSRF token may hold any two letters, "W2" too)
    start = listing.index('<table id="worker-comments"')
    table = listing[start : listing.index("</table>", start)]
    assert "another campaign" not in listing and "W1" in table and "W2" not in table


def test_a_campaign_without_comments_says_so_and_the_page_is_staff_only(admin_client, client):
    campaign = sample_campaign("quiet")
    url = reverse("admin:annotation_campaign_comments", args=[campaign.pk])
    assert "No worker has left a comment" in admin_client.get(url).content.decode()
    client.force_login(staff("viewer", "view_campaign"))  # may see the campaign, not the assignments
    assert client.get(url).status_code == 403
    assert admin_client.get(reverse("admin:annotation_campaign_comments", args=[999999])).status_code == 404


def test_recent_actions_list_the_admins_own_actions(client):
    boss = staff("boss", superuser=True)
    client.force_login(boss)
    assert "None available" in client.get("/admin/").content.decode()
    campaign = sample_campaign("pilot")
    batch = hit_batch_create(
        campaign=campaign, params=BatchParams(provider="local", per_length=1, lengths=[5], assignments=1)
    )
    client.post(
        "/admin/annotation/batch/",
        {"action": "publish_batches", "_selected_action": [batch.pk], "confirm": "yes"},
    )
    batch.refresh_from_db()
    assert batch.status == "published"
    page = client.get("/admin/").content.decode()
    assert "None available" not in page
    recent = page.split('id="recent-actions-module"', 1)[1]
    assert f"/admin/annotation/batch/{batch.pk}/change/" in recent and "published" in recent


def test_recent_actions_list_the_jobs_the_admins_forms_start(client, storage_dir, settings, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.MEDIA_ROOT = tmp_path / "media"
    client.force_login(staff("boss", superuser=True))
    response = client.post(
        reverse("admin:generation_corpus_import"),
        {"file": SimpleUploadedFile("pairs.txt", b"Hello there.\nGood bye.\n"), "name": "pilot", "on_error": "skip"},
    )
    assert response.status_code == 302
    job = Job.objects.get(kind="import_corpus")
    recent = client.get("/admin/").content.decode().split('id="recent-actions-module"', 1)[1]
    assert f"/admin/jobs/job/{job.pk}/change/" in recent and "Started: import pilot" in recent
