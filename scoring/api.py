"""Release API: list the releases a user may see, show a manifest, stream a file (signed-in users only;
staff see every release, others those they are allowed; an invisible release is a 404)."""
from django.http import FileResponse, Http404
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from .models import Release
from .releases import release_open, releases_visible_to
from .serializers import ReleaseSerializer


def _visible(request: Request, release_id: int) -> Release:
    release = releases_visible_to(request.user).filter(pk=release_id).first()
    if release is None:
        raise Http404("no such release")
    return release


@api_view(["GET"])
@permission_classes([IsAuthenticated])
def release_list(request: Request) -> Response:
    releases = releases_visible_to(request.user).order_by("-created_at", "-pk")
    return Response(ReleaseSerializer(releases, many=True, context={"request": request}).data)


@api_view(["GET"])
@permission_classes([IsAuthenticated])
def release_detail(request: Request, release_id: int) -> Response:
    release = _visible(request, release_id)
    data = ReleaseSerializer(release, context={"request": request}).data
    return Response({**data, "manifest": release.manifest})


@api_view(["GET"])
@permission_classes([IsAuthenticated])
def release_file(request: Request, release_id: int, name: str) -> FileResponse:
    release = _visible(request, release_id)
    try:
        stream = release_open(release, name)
    except (LookupError, FileNotFoundError):
        raise Http404(f"release {release.pk} has no file {name!r}") from None
    return FileResponse(stream, as_attachment=True, filename=name)
