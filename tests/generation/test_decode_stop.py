"""Issue 46: a decode stops between two decoder steps when its ``should_stop`` says so (beam search on a seq2seq
and on a decoder-only model, the diverse sampler), in the middle of a batch; without the hook (or with one
that never says stop) the outputs are those of a decode without it; the job's check asks the database at most
every half second; a generation chunk whose job is cancelled while a batch decodes ends as cancelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from generation.decode_options import DiverseOptions
from generation.decoding import DecodingStopped, decode, from_objects, load_model, rate_limited
from generation.decoding.diverse import diverse_decode
from generation.prompts import PromptTemplate

from .causal_models import tiny_causal, tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DEMO_MODEL = Path(__file__).resolve().parents[2] / "generation" / "demo" / "model"
SOURCES = ["How often do earthquakes occur?", "the cat sat on the mat", "a a b big red house today ."]
CONSTRAINTS = [{"negative": [["often"]]}, {"positive": [["dog"]]}, None]
RAW = PromptTemplate("raw", "{source}", chat=False, stop_at_newline=False)
DIVERSE = dict(negative_sets=2, samples=4, max_length=30, seed=3)


class StopAfter:
    """A ``should_stop`` that says True from its ``k+1``-th call on, counting the calls."""

    def __init__(self, k: int):
        self.k, self.calls = k, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls > self.k


@pytest.fixture(scope="module")
def demo():
    return load_model(str(DEMO_MODEL), device="cpu")


@pytest.fixture(scope="module")
def causal():
    tok = tiny_tokenizer()
    return from_objects(tiny_causal("llama", tok), tok, "cpu", prompt_template=RAW)


def _beam(loaded, **extra):
    return decode(loaded, SOURCES, CONSTRAINTS, beam=3, nbest=2, max_length=20, batch_size=len(SOURCES), **extra)


def _outputs(results):
    return [(r.outputs, r.unsatisfiable) for r in results]


@pytest.mark.parametrize("model", ["tiny_marian", "causal"])
def test_beam_search_stops_mid_batch_and_the_hook_changes_nothing_else(model, request):
    loaded = request.getfixturevalue(model)
    stats: dict = {}
    plain = _beam(loaded, stats=stats)
    assert _outputs(_beam(loaded, should_stop=None)) == _outputs(plain)
    never = StopAfter(10**9)
    assert _outputs(_beam(loaded, should_stop=never)) == _outputs(plain)
    assert never.calls == stats["steps"]  # asked once per decoder step
    stop = StopAfter(3)
    with pytest.raises(DecodingStopped):
        _beam(loaded, should_stop=stop)
    assert stop.calls == 4 < stats["steps"]  # three steps ran, the batch was left in the middle


def test_diverse_sampler_stops_mid_batch_and_the_hook_changes_no_draw(demo):
    options = DiverseOptions(**DIVERSE)
    stats: dict = {}
    plain = diverse_decode(demo, SOURCES[:2], options=options, stats=stats, batch_size=2)
    assert all(r.outputs for r in plain)
    same = diverse_decode(demo, SOURCES[:2], options=options, should_stop=None, batch_size=2)
    never = StopAfter(10**9)
    checked = diverse_decode(demo, SOURCES[:2], options=options, should_stop=never, batch_size=2)
    assert [r.to_json() for r in same] == [r.to_json() for r in checked] == [r.to_json() for r in plain]
    assert never.calls == stats["steps"]
    stop = StopAfter(5)
    with pytest.raises(DecodingStopped):
        diverse_decode(demo, SOURCES[:2], options=options, should_stop=stop, batch_size=2)
    assert stop.calls == 6 < stats["steps"]


def test_rate_limited_asks_at_most_every_interval_and_stays_stopped():
    now, asked, answer = [0.0], [], [False]

    def check() -> bool:
        asked.append(now[0])
        return answer[0]

    should_stop = rate_limited(check, 0.5, clock=lambda: now[0])
    for t in (0.0, 0.1, 0.4, 0.5, 0.7, 1.2):
        now[0] = t
        assert should_stop() is False
    assert asked == [0.0, 0.5, 1.2]
    answer[0], now[0] = True, 1.3
    assert should_stop() is False  # (not asked yet)
    now[0] = 1.8
    assert should_stop() is True
    answer[0], now[0] = False, 5.0
    assert should_stop() is True and asked == [0.0, 0.5, 1.2, 1.8]
