"""Job kind ``generate`` (``gpu`` queue): decode a corpus (or its evaluation sample) under ParaBank systems.

A package of five modules, each importing only those before it:

* :mod:`.params`: the job's settings, one frozen :class:`~.params.GenerateParams` (from which the command's
  options, the stored JSON and the worker's reading are built), its checks, and the model folder's rules;
* :mod:`.sample`: the evaluation sample (length buckets, the seeded draw);
* :mod:`.pipeline`: a chunk's work: the model cache, the windows tagged and constrained in a background
  thread while the previous one decodes, their merged outputs;
* :mod:`.diverse_chunk`: a diverse job's chunk (``diverse``: ParaBank 2's mode), its ranks as systems r1 ..;
* :mod:`.kind`: the kind itself (plan, run a chunk, finish) and its registration.

This module stays light (no model, no Django models): annotation and scoring read :data:`KIND` from here
without loading the decoder's modules.
"""

KIND = "generate"
