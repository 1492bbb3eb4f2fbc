"""CUDA graphs for the beam search's bookkeeping (``dba.beam_search``, ``DecodeOptions.cuda_graph``).

On a GPU each step's bookkeeping after the model (bans, candidates, banks, finished slots) is a hundred-odd
tiny kernels whose launches cost more than their work; ``beam_search`` captures them once per batch with
:func:`capture` and replays them. Apart from the search because capturing is CUDA plumbing (a side stream,
the error mode, the fallback to eager steps) that the search's logic does not depend on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

logger = logging.getLogger(__name__)

GRAPH_FAILURES: list[str] = []  # why a capture failed in this process (then steps run eagerly)
_SIDE_STREAMS: dict = {}  # per device, the stream graphs are captured on


def supported(dev: torch.device) -> bool:
    """Whether steps on ``dev`` can be captured (CUDA only)."""
    return dev.type == "cuda"


def capture(fn: Callable[[], object]) -> torch.cuda.CUDAGraph | None:
    """``fn``'s kernels as a CUDA graph (captured, not run: replay it), or None when capturing fails. On a
    side stream, without ``torch.cuda.graph``'s garbage collection and cache emptying (per batch, those
    would cost more than the graph saves)."""
    graph = torch.cuda.CUDAGraph()
    main = torch.cuda.current_stream()
    side = _SIDE_STREAMS.get(main.device)
    if side is None:
        side = _SIDE_STREAMS[main.device] = torch.cuda.Stream(device=main.device)
    side.wait_stream(main)
    try:
        with torch.cuda.stream(side):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                fn()
            except Exception:
                try:
                    graph.capture_end()
                except Exception:  # noqa: BLE001 - the capture is void anyway: report what broke it
                    pass
                raise
            graph.capture_end()
    except Exception as exc:  # noqa: BLE001 - any capture failure means: run this process's steps eagerly
        GRAPH_FAILURES.append(f"{type(exc).__name__}: {exc}")
        logger.warning("CUDA graph capture failed, decoding steps run eagerly: %s", exc)
        return None
    finally:
        main.wait_stream(side)
    return graph
