"""A local Prolific API v1 for tests: a real HTTP server on 127.0.0.1 that checks every request against
Prolific's API description and answers with its documented shapes -- the role botocore's Stubber plays
for MTurk.

The description is the one ``pyrolific`` was generated from (Prolific's published OpenAPI document): each
of its operation modules gives a method and a path template, its ``body`` parameter the request's typed
model (attrs classes whose required fields have no default and whose field types say what a value must
be), its other parameters the query's names. A request whose method and path match no operation, whose
body misses a required field, has a field the model does not know, or a value of the wrong type or
outside an enum, is answered 400 and recorded in ``errors`` -- the ``prolific`` fixture fails the test.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import pkgutil
import re
import threading
import typing
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import attrs
import pyrolific.api
import pyrolific.models
from pyrolific.types import Unset

TOKEN = "test-prolific-token"


@dataclass
class Operation:
    name: str
    method: str
    pattern: re.Pattern
    body: typing.Any  # the body's annotation, or None
    query: set[str]


def _operations() -> list[Operation]:
    found = []
    for info in pkgutil.walk_packages(pyrolific.api.__path__, "pyrolific.api."):
        module = importlib.import_module(info.name)
        kwargs = getattr(module, "_get_kwargs", None)
        if kwargs is None:
            continue
        source = inspect.getsource(kwargs)
        method = re.search(r'"method": "(\w+)"', source)
        url = re.search(r'"url": f?"([^"]+)"', source)
        if not method or not url:
            continue
        template = url.group(1)
        pattern = re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(template)) + "$")
        params = inspect.signature(kwargs).parameters
        hints = typing.get_type_hints(kwargs, localns=vars(pyrolific.models))
        query: set[str] = set()
        for name in params:
            if name in ("body", "authorization") or "{" + name + "}" in template:
                continue
            query.add(name.rstrip("_"))
            for alternative in _alternatives(hints.get(name)):  # an exploded object parameter: its fields
                if attrs.has(alternative):
                    query |= {f.name for f in attrs.fields(alternative) if f.name != "additional_properties"}
        found.append(
            Operation(
                info.name.rsplit(".", 1)[1],
                method.group(1).upper(),
                pattern,
                hints.get("body") if "body" in params else None,
                query,
            )
        )
    return found


def _alternatives(annotation) -> list:
    if typing.get_origin(annotation) is typing.Union:
        return [a for a in typing.get_args(annotation)]
    return [annotation] if annotation is not None else []


def check_value(value, annotation, where: str) -> list[str]:
    """What is wrong with ``value`` as a ``annotation`` (a pyrolific field type); [] when it fits."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        options = [a for a in typing.get_args(annotation) if a is not Unset]
        if value is None and type(None) in options:
            return []
        results = [check_value(value, a, where) for a in options if a is not type(None)]
        return [] if any(not r for r in results) else (min(results, key=len) if results else [f"{where}: null"])
    if origin in (list, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {value!r}"]
        (item,) = typing.get_args(annotation) or (typing.Any,)
        return [e for i, v in enumerate(value) for e in check_value(v, item, f"{where}[{i}]")]
    if origin in (dict, dict):
        return [] if isinstance(value, dict) else [f"{where}: expected an object, got {value!r}"]
    if annotation is typing.Any:
        return []
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        allowed = [m.value for m in annotation]
        return [] if value in allowed else [f"{where}: {value!r} is not one of {allowed}"]
    if isinstance(annotation, type) and attrs.has(annotation):
        return check_model(value, annotation, where)
    if annotation is bool:
        return [] if isinstance(value, bool) else [f"{where}: expected true/false, got {value!r}"]
    if annotation is int:
        return (
            []
            if isinstance(value, int) and not isinstance(value, bool)
            else [f"{where}: expected an integer, got {value!r}"]
        )
    if annotation is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected a number, got {value!r}"]
    if annotation is str:
        return [] if isinstance(value, str) else [f"{where}: expected a string, got {value!r}"]
    return [] if isinstance(value, str) else [f"{where}: expected {annotation}, got {value!r}"]  # dates etc.


def check_model(value, model, where: str = "body") -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected an object ({model.__name__}), got {value!r}"]
    hints = typing.get_type_hints(model, localns=vars(pyrolific.models))
    fields = {f.name: f for f in attrs.fields(model) if f.name != "additional_properties"}
    errors = [f"{where}: {model.__name__} has no field {key!r}" for key in value if key not in fields]
    for name, spec in fields.items():
        if name not in value:
            if spec.default is attrs.NOTHING:
                errors.append(f"{where}: {model.__name__} requires {name!r}")
            continue
        errors += check_value(value[name], hints[name], f"{where}.{name}")
    return errors


@dataclass
class ProlificStub:
    """The stub's state: what the tests seed and assert on. ``calls``: (method, path, query, body) as
    received; ``errors``: requests that broke the description."""

    workspace: str = "ws0000000000000000000001"
    balance_cents: int = 100_000
    currency: str = "USD"
    studies: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)  # id -> {"name", "participants": set}
    submissions: dict = field(default_factory=dict)  # id -> SubmissionShort dict (+ "study")
    bulk_bonuses: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    fail_next: list = field(default_factory=list)  # statuses to answer the next requests with (e.g. 429)
    filters: list = field(
        default_factory=lambda: [
            {
                "filter_id": "first-language",
                "title": "First language",
                "type": "select",
                "choices": {"0": "Afrikaans", "19": "English", "20": "Estonian"},
            },
            {
                "filter_id": "current-country-of-residence",
                "title": "Current country of residence",
                "type": "select",
                "choices": {"0": "United Kingdom", "1": "United States", "45": "Czech Republic"},
            },
            {"filter_id": "approval_rate", "title": "Approval rate", "type": "range"},
        ]
    )
    operations: list = field(default_factory=_operations)
    url: str = ""

    def calls_to(self, method: str, path_part: str) -> list:
        return [c for c in self.calls if c[0] == method and path_part in c[1]]

    def add_submission(self, *, study: str, session: str, participant: str, status: str = "AWAITING REVIEW") -> None:
        self.submissions[session] = {
            "id": session,
            "participant_id": participant,
            "status": status,
            "started_at": "2026-11-24T10:00:00Z",
            "has_siblings": False,
            "completed_at": "2026-11-24T10:20:00Z",
            "study_code": "X",
            "study": study,
        }

    # --- answering --------------------------------------------------------------------------------

    def answer(self, method: str, path: str, query: dict, body) -> tuple[int, object]:
        operation = next((op for op in self.operations if op.method == method and op.pattern.match(path)), None)
        if operation is None:
            return self._refuse(f"{method} {path}: no such operation in Prolific's API description")
        unknown = set(query) - operation.query
        if unknown:
            return self._refuse(f"{method} {path}: unknown query parameter(s) {sorted(unknown)}")
        if operation.body is not None and method in ("POST", "PATCH", "PUT", "DELETE"):
            problems = [] if body is None and method == "DELETE" else check_value(body, operation.body, "body")
            if problems:
                return self._refuse(f"{method} {path}: " + "; ".join(problems))
        elif body is not None:
            return self._refuse(f"{method} {path}: takes no body")
        if self.fail_next:
            return self.fail_next.pop(0), {"error": {"detail": "Request was throttled."}}
        handler = getattr(self, f"_{operation.name}", None)
        if handler is None:
            return self._refuse(f"{operation.name}: the stub does not answer it (add a handler)")
        return handler(path=path, query=query, body=body)

    def _refuse(self, message: str) -> tuple[int, dict]:
        self.errors.append(message)
        return 400, {"error": {"detail": message}}

    @staticmethod
    def _id() -> str:
        return uuid.uuid4().hex[:24]

    def _get_workspaces(self, **_):
        return 200, {"results": [{"id": self.workspace, "title": "Lab"}]}

    def _get_workspace_balance(self, **_):
        return 200, {
            "currency_code": self.currency,
            "total_balance": self.balance_cents,
            "available_balance": self.balance_cents,
        }

    def _get_participant_groups(self, **_):
        return 200, {
            "results": [
                {
                    "id": gid,
                    "name": g["name"],
                    "workspace_id": self.workspace,
                    "is_deleted": False,
                    "participant_count": len(g["participants"]),
                }
                for gid, g in self.groups.items()
            ]
        }

    def _create_participant_group(self, body, **_):
        gid = self._id()
        self.groups[gid] = {"name": body["name"], "participants": set(body.get("participant_ids", []))}
        return 201, {"id": gid, "name": body["name"], "workspace_id": body.get("workspace_id")}

    def _group(self, path: str):
        return self.groups.get(path.split("/")[4])

    def _add_to_participant_group(self, path, body, **_):
        group = self._group(path)
        if group is None:
            return 404, {"error": {"detail": "no such group"}}
        group["participants"] |= set(body.get("participant_ids", []))
        return 200, {"results": [{"participant_id": p} for p in sorted(group["participants"])]}

    def _remove_from_participant_group(self, path, body, **_):
        group = self._group(path)
        if group is None:
            return 404, {"error": {"detail": "no such group"}}
        group["participants"] -= set(body.get("participant_ids", []))
        return 200, {"results": [{"participant_id": p} for p in sorted(group["participants"])]}

    def _get_filters(self, **_):
        return 200, {"results": self.filters}

    def _get_studies(self, query, **_):
        state = (query.get("state") or [None])[0]
        return 200, {"results": [s for s in self.studies.values() if state is None or s["status"] == state]}

    def _create_study(self, body, **_):
        sid = self._id()
        self.studies[sid] = {**body, "id": sid, "status": "UNPUBLISHED"}
        return 201, self.studies[sid]

    def _study(self, path: str):
        return self.studies.get(path.split("/")[4])

    def _get_study(self, path, **_):
        study = self._study(path)
        return (200, study) if study else (404, {"error": {"detail": "no such study"}})

    def _publish_study(self, path, body, **_):
        study = self._study(path)
        if study is None:
            return 404, {"error": {"detail": "no such study"}}
        study["status"] = {"PUBLISH": "ACTIVE", "START": "ACTIVE", "PAUSE": "PAUSED", "STOP": "AWAITING REVIEW"}.get(
            body["action"], study["status"]
        )
        return 200, study

    def _calculate_study_cost(self, body, **_):
        return 200, {"total_cost": round(body["reward"] * body["total_available_places"] * 4 / 3)}

    def _get_study_submissions(self, path, **_):
        sid = path.split("/")[4]
        rows = [{k: v for k, v in s.items() if k != "study"} for s in self.submissions.values() if s["study"] == sid]
        return 200, {"results": rows, "_links": {"next": {"href": None}}, "meta": {"count": len(rows)}}

    def _get_submission(self, path, **_):
        found = self.submissions.get(path.split("/")[4])
        if found is None:
            return 404, {"error": {"detail": "no such submission"}}
        return 200, {
            "id": found["id"],
            "participant": found["participant_id"],
            "status": found["status"],
            "study_id": found["study"],
            "started_at": found["started_at"],
        }

    def _bulk_approve_submissions(self, body, **_):
        for sid in body.get("submission_ids", []):
            if sid in self.submissions:
                self.submissions[sid]["status"] = "APPROVED"
        return 200, None

    def _transition_submission(self, path, body, **_):
        found = self.submissions.get(path.split("/")[4])
        if found is None:
            return 404, {"error": {"detail": "no such submission"}}
        if body["action"] == "REJECT" and (len(body.get("message", "")) < 100 or not body.get("rejection_category")):
            return self._refuse("REJECT needs a message of at least 100 characters and a rejection_category")
        found["status"] = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(body["action"], found["status"])
        return 200, {
            "id": found["id"],
            "status": found["status"],
            "study_id": found["study"],
            "started_at": found["started_at"],
            "participant": found["participant_id"],
        }

    def _create_bonus_payments(self, body, **_):
        bid = self._id()
        rows = [line.split(",") for line in body["csv_bonuses"].splitlines() if line.strip()]
        total = sum(round(float(amount) * 100) for _, amount in rows)
        self.bulk_bonuses[bid] = {"rows": rows, "paid": False, "study": body["study_id"]}
        return 201, {
            "id": bid,
            "study": body["study_id"],
            "amount": total,
            "fees": round(total / 3),
            "vat": 0,
            "total_amount": total + round(total / 3),
        }

    def _pay_bonus_payments(self, path, **_):
        bonus = self.bulk_bonuses.get(path.split("/")[4])
        if bonus is None:
            return 404, {"error": {"detail": "no such bonus payment"}}
        bonus["paid"] = True
        return 202, None


class _Handler(BaseHTTPRequestHandler):
    stub: ProlificStub

    def log_message(self, *args):  # quiet
        pass

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        self.stub.calls.append((method, parts.path, query, body))
        if self.headers.get("Authorization") != f"Token {TOKEN}":
            status, answer = 401, {"error": {"detail": "Invalid token."}}
        else:
            status, answer = self.stub.answer(method, parts.path, query, body)
        data = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_DELETE(self):
        self._serve("DELETE")

    def do_PATCH(self):
        self._serve("PATCH")


def serve(stub: ProlificStub) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"stub": stub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    return server
