"""Decoding a few sentences on one CPU thread against two (issue 37: why ``paraphrase`` of a few sentences uses
one, ``paraphrase.small_input_threads``). The demo model is loaded once; then the same two sentences are decoded
``--repeat`` times on each thread count, interleaved, after one untimed warm-up decode each; the median seconds
per decode are printed with the one-thread run as the baseline.

    .venv/bin/python bench/decode_threads.py [--repeat 5] [--beam 4] [--sentences 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = [
    "A man is playing a guitar on the stage.",
    "The children were walking to school in the rain.",
    "A woman is slicing an onion in the kitchen.",
    "Two dogs are running through a field of grass.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=2)
    opts = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import django

    django.setup()
    import torch

    from generation.decode_options import DecodeOptions
    from generation.decoding import decode, default_batch_size, load_model

    model = load_model(str(ROOT / "generation/demo/model"))
    options = DecodeOptions(beam=opts.beam, nbest=1).on_device("cpu")
    options = options.replace(batch_size=default_batch_size(model, options).size)
    sources = (SENTENCES * opts.sentences)[: opts.sentences]

    def once(threads: int) -> float:
        torch.set_num_threads(threads)
        start = time.perf_counter()
        decode(model, sources, [None] * len(sources), options=options, references=[None] * len(sources))
        return time.perf_counter() - start

    counts = (1, 2)
    for threads in counts:
        once(threads)  # warm-up: the first decode on a thread count prepares its kernels
    times = {t: [] for t in counts}
    for _ in range(opts.repeat):
        for threads in counts:
            times[threads].append(once(threads))
    print(
        f"# demo model, {len(sources)} sentences, beam {opts.beam}, median of {opts.repeat}; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    base = statistics.median(times[1])
    print(f"{'threads':>8s} {'s per decode':>13s} {'x one thread':>13s}")
    for threads in counts:
        m = statistics.median(times[threads])
        print(f"{threads:8d} {m:13.3f} {m / base:13.2f}")


if __name__ == "__main__":
    main()
