"""Corpora: importing a bitext or monolingual file into validated shards (``corpora``) and its job ``import_job``
(``import_corpus``)."""
