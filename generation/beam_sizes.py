"""Beam and n-best sizes: one rule, in a module that imports nothing, so that settings checks (a web form,
a job's settings) need not load the decoder (torch)."""
from __future__ import annotations


def beam_nbest_error(beam: int, nbest: int) -> str | None:
    """The one rule of beam and n-best sizes (the decoder, generation jobs and ``paraphrase`` share it): at
    least one hypothesis, and no more returned than the beam keeps. What is wrong, or None."""
    if beam < 1 or nbest < 1:
        return f"beam ({beam}) and nbest ({nbest}) must be at least 1"
    if nbest > beam:
        return f"nbest ({nbest}) cannot exceed beam ({beam})"
    return None
