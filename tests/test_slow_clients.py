"""Slow clients (issue 27): the production web server sits behind nginx, which a dozen trickling clients
cannot stall, while gunicorn on its own can be.

Both tests run the real thing on 127.0.0.1: Debian's nginx (``/usr/sbin/nginx``, installed by
``scripts/test``) with docker/nginx/paraforge.conf.template rendered the way the official image renders
it (envsubst of ``${PARAFORGE_*}`` only), and, for the slow-client test, gunicorn serving config.wsgi
with the web service's own command line from docker/compose.yaml (one worker, to make a stall cheap)."""

from __future__ import annotations

import contextlib
import grp
import http.client
import json
import os
import pwd
import re
import secrets
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "compose.yaml"
TEMPLATE = ROOT / "docker" / "nginx" / "paraforge.conf.template"
NGINX = Path("/usr/sbin/nginx")
HOST = "127.0.0.1"


def require_nginx() -> None:
    if not (NGINX.is_file() and os.access(NGINX, os.X_OK)):
        pytest.fail(
            f"{NGINX} is missing: these tests run the deployment's reverse proxy for real. "
            "scripts/test installs it (apt-get install nginx); install it, do not skip them."
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not listen on {HOST}:{port} in {timeout:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop a process started with start_new_session=True, with everything it started."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


# --- the proxy: the template as the official nginx image renders it -----------------------------------


def compose_service(name: str) -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"][name]


def render_template(values: dict[str, str]) -> str:
    """envsubst as the image's 20-envsubst-on-templates.sh runs it with NGINX_ENVSUBST_FILTER
    (compose's value): only those variables, in ${NAME} or $NAME form; every other $ is nginx's."""
    pattern = re.compile(compose_service("proxy")["environment"]["NGINX_ENVSUBST_FILTER"])
    names = {name for name in values if pattern.search(name)}

    def substitute(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        return values[name] if name in names else match.group(0)

    rendered = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", substitute, TEMPLATE.read_text())
    left = re.findall(r"\$\{?(PARAFORGE_\w+)", rendered)
    assert not left, f"the template uses {left}, which compose's proxy service does not set"
    return rendered


@contextlib.contextmanager
def nginx_proxy(tmp: Path, upstream: str):
    """nginx in a prefix of its own, running the template in front of ``upstream``; yields its port."""
    require_nginx()
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    values = {
        **compose_service("proxy")["environment"],
        "PARAFORGE_UPSTREAM": upstream,
        "PARAFORGE_PROXY_LISTEN": f"{HOST}:{port}",
        "PARAFORGE_MAX_UPLOAD": "64m",
    }
    (tmp / "paraforge.conf").write_text(render_template(values))
    # Running as root, nginx's workers would switch to `nobody`, who cannot enter pytest's tmp dirs.
    user = (
        f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};" if os.geteuid() == 0 else ""
    )
    (tmp / "nginx.conf").write_text(f"""
{user}
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 1024; }}
http {{
    # what the official image's nginx.conf has around its `include /etc/nginx/conf.d/*.conf;`
    default_type application/octet-stream;
    access_log {tmp}/access.log;
    sendfile on;
    keepalive_timeout 65;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/paraforge.conf;
}}
""")
    log = tmp / "error.log"
    log.touch()
    check = subprocess.run(
        [str(NGINX), "-t", "-p", str(tmp), "-e", str(log), "-c", str(tmp / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode == 0, f"the rendered template does not load:\n{check.stderr}"
    proc = subprocess.Popen(
        [str(NGINX), "-p", str(tmp), "-e", str(log), "-c", str(tmp / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc, "nginx", log, timeout=20)
        yield port
    finally:
        stop(proc, signal.SIGTERM)


# --- the app: gunicorn as the web service runs it ------------------------------------------------------


def web_gunicorn_argv(port: int, workers: int) -> tuple[list[str], int]:
    """The web service's command, bound to 127.0.0.1:port with ``workers`` workers; and its threads."""
    argv = compose_service("web")["command"]
    argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
    assert argv[0] == "gunicorn"
    argv[argv.index("--bind") + 1] = f"{HOST}:{port}"
    threads = int(argv[argv.index("--threads") + 1])
    argv = [str(Path(sys.executable).with_name("gunicorn")), *argv[1:], "--workers", str(workers)]
    return argv, threads


@contextlib.contextmanager
def gunicorn_web(tmp: Path, workers: int = 1):
    """gunicorn on config.wsgi with the production settings on a SQLite file of its own; yields
    (port, threads per worker)."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv, threads = web_gunicorn_argv(port, workers)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PARAFORGE_", "WEB_CONCURRENCY"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS=f"{HOST},localhost",
        DJANGO_SECURE_SSL_REDIRECT="0",  # plain HTTP on loopback: TLS is the proxy's business
        PARAFORGE_TRUSTED_PROXIES=str(compose_service("web")["environment"]["PARAFORGE_TRUSTED_PROXIES"]),
        PARAFORGE_VAR_DIR=str(tmp / "var"),
        DJANGO_STATIC_ROOT=str(tmp / "static"),
        DATABASE_URL="",  # the embedded default: SQLite in PARAFORGE_VAR_DIR
        CELERY_BROKER_URL="filesystem://localhost/",
        LOG_LEVEL="WARNING",
        PYTHONDONTWRITEBYTECODE="1",
    )
    (tmp / "static").mkdir(exist_ok=True)
    log = tmp / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(port, proc, "gunicorn", log)
        yield port, threads
    finally:
        stop(proc, signal.SIGTERM)


# --- clients ---------------------------------------------------------------------------------------------


def get_healthz(port: int, timeout: float) -> tuple[int, float]:
    """GET /healthz on a new connection: (status, seconds); raises TimeoutError past ``timeout``."""
    start = time.monotonic()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", "/healthz", headers={"Host": HOST})
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - start
    finally:
        conn.close()


class SlowClients:
    """``n`` connections that each send a request line, then one more header line every ``every`` s,
    and never finish their header (slowloris)."""

    def __init__(self, port: int, n: int, every: float = 1.0):
        self.port, self.n, self.every = port, n, every
        self.sockets: list[socket.socket] = []
        self.lines_sent = 0
        self.closed_by_server = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)

    def __enter__(self):
        for i in range(self.n):
            s = socket.create_connection((HOST, self.port), timeout=5)
            s.sendall(f"GET /healthz?slow={i} HTTP/1.1\r\nHost: {HOST}\r\n".encode())
            self.sockets.append(s)
        self._thread.start()
        return self

    def _trickle(self):
        line = 0
        while not self._stop.wait(self.every):
            line += 1
            for s in list(self.sockets):
                try:
                    s.sendall(f"X-Slow-{line}: {'a' * 8}\r\n".encode())
                    self.lines_sent += 1
                except OSError:
                    self.sockets.remove(s)
                    self.closed_by_server += 1

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)
        for s in self.sockets:
            s.close()


def probe_healthz(port: int, seconds: float, timeout: float, pause: float = 0.5) -> list[float | str]:
    """GET /healthz again and again for ``seconds``: each answer's latency, or what went wrong."""
    results: list[float | str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            status, elapsed = get_healthz(port, timeout)
            results.append(elapsed if status == 200 else f"HTTP {status}")
        except TimeoutError:
            results.append(f"no answer in {timeout:g} s")
        except OSError as exc:
            results.append(f"{type(exc).__name__}: {exc}")
        time.sleep(pause)
    return results


@pytest.mark.slow
def test_slow_clients_stall_gunicorn_alone_but_not_behind_the_proxy(tmp_path):
    require_nginx()
    with (
        gunicorn_web(tmp_path / "web") as (app_port, threads),
        nginx_proxy(tmp_path / "nginx", f"{HOST}:{app_port}") as proxy_port,
    ):
        n_slow = max(12, 3 * threads)  # three times the threads of the (one) worker
        assert get_healthz(app_port, 30)[0] == 200  # warm: Django imported, database file made
        assert get_healthz(proxy_port, 10)[0] == 200

        # Through the proxy: nginx holds the slow connections itself; gunicorn never sees them.
        # (6.5 s in all: within client_header_timeout, 10 s, after which nginx drops them)
        with SlowClients(proxy_port, n_slow) as slow:
            time.sleep(0.5)
            via_proxy = probe_healthz(proxy_port, seconds=6, timeout=2)
            still_open, lines = len(slow.sockets), slow.lines_sent
        latencies = [r for r in via_proxy if isinstance(r, float)]
        print(
            f"\nvia nginx, {n_slow} slow clients open: {len(latencies)}/{len(via_proxy)} answers, "
            f"median {1000 * statistics.median(latencies):.1f} ms, max {1000 * max(latencies):.1f} ms"
            if latencies
            else f"\nvia nginx: {via_proxy}"
        )
        assert still_open == n_slow and lines >= n_slow * 5, "the slow clients were not trickling all along"
        assert len(via_proxy) >= 8
        assert all(isinstance(r, float) and r < 2 for r in via_proxy), via_proxy

        # The contrast: the same clients straight at gunicorn take every thread, and /healthz waits.
        with SlowClients(app_port, n_slow) as slow:
            time.sleep(1.5)
            direct = probe_healthz(app_port, seconds=4, timeout=2)
            still_open = len(slow.sockets)
        print(f"straight to gunicorn (1 worker x {threads} threads), same clients: {direct}")
        assert still_open == n_slow
        assert direct and all(isinstance(r, str) and r.startswith("no answer") for r in direct), direct

        # Once they are gone, gunicorn answers again: the stall was theirs.
        assert get_healthz(app_port, 30)[0] == 200


# --- what the proxy passes on ------------------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """An upstream that records what reaches it and when, and answers 200."""

    seen: list[dict] = []

    def setup(self):
        self.connected_at = time.monotonic()
        super().setup()

    def _answer(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Recorder.seen.append(
            {
                "path": self.path,
                "headers": self.headers,
                "body": body,
                "connected_at": self.connected_at,
                "received_at": time.monotonic(),
            }
        )
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def recording_upstream():
    Recorder.seen = []
    server = ThreadingHTTPServer((HOST, 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def raw_request(port: int, data: bytes, timeout: float = 10) -> tuple[int, str, bytes]:
    """Send ``data`` as it is; (status, Content-Type, body) of the answer."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(data)
        response = http.client.HTTPResponse(s)
        response.begin()
        return response.status, response.getheader("Content-Type", ""), response.read()


def test_proxy_passes_the_address_it_saw_and_only_complete_requests(tmp_path, settings, rf):
    from limits.client import client_ip

    with recording_upstream() as upstream, nginx_proxy(tmp_path / "nginx", f"{HOST}:{upstream}") as port:
        # A client writing its own X-Forwarded-For / -Proto / -Host.
        conn = http.client.HTTPConnection(HOST, port, timeout=10)
        conn.request(
            "GET",
            "/x",
            headers={
                "Host": "paraforge.example.org:8000",
                "X-Forwarded-For": "6.6.6.6",
                "X-Forwarded-Proto": "https",
                "X-Forwarded-Host": "evil.example",
                "X-Real-IP": "6.6.6.7",
            },
        )
        assert conn.getresponse().status == 200
        conn.close()
        headers = Recorder.seen[-1]["headers"]
        assert headers["X-Forwarded-For"] == f"6.6.6.6, {HOST}"  # nginx appended what it saw
        assert headers["Host"] == "paraforge.example.org:8000"
        assert headers["X-Forwarded-Proto"] == "http"  # the scheme nginx served, not the client's
        assert "X-Forwarded-Host" not in headers and "X-Real-IP" not in headers

        # What the app makes of it with the web service's PARAFORGE_TRUSTED_PROXIES: nginx's view,
        # never the address the client wrote (REMOTE_ADDR is the proxy container's, as in compose).
        trusted = int(compose_service("web")["environment"]["PARAFORGE_TRUSTED_PROXIES"])
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": trusted}
        request = rf.get("/", HTTP_X_FORWARDED_FOR=headers["X-Forwarded-For"], REMOTE_ADDR="172.18.0.5")
        assert client_ip(request) == HOST

        # A body sent in two halves a second apart reaches the upstream whole, after its last byte.
        body = b"x" * 200_000
        with socket.create_connection((HOST, port), timeout=10) as s:
            s.sendall(
                b"POST /submit HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:100_000]
            )
            time.sleep(1.0)
            last_byte_at = time.monotonic()
            s.sendall(body[100_000:])
            response = http.client.HTTPResponse(s)
            response.begin()
            assert response.status == 200
        seen = Recorder.seen[-1]
        assert seen["path"] == "/submit" and seen["body"] == body
        assert seen["connected_at"] >= last_byte_at, "nginx opened the upstream connection before the body was in"

        # Over the size Django allows: nginx's 413 in the app's error shape; the upstream sees nothing.
        n_seen = len(Recorder.seen)
        status, content_type, answer = raw_request(
            port,
            b"POST /api/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (12 * 1024 * 1024),
        )
        assert (status, content_type) == (413, "application/json")
        assert json.loads(answer) == {"detail": "the request body is too large", "code": "request_too_large"}
        assert len(Recorder.seen) == n_seen

        # The container health check's own endpoint, answered by nginx alone.
        assert raw_request(port, b"GET /proxy-health HTTP/1.0\r\n\r\n")[::2] == (200, b"ok\n")
        assert len(Recorder.seen) == n_seen


def test_one_address_holds_at_most_32_requests_in_flight_on_every_page(tmp_path):
    """``location /`` (issue 36): requests whose bodies trickle in each hold a connection of nginx's; one
    address gets 32 of them, the next request is a 429 at once in the app's error shape, and once they are
    gone the address is served again."""
    with recording_upstream() as upstream, nginx_proxy(tmp_path / "nginx", f"{HOST}:{upstream}") as port:
        held = []
        try:
            for _ in range(32):  # a complete header, then a body that never comes: nginx waits on it
                s = socket.create_connection((HOST, port), timeout=10)
                s.sendall(b"POST /api/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nx")
                held.append(s)
            time.sleep(0.5)  # nginx has read every header
            n_seen = len(Recorder.seen)
            status, content_type, answer = raw_request(port, b"GET /hits/1/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            assert (status, content_type) == (429, "application/json")
            assert json.loads(answer) == {
                "detail": "too many requests at once from this address",
                "code": "too_many_connections",
            }
            assert len(Recorder.seen) == n_seen  # refused by nginx: the app saw nothing
            # the proxy's own health check is not behind the limit
            assert raw_request(port, b"GET /proxy-health HTTP/1.0\r\n\r\n")[0] == 200
        finally:
            for s in held:
                s.close()
        time.sleep(0.5)
        assert raw_request(port, b"GET /x HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")[0] == 200
