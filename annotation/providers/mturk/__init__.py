"""Mechanical Turk through boto3, in four parts: ``fees`` (MTurk's commission, pure), ``client`` (the boto3
client and which errors are transient), ``hit_config`` (a batch's HIT settings, qualifications and
ExternalQuestion, before any call) and ``gateway`` (``MTurkProvider``: the block qualification, the HIT type,
ExternalQuestion HITs, sync with verification, payments, expiry). Callers use the ``HitProvider`` interface
(``annotation.providers``); the names below are for tests and the ``crowd`` command."""

from .client import (
    PRODUCTION_ENDPOINT,
    REGION,
    SANDBOX_ENDPOINT,
    error_code,
    error_message,
    is_transient,
    mturk_client,
    mturk_credentials_from_env,
    mturk_endpoint,
)
from .fees import (
    FEE_RATE,
    FEE_RATE_LARGE_HIT,
    LARGE_HIT_ASSIGNMENTS,
    InsufficientBalance,
    MTurkConfigurationError,
    MTurkError,
    assignment_fee_usd,
    batch_cost_usd,
    bonus_fee_usd,
    fee_rate,
    hit_cost_usd,
)
from .gateway import MTurkProvider, bonus_grant, bonus_token
from .hit_config import (
    BATCH_SETTING_KEYS,
    QUAL_APPROVAL_RATE,
    QUAL_APPROVED_HITS,
    QUAL_LOCALE,
    batch_mturk_config,
    external_question_xml,
    hit_page_url,
    qualification_requirements,
)

__all__ = [
    "PRODUCTION_ENDPOINT",
    "REGION",
    "SANDBOX_ENDPOINT",
    "error_code",
    "error_message",
    "is_transient",
    "mturk_client",
    "mturk_credentials_from_env",
    "mturk_endpoint",
    "FEE_RATE",
    "FEE_RATE_LARGE_HIT",
    "LARGE_HIT_ASSIGNMENTS",
    "InsufficientBalance",
    "MTurkConfigurationError",
    "MTurkError",
    "assignment_fee_usd",
    "batch_cost_usd",
    "bonus_fee_usd",
    "fee_rate",
    "hit_cost_usd",
    "BATCH_SETTING_KEYS",
    "QUAL_APPROVAL_RATE",
    "QUAL_APPROVED_HITS",
    "QUAL_LOCALE",
    "MTurkProvider",
    "batch_mturk_config",
    "bonus_grant",
    "bonus_token",
    "external_question_xml",
    "hit_page_url",
    "qualification_requirements",
]
