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


# When a sentence's search ends (``decode(..., stop=)``), by which of its K finished slots Hugging Face's
# stopping heuristic is read: "beam" all K (Hugging Face's rule, exactly), "nbest" the n-best the caller
# gets, "auto" (the default) "nbest" for sentences with positive constraints and "beam" for the others.
STOP_RULES = ("auto", "beam", "nbest")
STOP_DEFAULT = "auto"
STOP_HELP = (
    "when a sentence's search ends: beam = Hugging Face's rule over all --beam finished hypotheses; "
    "nbest = the same over the --nbest returned; auto (default) = nbest for inputs with required words, "
    "beam for the others"
)  # (the --stop option of paraphrase and generate)


def stop_rule_error(stop: object) -> str | None:
    """What is wrong with a stopping rule's name, or None."""
    if stop not in STOP_RULES:
        return f"stop must be one of {', '.join(STOP_RULES)}, not {stop!r}"
    return None
