"""Constraint selection (ParaBank §3.2, Tab. 3), in three modules:

- :mod:`.reference`: the specification, written to read like the paper -- the pool, then one small
  selector per kind of row of Tab. 3. Slow and obvious; it is what the snapshot is derived from.
- :mod:`.fast`: the implementation jobs run, tuned for throughput (bench/constraints.py); held equal to
  the reference by tests/generation/test_constraints_property.py and the snapshot.
- :mod:`.values`: what both share (input and output values, reasons, seeded draws).

:mod:`generation.constraints.sets` is the public facade over them.
"""
