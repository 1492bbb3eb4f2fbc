"""Constraints: what constraint selection reads and what runs it (ParaBank §3.2, Tab. 3).

``systems`` (the 37 systems as data, and how a system is named and ordered), ``sets`` (the public API of
constraint selection over :mod:`generation.selection`: the pool and each system's constraint set), ``idf`` (IDF
tables) and its job ``idf_job`` (``build_idf``), ``ppdb`` (the PPDB 2.0 index, systems 35-37) over ``bloom`` (its
Bloom filter), and the ``select_constraints`` job (``constraint_job``).
"""
