"""Moved to :mod:`infra.textfiles`; this re-export keeps ``generation/rewriter.py`` and
``scoring/regressor.py`` working until their import lines change (then delete this file)."""
from infra.textfiles import undecodable_byte  # noqa: F401
