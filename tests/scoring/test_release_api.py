import hashlib

import boto3
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from moto import mock_aws

from scoring.releases.access import RELEASE_VIEW_PERMS
from scoring.releases.export import release_export
from scoring.releases.params import ReleaseExportParams

from .resource_data import OverlapScorer, build_resource, make_regressor, score_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def releases(storage_dir, tmp_path):
    resource = build_resource()
    score_with(resource, make_regressor(), OverlapScorer())
    public = release_export(ReleaseExportParams(resource=resource.pk), out_dir=tmp_path / "v1")
    private = release_export(ReleaseExportParams(resource=resource.pk, filters="top=1"), out_dir=tmp_path / "v2")
    return public, private


def with_perms(user, *perms):
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    return get_user_model().objects.get(pk=user.pk)  # (permissions are cached on the instance)


@pytest.fixture
def users():
    User = get_user_model()
    return {
        "staff": with_perms(User.objects.create_user("staff", password="pw", is_staff=True), *RELEASE_VIEW_PERMS),
        "alice": User.objects.create_user("alice", password="pw"),
        "bob": User.objects.create_user("bob", password="pw"),
    }


def as_user(client, user):
    client.force_login(user)
    return client


def test_anonymous_is_refused_everywhere(client, releases):
    v1, _ = releases
    for url in ("/api/releases/", f"/api/releases/{v1.pk}/", f"/api/releases/{v1.pk}/files/pairs.tsv.gz"):
        assert client.get(url).status_code in (401, 403)


def test_staff_sees_every_release_and_others_only_theirs(client, releases, users):
    v1, v2 = releases
    v1.allowed_users.add(users["alice"])
    staff = as_user(client, users["staff"]).get("/api/releases/").json()["results"]
    assert [r["version"] for r in staff] == ["v2", "v1"]
    alice = as_user(client, users["alice"]).get("/api/releases/").json()["results"]
    assert [r["version"] for r in alice] == ["v1"]
    row = alice[0]
    assert row["resource"] == "res" and row["counts"]["pairs"] == 17  # 18 less the copy of its reference
    assert row["regressor"] == {"name": "overlap", "spearman_test": 0.71}
    assert [f["name"] for f in row["files"]] == ["README.md", "judgments.tsv.gz", "pairs.tsv.gz", "manifest.json"]
    assert row["files"][2]["url"].endswith(f"/api/releases/{v1.pk}/files/pairs.tsv.gz")
    assert "location" not in row  # server paths are not shown
    assert as_user(client, users["bob"]).get("/api/releases/").json()["results"] == []


def test_staff_without_the_release_permission_sees_no_more_than_the_admin_shows(client, releases, users):
    """Issue 27: a staff user without permissions got 403 on the admin's release pages but every release
    and its files from the API. One rule now: the admin's and the API's."""
    v1, v2 = releases
    bare = get_user_model().objects.create_user("bare", password="pw", is_staff=True)
    v1.allowed_users.add(bare)  # given v1 like any user, but not v2
    c = as_user(client, bare)
    assert c.get("/admin/scoring/release/").status_code == 403
    assert c.get(f"/admin/scoring/release/{v2.pk}/change/").status_code == 403
    assert [r["version"] for r in c.get("/api/releases/").json()["results"]] == ["v1"]
    for url in (
        f"/api/releases/{v2.pk}/",
        f"/api/releases/{v2.pk}/files/pairs.tsv.gz",
        f"/api/releases/{v2.pk}/files/manifest.json",
    ):
        response = c.get(url)
        assert response.status_code == 404 and response.json()["code"] == "not_found", url
    assert c.get(f"/api/releases/{v1.pk}/files/pairs.tsv.gz").status_code == 200

    # changing releases (their allowed users) without viewing them opens neither
    as_user(client, with_perms(bare, "scoring.change_release"))
    assert c.get("/admin/scoring/release/").status_code == 403
    assert [r["version"] for r in c.get("/api/releases/").json()["results"]] == ["v1"]

    # the permission the admin asks for opens both, files included
    as_user(client, with_perms(bare, *RELEASE_VIEW_PERMS))
    assert c.get("/admin/scoring/release/").status_code == 200
    assert c.get(f"/admin/scoring/release/{v2.pk}/change/").status_code == 200
    assert [r["version"] for r in c.get("/api/releases/").json()["results"]] == ["v2", "v1"]
    assert c.get(f"/api/releases/{v2.pk}/files/pairs.tsv.gz").status_code == 200


def test_manifest_and_file_download_for_an_allowed_user(client, releases, users, tmp_path):
    v1, v2 = releases
    v1.allowed_users.add(users["alice"])
    c = as_user(client, users["alice"])
    detail = c.get(f"/api/releases/{v1.pk}/").json()
    assert detail["manifest"] == v1.manifest and detail["manifest"]["version"] == "v1"
    response = c.get(f"/api/releases/{v1.pk}/files/pairs.tsv.gz")
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    assert 'attachment; filename="pairs.tsv.gz"' in response["Content-Disposition"]
    body = b"".join(response.streaming_content)
    assert hashlib.sha256(body).hexdigest() == v1.manifest["files"]["pairs.tsv.gz"]["sha256"]
    assert body == (tmp_path / "v1" / "pairs.tsv.gz").read_bytes()
    manifest = c.get(f"/api/releases/{v1.pk}/files/manifest.json")
    assert b"".join(manifest.streaming_content) == (tmp_path / "v1" / "manifest.json").read_bytes()
    # not allowed: as if it did not exist
    assert c.get(f"/api/releases/{v2.pk}/").status_code == 404
    assert c.get(f"/api/releases/{v2.pk}/files/pairs.tsv.gz").status_code == 404


def test_only_the_release_files_are_served(client, releases, users, tmp_path):
    v1, _ = releases
    (tmp_path / "v1" / "secret.txt").write_text("not part of the release")
    c = as_user(client, users["staff"])
    assert c.get(f"/api/releases/{v1.pk}/files/secret.txt").status_code == 404
    assert c.get(f"/api/releases/{v1.pk}/files/..%2F..%2Fetc%2Fpasswd").status_code == 404
    assert c.get("/api/releases/999999/").status_code == 404


@mock_aws
def test_a_release_uploaded_to_s3_is_served_from_s3(client, storage_dir, tmp_path, users):
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="pub")
    resource = build_resource()
    score_with(resource, make_regressor(), OverlapScorer())
    release = release_export(
        ReleaseExportParams(resource=resource.pk), out_dir=tmp_path / "local", upload="s3://pub/releases/res"
    )
    assert release.location == "s3://pub/releases/res"
    (tmp_path / "local" / "judgments.tsv.gz").unlink()  # served from the bucket, not the local copy
    response = as_user(client, users["staff"]).get(f"/api/releases/{release.pk}/files/judgments.tsv.gz")
    body = b"".join(response.streaming_content)
    assert hashlib.sha256(body).hexdigest() == release.manifest["files"]["judgments.tsv.gz"]["sha256"]
