"""Campaigns: a finished generation job's evaluation sample as one (``sample``, a finish hook registered in
``annotation.apps``), judgments collected elsewhere imported as one (``importers``), and what the admin's campaign
pages show (``pages``)."""
