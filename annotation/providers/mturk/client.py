"""The boto3 ``mturk`` client (keys from the environment only) and which of its errors are worth retrying.

botocore's own retry modes (``standard``, ``adaptive``) are not used: MTurk reports throttling as a
``RequestError`` whose message says the rate was exceeded, which they do not retry, and botocore's
``Stubber`` answers before its retry loop, so their retries could not be tested. ``call_with_retry``
(``annotation.providers.retry``) with ``is_transient`` below does both.
"""

from __future__ import annotations

import os

from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError
from django.conf import settings

from .fees import MTurkConfigurationError

REGION = "us-east-1"
SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"

TRANSIENT_ERROR_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ServiceUnavailable",
        "ServiceFault",
        "InternalError",
        "InternalFailure",
    }
)
_RATE_WORDS = ("rate exceeded", "throttl", "too many requests", "try again", "temporarily unavailable")


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", "") or error.response.get("Message", ""))


def is_transient(error: BaseException) -> bool:
    """Whether repeating the very same request may succeed."""
    if isinstance(error, (BotoConnectionError, HTTPClientError, ConnectionError, TimeoutError)):
        return True
    if isinstance(error, ClientError):
        code = error_code(error)
        if code in TRANSIENT_ERROR_CODES:
            return True
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (500, 502, 503, 504):
            return True
        if code == "RequestError":
            message = error_message(error).lower()
            return any(word in message for word in _RATE_WORDS)
    return False


def mturk_credentials_from_env() -> dict[str, str] | None:
    """Keys for boto3 from the environment only (never ~/.aws, never instance metadata)."""
    for prefix in ("MTURK", "AWS"):
        key, secret = os.environ.get(f"{prefix}_ACCESS_KEY_ID"), os.environ.get(f"{prefix}_SECRET_ACCESS_KEY")
        if key and secret:
            creds = {"aws_access_key_id": key, "aws_secret_access_key": secret}
            token = os.environ.get(f"{prefix}_SESSION_TOKEN")
            if token:
                creds["aws_session_token"] = token
            return creds
    return None


def mturk_endpoint(*, sandbox: bool) -> str:
    return settings.MTURK_ENDPOINT_URL or (SANDBOX_ENDPOINT if sandbox else PRODUCTION_ENDPOINT)


def mturk_client(*, sandbox: bool):
    """A boto3 ``mturk`` client; its own retries are off because ``call_with_retry`` does them (module docstring)."""
    import boto3
    from botocore.config import Config

    creds = mturk_credentials_from_env()
    if creds is None:
        raise MTurkConfigurationError(
            "no MTurk credentials: set MTURK_ACCESS_KEY_ID and MTURK_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY) in the environment"
        )
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=60)
    session = boto3.session.Session(region_name=REGION, **creds)
    return session.client("mturk", region_name=REGION, endpoint_url=mturk_endpoint(sandbox=sandbox), config=config)
