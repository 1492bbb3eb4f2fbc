"""Moved to :mod:`infra.storage`; this re-export keeps ``scoring/regressor.py`` working until its import
line changes (then delete this file)."""
from infra.storage import LocalStorage, S3Storage, Storage, get_storage, storage_from_url  # noqa: F401
