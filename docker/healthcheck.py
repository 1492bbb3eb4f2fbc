"""Container health checks (exit 0 healthy, 1 not), used by docker/compose.yaml and the Dockerfiles.

``web``: GET /healthz (the database answers) on the local gunicorn, with a Host it allows and the
proxy's HTTPS header, so production's host check and HTTPS redirect do not turn a healthy app into a
failure. ``celery NAME``: the Celery node ``NAME@<this container's hostname>`` answers a ping over the
broker (workers, and beat started with ``--enable-remote-control``, whose node is ``celerybeat``).
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request


def web_headers() -> dict[str, str]:
    """A Host that DJANGO_ALLOWED_HOSTS allows, and the header a TLS proxy adds."""
    hosts = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h.strip()]
    host = hosts[0].lstrip(".") if hosts and hosts[0] != "*" else "localhost"
    return {"Host": host, "X-Forwarded-Proto": "https"}


def web_healthy(port: int = 8000) -> bool:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/healthz", headers=web_headers())
    with urllib.request.urlopen(request, timeout=8) as response:
        return response.status == 200


def celery_node_healthy(name: str, timeout: float = 10.0) -> bool:
    from config.celery import app

    node = f"{name}@{socket.gethostname()}"
    replies = app.control.ping(destination=[node], timeout=timeout)
    return any(node in reply for reply in replies)


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["web"]:
            return 0 if web_healthy() else 1
        if len(argv) == 2 and argv[0] == "celery":
            return 0 if celery_node_healthy(argv[1]) else 1
    except Exception as exc:  # noqa: BLE001 - any failure means unhealthy; say why in the health log
        print(f"unhealthy: {exc!r}", file=sys.stderr)
        return 1
    print("usage: healthcheck.py web | celery NODE_NAME", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main(sys.argv[1:]))
