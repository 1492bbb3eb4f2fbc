"""Who sees which release, and reading a release's files where it was recorded (a folder or an upload).

Why one place: the admin's release pages, the release API and its downloads ask the same question
(``sees_every_release``, ``releases_visible_to``), so a permission cannot open one door and not the other.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from api.permissions import staff_has_perms
from infra.storage import LocalStorage, S3Storage, storage_from_url
from scoring.models import Release
from scoring.releases.manifest import release_files

# who sees every release, in the admin's release pages and in the release API and its downloads alike
RELEASE_VIEW_PERMS = ("scoring.view_release",)


def release_storage(release: Release) -> LocalStorage | S3Storage:
    return storage_from_url(release.location)


def release_open(release: Release, name: str) -> BinaryIO:
    """A readable stream of one of the release's files; LookupError for a name it does not have."""
    if name not in release_files(release.manifest):
        raise LookupError(f"release {release} has no file {name!r}")
    return release_storage(release).open_read(name)


def sees_every_release(user) -> bool:
    """Active staff holding ``RELEASE_VIEW_PERMS``: the admin's release pages and the release API ask this."""
    return staff_has_perms(user, RELEASE_VIEW_PERMS)


def releases_visible_to(user) -> Any:
    """Every release for ``sees_every_release``; other signed-in users (staff without the permission
    too) those they were given; anonymous none."""
    if not getattr(user, "is_authenticated", False):
        return Release.objects.none()
    qs = Release.objects.select_related("resource")
    return qs if sees_every_release(user) else qs.filter(allowed_users=user)
