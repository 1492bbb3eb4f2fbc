"""HIT batches: ``making`` (sample references, pool their candidates, make the HITs: ``hit_batch_create``) from
``params`` (what making one takes, ``BatchParams``; the settings' schema is ``annotation.batch_settings``), the
*Preview* before publishing (``preview``), what each batch cost so far (``costs``), its judgments as a results CSV
(``exports``), and EASL's batches (``easl`` pure, ``easl_rounds`` on the database)."""
