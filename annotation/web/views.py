"""The slider page (MTurk's ExternalQuestion contract) and the local annotators' entry points."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.hits.access import crowd_access
from annotation.hits.guide import worker_guide
from annotation.hits.page import HitPageFacts, example_content, hit_content, hit_page_facts
from annotation.hits.submissions import hit_closed
from annotation.hits.tokens import submission_token_make
from annotation.models import ASSIGNMENT_ID, SUBMITTED_STATUSES, WORKER_ID, AssignmentStatus, BatchStatus, Hit, Provider
from annotation.providers.local import (
    WorkerBarred,
    local_assignment_return,
    local_hit_take,
    local_open_assignment,
    local_worker,
)
from annotation.providers.prolific import completion_url, session_id
from annotation.providers.prolific.sessions import SessionError, session_next
from annotation.quality.workers import WORKER_BARRED_MESSAGE
from limits.client import client_ip
from limits.counters import over_limit

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
DEFAULT_TURK_HOSTS = ("www.mturk.com", "workersandbox.mturk.com")
# MTurk shows ExternalQuestion pages in a frame: allow its sites (and ourselves), nobody else
FRAME_ANCESTORS = "frame-ancestors 'self' https://*.mturk.com https://mturk.com"


def external_submit_url(turk_submit_to: str) -> str | None:
    """``https://<host>/mturk/externalSubmit`` when ``turkSubmitTo`` names one of MTurk's submit hosts
    (settings ``ANNOTATION_TURK_SUBMIT_HOSTS``), else None: work is never posted anywhere else.

    The URL is built from the allowed host string itself, never from the given value, and anything but a
    bare ``https://host`` (optionally ``/``) is refused: a backslash (``https://evil.example\\@www.mturk.com``
    is www.mturk.com to urlsplit but evil.example to a browser), userinfo, a port, a path, a query or
    fragment, whitespace, control or non-ASCII characters."""
    if not isinstance(turk_submit_to, str) or not turk_submit_to or not turk_submit_to.isascii():
        return None
    if any(ch in "\\@?#" or ch.isspace() or not ch.isprintable() for ch in turk_submit_to):
        return None
    try:
        parts = urlsplit(turk_submit_to)
    except ValueError:
        return None
    if parts.scheme != "https" or parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    allowed = {str(h).lower(): str(h) for h in getattr(settings, "ANNOTATION_TURK_SUBMIT_HOSTS", DEFAULT_TURK_HOSTS)}
    host = allowed.get(parts.netloc.lower())  # netloc, not hostname: "user@host" or "host:443" match nothing
    if host is None:
        return None
    return f"https://{host}/mturk/externalSubmit"


def _blocked_reason(facts: HitPageFacts) -> str | None:
    """Why this worker cannot submit this HIT now (shown instead of the submit button), or None."""
    closed = hit_closed(batch_status=facts.batch_status, expires_at=facts.expires_at, now=timezone.now())
    if closed is not None:
        return closed.message
    if facts.assignment_status in SUBMITTED_STATUSES:
        return "This assignment is already submitted. Thank you!"
    if facts.assignment_status == AssignmentStatus.EXPIRED:
        return "The time allotted to this assignment ran out."
    if facts.assignment_status not in (None, AssignmentStatus.ACCEPTED):
        return "This assignment is no longer open: take your next HIT."
    if facts.worker_disqualified:
        return "You can no longer work on these HITs."
    if facts.worker_has_judged:
        return "You have already judged a sentence of this HIT; please return it."
    return None


@xframe_options_exempt
def hit_page(request: HttpRequest, hit_id: int) -> HttpResponse:
    """GET /hits/<hit_id>/?assignmentId=&hitId=&workerId=&turkSubmitTo= (preview when not accepted)."""
    assignment_id = request.GET.get("assignmentId", "").strip()
    worker_id = request.GET.get("workerId", "").strip()
    # ids no platform gives (a NUL, control or look-alike characters) look nothing up: the page says so below
    ids_valid = (not worker_id or WORKER_ID.match(worker_id)) and (
        not assignment_id or ASSIGNMENT_ID.match(assignment_id)
    )
    facts = hit_page_facts(
        hit_id=hit_id, assignment_id=assignment_id if ids_valid else "", worker_id=worker_id if ids_valid else ""
    )
    if facts is None:
        raise Http404("No such HIT.")
    preview = not assignment_id or assignment_id == PREVIEW_ASSIGNMENT
    local = facts.provider == Provider.LOCAL
    # crowd workers preview a published HIT before accepting it; nobody previews a draft or a local HIT
    public = not local and facts.batch_status == BatchStatus.PUBLISHED
    if preview and not public:
        raise Http404("No such HIT.")
    status = 200
    blocked = None
    own = False
    if not preview and local and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("annotate-login"))
    if not preview and local:
        own = (
            facts.assignment_hit_id == facts.hit_id
            and facts.assignment_worker_external_id == worker_id
            and facts.assignment_worker_user_id == request.user.pk
        )
        if not own:
            blocked, status = "This assignment is not yours: take your next HIT from the annotation page.", 403
    elif not preview and facts.external_hit_id and request.GET.get("hitId") not in (None, "", facts.external_hit_id):
        blocked, status = "This page was opened for another HIT.", 400
    if not preview and not worker_id:
        blocked, status = blocked or "The page address lacks the worker id.", 400
    elif not preview and not ids_valid:
        blocked, status = blocked or "The worker or assignment id in the page address is not a valid id.", 400
    if not preview and blocked is None:
        blocked = _blocked_reason(facts)
        if facts.worker_disqualified:
            status = 403
    retry_after = None
    example = preview
    if not preview and blocked is None and public:
        access = crowd_access(
            facts=facts,
            assignment_id=assignment_id,
            worker_id=worker_id,
            address=client_ip(request),
            now=timezone.now(),
        )
        if not access.allowed:
            blocked, status, example, retry_after = access.reason, access.status, access.example, access.retry_after
    can_submit = not preview and blocked is None
    # the sentences: to the assignment ``page_access`` admits on a published crowd HIT, or to the local owner;
    # a preview (anyone, before accepting) or an assignment past the caps shows a made-up example instead, so
    # that no bot learns a HIT's items first; any other blocked view (a wrong hitId, no or a malformed worker
    # id, a disqualified worker, an assignment bound to another worker) shows none
    content = example_content() if example else hit_content(facts) if can_submit and (public or own) else None
    context = {
        "content": content.html if content else "",
        "sentences": content.sentences if content else 0,
        "guide": worker_guide(facts, assignment_id=assignment_id, worker_id=worker_id) if can_submit else None,
        "saved": request.GET.get("saved") == "1" and can_submit,
        "way_on": _way_on(facts, blocked=blocked, preview=preview),
        "preview": preview,
        "blocked": blocked,
        "can_submit": can_submit,
        "assignment_id": assignment_id if can_submit else "",
        "worker_id": worker_id if can_submit else "",
        "token": submission_token_make(hit_id=facts.hit_id, assignment_id=assignment_id, worker_id=worker_id)
        if can_submit
        else "",
        "api_url": reverse("hit-assignments", args=[facts.hit_id]),
        "external_submit": external_submit_url(request.GET.get("turkSubmitTo", "")) if can_submit else None,
        "next_url": reverse("annotate-next") if local else "",
        "continue_url": _prolific_continue_url(request, facts, worker_id, assignment_id) if can_submit else "",
        "return_url": reverse("annotate-return") if local and own and can_submit else "",
    }
    response = render(request, "annotation/hit.html", context, status=status)
    response["Content-Security-Policy"] = FRAME_ANCESTORS
    response["Cache-Control"] = "no-store"
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def _way_on(facts: HitPageFacts, *, blocked: str | None, preview: bool) -> dict | None:
    """Where a worker who cannot submit this page can go instead (a link and its words), by platform."""
    if not blocked or preview:
        return None
    if facts.provider == Provider.LOCAL:
        return {"url": reverse("annotate-next"), "text": "Go to your next HIT"}
    if facts.provider == Provider.PROLIFIC:
        return {"url": "https://app.prolific.com/submissions", "text": "Back to your submissions on Prolific"}
    return {"url": "https://worker.mturk.com/tasks", "text": "Back to your HITs on Mechanical Turk"}


def _to_assignment(assignment, *, saved: bool = False) -> HttpResponse:
    query = {
        "assignmentId": assignment.external_assignment_id,
        "hitId": assignment.hit_id,
        "workerId": assignment.worker.external_id,
    }
    if saved:  # the page says the previous HIT was saved
        query["saved"] = "1"
    return redirect(f"{reverse('hit-page', args=[assignment.hit_id])}?{urlencode(query)}")


@login_required(login_url="annotate-login")
@require_http_methods(["GET", "POST"])
def annotate_next(request: HttpRequest) -> HttpResponse:
    """Local annotators. GET: back to the open assignment, else a page to take the next HIT. POST: take
    it (taking changes state, so it is never a GET that a prefetch or a double click repeats)."""
    worker = local_worker(request.user)
    if worker.disqualified:
        return render(request, "annotation/barred.html", {"reason": WORKER_BARRED_MESSAGE}, status=403)
    if request.method == "GET":
        open_one = local_open_assignment(worker)
        if open_one:
            return _to_assignment(open_one)
        return render(request, "annotation/take.html", {"returned": request.GET.get("returned") == "1"})
    saved = request.POST.get("saved") == "1"
    try:
        assignment = local_hit_take(user=request.user)
    except WorkerBarred as exc:
        return render(request, "annotation/barred.html", {"reason": str(exc)}, status=403)
    if assignment is None:
        return render(request, "annotation/none_left.html", {"saved": saved})
    return _to_assignment(assignment, saved=saved)


@login_required(login_url="annotate-login")
@require_POST
def annotate_return(request: HttpRequest) -> HttpResponse:
    """Local annotators give back their open HIT (its slot goes back to the pool; it is not offered to
    them again), then see the page to take the next one."""
    returned = local_assignment_return(user=request.user, assignment_id=request.POST.get("assignment", ""))
    return redirect(f"{reverse('annotate-next')}?returned=1" if returned else reverse("annotate-next"))


def _prolific_continue_url(request: HttpRequest, facts: HitPageFacts, worker_id: str, assignment_id: str) -> str:
    """Where a Prolific participant's page goes after each save: back to the study's start URL, which answers
    with their next HIT or Prolific's completion URL."""
    if facts.provider != Provider.PROLIFIC:
        return ""
    batch_id = Hit.objects.filter(pk=facts.hit_id).values_list("batch_id", flat=True).first()
    query = urlencode(
        {
            "PROLIFIC_PID": worker_id,
            "STUDY_ID": request.GET.get("studyId", ""),
            "SESSION_ID": session_id(assignment_id),
            "saved": "1",  # only the page's own navigation after a save: the next page says it was saved
        }
    )
    return f"{reverse('prolific-start', args=[batch_id])}?{query}"


