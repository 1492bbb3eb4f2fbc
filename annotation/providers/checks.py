"""System checks for the HIT providers: catch a crowd set-up (MTurk, Prolific) that would fail at launch."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Warning


def mturk_configuration_check(app_configs=None, **kwargs):
    """Warn when a crowd platform is the selected provider but it has no credentials or https public URL."""
    from annotation.providers.mturk import mturk_credentials_from_env

    provider = getattr(settings, "PARAFORGE_HIT_PROVIDER", "local")
    if provider not in {"local", "mturk", "mturk-sandbox", "prolific"}:
        return [
            Error(
                f"PARAFORGE_HIT_PROVIDER is {provider!r}",
                hint="choose local, mturk-sandbox, mturk or prolific",
                id="annotation.E001",
            )
        ]
    if provider == "local":
        return []
    messages = []
    if provider == "mturk" and mturk_credentials_from_env() is None:
        messages.append(
            Warning(
                "PARAFORGE_HIT_PROVIDER is mturk (production) but no MTurk credentials are in the environment",
                hint="set MTURK_ACCESS_KEY_ID and MTURK_SECRET_ACCESS_KEY "
                "(or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)",
                id="annotation.W001",
            )
        )
    if provider == "prolific" and not getattr(settings, "PROLIFIC_API_TOKEN", ""):
        messages.append(
            Warning(
                "PARAFORGE_HIT_PROVIDER is prolific but PROLIFIC_API_TOKEN is not set",
                hint="create an API token in Prolific (Workspace settings > API tokens) and set PROLIFIC_API_TOKEN",
                id="annotation.W003",
            )
        )
    if not str(getattr(settings, "PARAFORGE_PUBLIC_URL", "")).startswith("https://"):
        messages.append(
            Warning(
                f"PARAFORGE_HIT_PROVIDER is {provider} but PARAFORGE_PUBLIC_URL is not an https:// address",
                hint="the platform sends workers to the slider pages at PARAFORGE_PUBLIC_URL; publishing refuses until "
                "it is set",
                id="annotation.W002",
            )
        )
    return messages
