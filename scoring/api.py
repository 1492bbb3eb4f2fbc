"""Release API: list the releases a user may see, show a manifest, stream a file (signed-in users only;
staff holding the admin's release permission (``releases.RELEASE_VIEW_PERMS``, the rule of the admin's release
pages) see every release, everyone else those they are allowed; an invisible release is a 404)."""

from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from api.listing import ListQuery, listed, page_serializer
from api.openapi import api_errors
from scoring.models import Release
from scoring.releases.access import release_open, releases_visible_to
from scoring.serializers import ReleaseDetailSerializer, ReleaseSerializer

ReleasePageSerializer = page_serializer(ReleaseSerializer, "ReleasePageSerializer")


def _visible(request: Request, release_id: int) -> Release:
    release = releases_visible_to(request.user).filter(pk=release_id).first()
    if release is None:
        raise Http404("no such release")
    return release


@extend_schema(
    operation_id="release_list",
    tags=["releases"],
    summary="The releases the caller may see, newest first (a page of them).",
    parameters=[ListQuery],
    responses={200: ReleasePageSerializer, **api_errors(400)},
)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def release_list(request: Request) -> Response:
    return listed(request, releases_visible_to(request.user).order_by("-created_at", "-pk"), ReleaseSerializer)


@extend_schema(
    operation_id="release_detail",
    tags=["releases"],
    summary="A release and its manifest.",
    responses={200: ReleaseDetailSerializer, **api_errors(404)},
)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def release_detail(request: Request, release_id: int) -> Response:
    release = _visible(request, release_id)
    return Response(ReleaseDetailSerializer(release, context={"request": request}).data)


@extend_schema(
    operation_id="release_file",
    tags=["releases"],
    summary="One file of a release, streamed.",
    responses={
        (200, "application/gzip"): OpenApiResponse(OpenApiTypes.BINARY, description="pairs.*.gz, judgments.tsv.gz"),
        (200, "application/octet-stream"): OpenApiResponse(
            OpenApiTypes.BINARY, description="pairs.parquet, judgments.parquet (format parquet)"
        ),
        (200, "text/markdown"): OpenApiResponse(
            OpenApiTypes.STR, description="README.md, the release's card (every format)"
        ),
        (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT, description="manifest.json"),
        **api_errors(404),
    },
)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def release_file(request: Request, release_id: int, name: str) -> FileResponse:
    release = _visible(request, release_id)
    try:
        stream = release_open(release, name)
    except (LookupError, FileNotFoundError):
        raise Http404(f"release {release.pk} has no file {name!r}") from None
    return FileResponse(stream, as_attachment=True, filename=name)
