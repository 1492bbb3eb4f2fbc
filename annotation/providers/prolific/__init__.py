"""Prolific (API v1): ``client`` (HTTP with retries), ``fees`` (places and costs, pure), ``study`` (a batch's
study settings, codes and URLs), ``gateway`` (``ProlificProvider``, the ``HitProvider``) and ``sessions``
(a participant's way through their HITs)."""

from .client import ProlificClient, ProlificError, ProlificUnavailable
from .gateway import ProlificProvider
from .study import batch_prolific_config, completion_url, median_seconds_per_hit, session_id, start_url

__all__ = [
    "ProlificClient",
    "ProlificError",
    "ProlificUnavailable",
    "ProlificProvider",
    "batch_prolific_config",
    "completion_url",
    "median_seconds_per_hit",
    "session_id",
    "start_url",
]