@require_GET
def prolific_start(request: HttpRequest, batch_id: int) -> HttpResponse:
    """GET /prolific/<batch id>/start/?PROLIFIC_PID=&STUDY_ID=&SESSION_ID= (the study's external URL): a
    redirect to the participant's open or next HIT, or back to Prolific with a completion code
    (``providers.prolific.sessions``)."""
    wait = over_limit(f"prolific-start:{client_ip(request)}", settings.ANNOTATION_PROLIFIC_START_RATE)
    if wait is not None:
        response = render(
            request,
            "annotation/prolific_problem.html",
            {"message": "Too many requests from this address: wait a moment and reload."},
            status=429,
        )
        response["Retry-After"] = str(wait)
        return response
    study = request.GET.get("STUDY_ID", "").strip()
    try:
        step = session_next(
            batch_id=batch_id,
            participant=request.GET.get("PROLIFIC_PID", "").strip(),
            study=study,
            session_id=request.GET.get("SESSION_ID", "").strip(),
            address=client_ip(request),
        )
    except SessionError as exc:
        response = render(request, "annotation/prolific_problem.html", {"message": exc.message}, status=exc.status)
        if exc.status == 503:
            response["Retry-After"] = "60"
        return response
    if step.kind == "full":
        response = render(request, "annotation/prolific_full.html", {"reload_url": request.get_full_path()})
    elif step.kind == "hit":
        assignment = step.assignment
        query = {
            "assignmentId": assignment.external_assignment_id,
            "hitId": assignment.hit_id,
            "workerId": assignment.worker.external_id,
            "studyId": study,
        }
        if request.GET.get("saved") == "1":
            query["saved"] = "1"
        response = redirect(f"{reverse('hit-page', args=[assignment.hit_id])}?{urlencode(query)}")
    else:
        response = redirect(completion_url(step.code))
    response["Cache-Control"] = "no-store"
    return response
