"""Production settings: `check --deploy` clean, secrets only from the environment; staff-only pages stay
staff-only."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import URLPattern, URLResolver, get_resolver

ROOT = Path(__file__).resolve().parents[1]


def production(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """``manage.py ARGV`` under config.settings.production, with exactly the environment given."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PARAFORGE_"))}
    base.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        PARAFORGE_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL="",
        CELERY_BROKER_URL="filesystem://localhost/",
    )
    base.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=ROOT, env=base, capture_output=True, text=True, timeout=180
    )


def good_env(**extra: str) -> dict[str, str]:
    return {"DJANGO_SECRET_KEY": secrets.token_urlsafe(64), "DJANGO_ALLOWED_HOSTS": "paraforge.example.org", **extra}


@pytest.mark.slow
def test_check_deploy_is_clean_under_production_settings(tmp_path):
    result = production(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **good_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize(
    "env, message",
    [
        ({"DJANGO_ALLOWED_HOSTS": "paraforge.example.org"}, "DJANGO_SECRET_KEY must be set"),
        (
            {"DJANGO_SECRET_KEY": "too-short", "DJANGO_ALLOWED_HOSTS": "paraforge.example.org"},
            "DJANGO_SECRET_KEY must be set",
        ),
        ({"DJANGO_SECRET_KEY": secrets.token_urlsafe(64)}, "DJANGO_ALLOWED_HOSTS must name"),
        (
            {"DJANGO_SECRET_KEY": secrets.token_urlsafe(64), "DJANGO_ALLOWED_HOSTS": ""},
            "DJANGO_ALLOWED_HOSTS must name",
        ),
    ],
)
def test_production_refuses_to_start_without_its_secrets_from_the_environment(tmp_path, env, message):
    # A key left in var/ by the embedded default must not stand in for the environment's.
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret_key").write_text(secrets.token_urlsafe(64))
    result = production(tmp_path, "check", **env)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.slow
def test_production_settings_never_debug_and_keep_cookies_and_transport_secure(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS > 0, s.ALLOWED_HOSTS, "
        "s.SECRET_KEY == __import__('os').environ['DJANGO_SECRET_KEY'])"
    )
    result = production(tmp_path, "shell", "-c", code, **good_env(DJANGO_DEBUG="1"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False True True True True ['paraforge.example.org'] True"
    # and nothing secret was written to var/ when the key came from the environment
    assert not (tmp_path / "var" / "secret_key").exists()


def test_no_secret_is_written_in_the_settings_or_deployment_files():
    pattern = re.compile(r"""(SECRET_KEY|PASSWORD|AWS_SECRET_ACCESS_KEY)\s*[=:]\s*["']?[A-Za-z0-9_\-+/]{16,}""")
    files = [*sorted((ROOT / "config" / "settings").glob("*.py")), *sorted((ROOT / "docker").glob("*"))]
    for path in (f for f in files if f.is_file()):
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("#") or "env_str(" in line or "${" in line:
                continue
            assert not pattern.search(line), f"{path.relative_to(ROOT)}: {line.strip()}"


# --- staff-only pages ---------------------------------------------------------------------------------


def _routes(resolver: URLResolver, prefix: str = "") -> list[str]:
    found = []
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            found += _routes(entry, route)
        elif isinstance(entry, URLPattern):
            found.append(route)
    return found


def _example_url(route: str) -> str:
    url = re.sub(r"<(?:int|id):\w+>", "1", route)
    url = re.sub(r"<(?:str|slug):\w+>", "x", url)
    url = re.sub(r"<path:\w+>", "x/y", url)
    return "/" + url


def research_urls() -> list[str]:
    urls = sorted({_example_url(r) for r in _routes(get_resolver()) if r.startswith("research/")})
    assert "/research/constraints/" in urls
    return urls


STAFF_APIS = ["/api/jobs/1/", "/api/batches/1/hits/", "/api/batches/1/results.csv"]


@pytest.fixture
def annotator(db):
    return get_user_model().objects.create_user("annotator", password="pw-annotator-1")


STAFF_PERMS = ["view_job", "view_batch", "view_hit", "view_assignment", "view_judgment", "view_campaign", "view_corpus"]


@pytest.fixture
def staff(db):
    """A researcher with the admin's view permissions on what the staff pages show."""
    user = get_user_model().objects.create_user("researcher", password="pw-researcher-1", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=STAFF_PERMS))
    return user


@pytest.fixture
def bare_staff(db):
    """Staff (the admin lets them in) with no model permission at all."""
    return get_user_model().objects.create_user("intern", password="pw-intern-1", is_staff=True)


def _refused(response) -> bool:
    if response.status_code in (401, 403):
        return True
    return response.status_code == 302 and "login" in response["Location"]


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["anonymous", "annotator"])
def test_admin_research_and_staff_apis_refuse_everyone_but_staff(client, annotator, who):
    if who == "annotator":
        client.force_login(annotator)
    for url in ["/admin/", "/admin/jobs/job/", *research_urls(), *STAFF_APIS]:
        response = client.get(url)
        assert _refused(response), f"{who} GET {url} -> {response.status_code}"


@pytest.mark.django_db
def test_staff_without_model_permissions_see_no_worker_data(client, bare_staff):
    """Being staff opens the admin's door only: the results CSV (worker ids, comments), a batch's HITs, a
    job, the research pages all need the view permissions the admin itself asks for."""
    from annotation.models import Assignment, Worker
    from tests.annotation.builders import published_batch, sample_campaign

    batch = published_batch(sample_campaign(buckets=(5,), refs_per_bucket=1, candidates=5), attention_rate=0)
    worker = Worker.objects.create(provider="mturk", external_id="A1WORKERSECRET")
    Assignment.objects.create(
        campaign=batch.campaign, hit=batch.hits.get(), worker=worker, provider="mturk", external_assignment_id="ASG1"
    )
    client.force_login(bare_staff)
    for url in [
        f"/api/batches/{batch.pk}/results.csv",
        f"/api/batches/{batch.pk}/hits/",
        "/api/jobs/1/",
        *research_urls(),
    ]:
        response = client.get(url)
        assert response.status_code == 403, f"{url} -> {response.status_code}"
        assert b"A1WORKERSECRET" not in response.content
    changelist = client.get("/admin/annotation/batch/")
    assert b"export_results" not in changelist.content  # the admin's export action is not offered either


@pytest.mark.django_db
def test_staff_get_past_the_gate(client, staff):
    client.force_login(staff)
    assert client.get("/admin/").status_code == 200
    assert client.get("/research/constraints/").status_code == 200
    assert client.get("/research/campaigns/").status_code == 200
    assert client.get("/api/jobs/999999/").status_code == 404  # past the permission check: no such job
