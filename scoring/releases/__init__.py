"""Releases: a scored resource's pairs and judgments as versioned, reproducible files with a card and a manifest.

``export`` (the service: all or nothing, recorded as a ``Release``) over ``checks`` (version, format, licence, the
scoring), ``rows`` (the screened, filtered pairs and the judgments), ``writers`` and ``parquet`` (the formats),
``columns`` (the files' shapes), ``manifest`` and ``card``; ``filters`` and ``entailment`` (the release filters),
``params`` and ``job`` (the ``export_release`` job kind and its settings), ``access`` (who sees which release)."""
