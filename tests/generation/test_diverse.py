"""ParaBank 2's diverse mode (issue 39): seeded sampling under random negative sets, scoring, clustering.

On the shipped demo model (generation/demo/model), with few samples per input so that the CPU runs stay short.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from generation.decode_options import DecodeOptionsError, DiverseOptions
from generation.decoding.clustering import PINNED, comparable_words, distance_matrix, k_medoids, pick_per_cluster
from generation.words import words_of

DEMO_MODEL = Path(__file__).resolve().parents[2] / "generation" / "demo" / "model"
SENTENCES = [
    "The committee approved the new budget on Monday.",
    "A man is playing a guitar.",
    "Two dogs are running through the snow.",
]
SMALL = dict(negative_sets=3, samples=6, max_length=40, seed=7)


@pytest.fixture(scope="module")
def demo():
    from generation.decoding import load_model

    return load_model(str(DEMO_MODEL), device="cpu")


def _decode(model, sources, **changes):
    from generation.decoding.diverse import diverse_decode

    return diverse_decode(model, sources, options=DiverseOptions(**{**SMALL, **changes}))


def test_same_seed_gives_the_same_outputs_whatever_the_batch(demo):
    one = _decode(demo, SENTENCES, batch_size=1)
    again = _decode(demo, SENTENCES, batch_size=3)  # other inputs in the batch: the same draws per input
    other = _decode(demo, SENTENCES, batch_size=1, seed=8)
    assert [r.outputs for r in one] == [r.outputs for r in again]
    assert all(r.outputs for r in one)
    assert [r.outputs for r in one] != [r.outputs for r in other]


def test_on_the_cpu_an_unset_batch_size_samples_as_many_inputs_as_fill_its_rows(demo, monkeypatch):
    """No ``batch_size``: 8 inputs a batch on a GPU; on the CPU as many as fill ``CPU_DIVERSE_ROWS`` rows (a step
    at a few rows costs about what it costs at many: the weights are read either way), at least one; each input's
    outputs the same as decoded alone."""
    import generation.decoding.diverse as diverse
    from generation.decode_options import CPU_DIVERSE_ROWS

    assert CPU_DIVERSE_ROWS == 256
    assert DiverseOptions(negative_sets=3, samples=8).inputs_per_batch("cpu") == 10  # the quick start's
    assert DiverseOptions().inputs_per_batch("cpu") == 1  # ParaBank 2's 5 x 30
    assert DiverseOptions(negative_sets=20, samples=20).inputs_per_batch("cpu") == 1
    assert DiverseOptions(negative_sets=3, samples=8).inputs_per_batch("cuda") == 8
    assert DiverseOptions(negative_sets=3, samples=8, batch_size=2).inputs_per_batch("cpu") == 2
    batches = []
    real = diverse.sample_batch

    def spy(loaded, sources, *args, **kwargs):
        batches.append(len(sources))
        return real(loaded, sources, *args, **kwargs)

    monkeypatch.setattr(diverse, "sample_batch", spy)
    many = _decode(demo, SENTENCES * 6)  # SMALL's 3 x 6 rows: 14 inputs a batch
    assert batches == [14, 4]
    assert [r.outputs for r in many[:3]] == [r.outputs for r in _decode(demo, SENTENCES, batch_size=1)]


def test_hugging_face_step_samples_what_the_fast_step_samples(demo, monkeypatch):
    # a GPU runs Hugging Face's decoder step (its cache shrunk as inputs finish); the CPU the fast one
    fast = _decode(demo, SENTENCES[:2], batch_size=2)
    monkeypatch.setenv("PARAFORGE_FAST_STEP", "0")
    hf = _decode(demo, SENTENCES[:2], batch_size=2)
    assert [r.outputs for r in hf] == [r.outputs for r in fast]
    assert all(r.outputs for r in hf)


def test_ban_mode_keeps_no_banned_word_of_its_set(demo):
    sources = SENTENCES + ["The white and brown dog runs across the grass."]
    results = _decode(demo, sources, ban_fraction=0.5, samples=8)
    kept = [o for r in results for o in r.outputs]
    assert kept
    for o in kept:
        assert o["banned"], o
        assert not set(words_of(o["text"])) & set(o["banned"]), o
    # the same draws with a negligible penalty instead of the ban: the model does write those words
    # (so the check above would catch a ban that does not hold)
    discouraged = _decode(demo, sources, ban_fraction=0.5, samples=8, discourage=1e-6)
    assert any(set(words_of(o["text"])) & set(o["banned"]) for r in discouraged for o in r.outputs)


def test_copies_of_the_reference_fall_in_the_pinned_cluster_and_yield_nothing(demo):
    # a negligible penalty: the demo model mostly copies its input, so copies are among the candidates and
    # score best; the pinned cluster holds them and gives no output
    results = _decode(demo, SENTENCES, discourage=1e-6, samples=8)
    for r in results:
        assert r.outputs
        ref = comparable_words(r.reference)
        for o in r.outputs:
            assert o["cluster"] != PINNED
            assert comparable_words(o["text"]) != ref, o


def test_the_pinned_medoid_never_moves_and_its_members_never_yield():
    # the reference (point 0) sits at the edge of its group: a free medoid would move to the group's centre
    texts = ["a b c d e f", "a b c d", "a b c d x", "a b c d y", "p q r s t u", "p q r s t v"]
    dist = distance_matrix(texts)
    assert int(np.argmin(dist[:4, :4].sum(1))) == 1  # where an unpinned medoid would go
    clustering = k_medoids(dist, 2)
    assert clustering.medoids[PINNED] == 0
    assert list(clustering.labels) == [PINNED, PINNED, PINNED, PINNED, 1, 1]
    scores = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]  # the reference's neighbours score best
    assert pick_per_cluster(clustering, scores) == [(4, 1)]


def test_a_reference_shorter_than_the_clusters_still_gets_outputs(demo):
    [r] = _decode(demo, ["Hi."], clusters=8, samples=10)
    assert 1 <= len(r.outputs) <= 5
    assert r.counts["clusters"] <= min(8, r.counts["under_max_nll"] + 1)
    assert [o["rank"] for o in r.outputs] == list(range(1, len(r.outputs) + 1))
    assert len({comparable_words(o["text"]).__repr__() for o in r.outputs}) == len(r.outputs)


def test_options_are_checked():
    with pytest.raises(DecodeOptionsError, match="clusters"):
        DiverseOptions(clusters=1)
    with pytest.raises(DecodeOptionsError, match="ban_fraction"):
        DiverseOptions(ban_fraction=1.5)
    with pytest.raises(DecodeOptionsError, match="ban_spread"):
        DiverseOptions(ban_spread=-0.1)
    with pytest.raises(DecodeOptionsError) as exc:
        DiverseOptions(samples=0)
    assert "--samples" in exc.value.option_message


def _cli(tmp_path, lines, *extra):
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["--model", str(DEMO_MODEL), "--input", str(inp), "--output", str(out), "--device", "cpu", *extra]
    call_command("paraphrase", *args, stderr=io.StringIO())
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_cli_output_shape(tmp_path):
    lines = [SENTENCES[0], "A man is playing a guitar.\tA man plays a guitar."]
    rows = _cli(tmp_path, lines, "--diverse", "--negative-sets", "2", "--samples", "6", "--max-length", "40")
    assert [r["source"] for r in rows] == [SENTENCES[0], "A man is playing a guitar."]
    for r in rows:
        outs = r["outputs"]
        assert 1 <= len(outs) <= 5
        for o in outs:
            assert set(o) == {"text", "score", "rank", "cluster", "banned"}
            assert isinstance(o["text"], str) and o["text"]
            assert 0 < o["score"] <= 3.5
            assert o["cluster"] != PINNED
            assert all(isinstance(w, str) for w in o["banned"]) and o["banned"]
        assert [o["rank"] for o in outs] == list(range(1, len(outs) + 1))
        assert [o["score"] for o in outs] == sorted(o["score"] for o in outs)
        assert len({o["cluster"] for o in outs}) == len(outs)
    # the reference (after the tab) is what the sets are drawn from
    assert all(set(o["banned"]) <= {"man", "Man", "plays", "Plays", "guitar", "Guitar"} for o in rows[1]["outputs"])


def test_cli_keep_and_backward_model(tmp_path):
    rows = _cli(
        tmp_path,
        [SENTENCES[1]],
        *("--diverse", "--negative-sets", "2", "--samples", "6", "--max-length", "40", "--keep", "2"),
        *("--backward-model", str(DEMO_MODEL), "--max-nll", "7"),
    )
    assert 1 <= len(rows[0]["outputs"]) <= 2


def test_backward_model_adds_its_nll_of_the_source_given_the_candidate(demo):
    from generation.decoding.backward import backward_nll
    from generation.decoding.diverse import diverse_decode

    wide = DiverseOptions(**{**SMALL, "clusters": 40, "keep": 40, "max_nll": 100.0})
    [fwd] = diverse_decode(demo, [SENTENCES[1]], options=wide)
    [both] = diverse_decode(demo, [SENTENCES[1]], options=wide, backward=demo)
    forward = {o["text"]: o["score"] for o in fwd.outputs}
    shared = [o for o in both.outputs if o["text"] in forward]
    assert len(shared) >= 3
    back = backward_nll(demo, [o["text"] for o in shared], SENTENCES[1])
    for o, b in zip(shared, back):
        assert b > 0 and o["backward_nll"] == pytest.approx(b, abs=1e-4)  # written, as beam search writes it
        assert o["score"] == pytest.approx(forward[o["text"]] + b, abs=2e-4)
    assert all("backward_nll" not in o for o in fwd.outputs)
    # the copying model finds the source likelier given itself than given an unrelated sentence
    near, far = backward_nll(demo, [SENTENCES[1], "Stock prices fell sharply in Tokyo."], SENTENCES[1])
    assert near < far


def test_cli_refuses_diverse_options_without_diverse_and_constraints_with_it(tmp_path):
    with pytest.raises(CommandError, match="--samples needs --diverse"):
        _cli(tmp_path, ["a b"], "--samples", "3")
    with pytest.raises(CommandError, match="leave out --rerank-dissimilar"):
        _cli(tmp_path, ["a b"], "--diverse", "--rerank-dissimilar")


def test_a_decoder_only_backward_model_scores_the_source_after_the_candidates_prompt(tmp_path):
    """Issue 47: a decoder-only --backward-model (here a tiny random chat model beside the demo model) reads the
    source as the continuation of each candidate's prompt; its NLL per token is added to the score."""
    from generation.decoding import load_model
    from generation.decoding.backward import backward_nll
    from tests.generation.causal_models import save_chat_model

    chat = save_chat_model(tmp_path / "chat")
    extra = ("--negative-sets", "2", "--samples", "6", "--max-length", "40", "--max-nll", "100")
    rows = _cli(tmp_path, [SENTENCES[1]], "--diverse", *extra)
    both = _cli(tmp_path, [SENTENCES[1]], "--diverse", *extra, "--backward-model", str(chat))
    forward = {o["text"]: o["score"] for o in rows[0]["outputs"]}
    shared = [o for o in both[0]["outputs"] if o["text"] in forward]
    assert shared
    back = backward_nll(load_model(chat, device="cpu"), [o["text"] for o in shared], SENTENCES[1])
    for o, b in zip(shared, back):
        assert b > 1.0  # (a random model: about log(vocabulary) per token)
        assert o["score"] == pytest.approx(forward[o["text"]] + b, abs=2e-4)
