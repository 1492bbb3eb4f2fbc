"""Diverse mode on decoder-only models (issue 47, item 4): ``--diverse`` with ``--prompt-template``.

Each reference's prompt is run once (one forward over the batch's prompts), its key/value cache copied to the
reference's ``negative_sets x samples`` rows; the rows sample continuations under their set's bans and end
where the template says (EOS, or a line break under ``paraphrase-plain``); reranking, clustering and keeping
are the encoder-decoder's.

On tiny random Llama- and Qwen2-shaped models made to write a few words and to end
(``causal_models.ending_causal``). No download, no network.
"""

from __future__ import annotations

import io
import json

import pytest
import torch
from django.core.management import CommandError, call_command

from generation.decode_options import DiverseOptions
from generation.decoding import from_objects, normalise_constraints, violations
from generation.decoding.clustering import PINNED
from generation.words import words_of

from .causal_models import WORDS, ending_causal, save_ending_llama, tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REFERENCES = ["the cat sat on the mat", "a big dog sat on the mat today"]
SMALL = dict(negative_sets=3, samples=8, clusters=4, keep=3, max_length=40, seed=5)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer(chat=False)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def loaded(request, tok):
    return from_objects(ending_causal(request.param, tok), tok, "cpu", prompt_template="paraphrase-plain")


def _decode(loaded, sources, **changes):
    from generation.decoding.diverse import diverse_decode

    return diverse_decode(loaded, sources, options=DiverseOptions(**{**SMALL, **changes}))


def _banned_words_of(outputs) -> list[str]:
    """The outputs' words that are in their own negative set."""
    return [w for o in outputs for w in words_of(o["text"]) if w in o["banned"]]


def test_every_reference_keeps_its_outputs_none_with_a_banned_word(loaded):
    results = _decode(loaded, REFERENCES, batch_size=2)
    assert [r.source for r in results] == REFERENCES
    for r in results:
        assert len(r.outputs) == SMALL["keep"], r.counts
        assert r.counts["sampled"] == 24 and r.counts["finished"] >= 20 and r.counts["violating"] == 0
        assert [o["rank"] for o in r.outputs] == [1, 2, 3]
        assert len({o["cluster"] for o in r.outputs}) == 3 and PINNED not in {o["cluster"] for o in r.outputs}
        for o in r.outputs:
            assert o["text"] and "\n" not in o["text"] and "Paraphrase" not in o["text"]  # the continuation only
            assert set(words_of(o["text"])) <= set(WORDS) | {"a", "big", "today"}, o
            assert 0 < o["score"] <= 3.5
            negative = normalise_constraints({"negative": [[w] for w in o["banned"]]})
            assert o["banned"] and not violations(o["text"], negative)
    assert not _banned_words_of(o for r in results for o in r.outputs)
    # the bans are what keeps those words out: with a negligible penalty in their place the model writes them
    wide = dict(clusters=20, keep=19)
    discouraged = _decode(loaded, REFERENCES[:1], discourage=1e-6, **wide)
    assert _banned_words_of(discouraged[0].outputs)
    assert not _banned_words_of(_decode(loaded, REFERENCES[:1], **wide)[0].outputs)


def test_the_same_seed_gives_the_same_outputs_whatever_the_batch(loaded):
    one = [r.outputs for r in _decode(loaded, REFERENCES, batch_size=1)]
    two = [r.outputs for r in _decode(loaded, REFERENCES, batch_size=2)]
    again = [r.outputs for r in _decode(loaded, REFERENCES, batch_size=2)]
    other = [r.outputs for r in _decode(loaded, REFERENCES, batch_size=2, seed=6)]
    assert one == two == again
    assert other != one


def test_each_prompt_runs_once_and_its_rows_share_its_cache(loaded):
    """One forward over the batch's prompts (B rows of the prompts' length), then one token per row per step."""
    from generation.decoding.diverse import sample_batch

    shapes = []
    hook = loaded.model.register_forward_pre_hook(
        lambda _m, _a, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        options = DiverseOptions(**{**SMALL, "batch_size": 2})
        gens = [torch.Generator().manual_seed(s) for s in (1, 2)]
        rows = sample_batch(loaded, REFERENCES, [[[]] * 3, [[]] * 3], gens, options)
    finally:
        hook.remove()
    prompts = loaded.prompt.encode(loaded.tokenizer, REFERENCES, return_tensors="pt", padding=True)
    prompt_len = prompts["input_ids"].shape[1]
    assert prompt_len > 1
    assert shapes[0] == (2, prompt_len)  # the prefill: once per input, not once per row
    assert all(width == 1 for _, width in shapes[1:]) and shapes[1] == (48, 1)
    assert len(shapes) <= SMALL["max_length"]
    assert [len(r) for r in rows] == [24, 24]
    assert sum(r is not None for per in rows for r in per) >= 40


def test_a_row_scores_what_the_model_gives_its_continuation_of_the_prompt(loaded):
    """Each finished row's summed log-probability is the model's for its tokens (the one that ended it
    included) after its prompt, computed again in one plain forward without padding or cache: the copied
    cache, the positions after left padding and the mask are right."""
    from generation.decoding.diverse import sample_batch

    options = DiverseOptions(**{**SMALL, "negative_sets": 1, "samples": 6})
    gens = [torch.Generator().manual_seed(s) for s in (3, 4)]
    rows = sample_batch(loaded, REFERENCES, [[[]], [[]]], gens, options)
    checked = 0
    for source, per in zip(REFERENCES, rows):
        prompt = loaded.prompt.encode(loaded.tokenizer, [source], return_tensors="pt")["input_ids"]
        for row in per:
            if row is None:
                continue
            ids, total, n = row
            assert len(ids) == n and ids[-1] in loaded.vocab.eos_ids
            full = torch.cat([prompt, torch.tensor([ids])], 1)
            with torch.no_grad():
                logp = torch.log_softmax(loaded.model(input_ids=full).logits[0].float(), -1)
            P = prompt.shape[1]
            expected = sum(float(logp[P - 1 + j, t]) for j, t in enumerate(ids))
            assert total == pytest.approx(expected, abs=1e-3)
            checked += 1
    assert checked >= 8


def test_a_decoder_only_backward_model_scores_the_source_after_the_candidates_prompt(loaded):
    """``backward_nll`` of a decoder-only model: the NLL per token of the source (and the token that ends a reply)
    after each candidate's prompt, computed again here one candidate at a time; ``diverse_decode`` adds it."""
    from generation.decoding.backward import backward_nll
    from generation.rewriter.causal import continuation_ids, end_token_id

    tok, template = loaded.tokenizer, loaded.prompt
    candidates = ["the cat sat", "on the mat the dog", "mat"] * 4  # (more than one batch of 8)
    got = backward_nll(loaded, candidates, REFERENCES[0])
    end = end_token_id(template, tok, loaded.vocab.eos_ids)
    for cand, nll in zip(candidates, got):
        prompt = template.encode(tok, [cand])["input_ids"][0]
        body = continuation_ids(template, tok, template.render(tok, cand), list(prompt), REFERENCES[0]) + [end]
        with torch.no_grad():
            logp = torch.log_softmax(loaded.model(input_ids=torch.tensor([prompt + body])).logits[0].float(), -1)
        P = len(prompt)
        expected = -sum(float(logp[P - 1 + j, t]) for j, t in enumerate(body)) / len(body)
        assert nll == pytest.approx(expected, abs=1e-4)
    wide = dict(clusters=20, keep=19, max_nll=100.0)
    [fwd] = _decode(loaded, REFERENCES[:1], **wide)
    from generation.decoding.diverse import diverse_decode

    [both] = diverse_decode(loaded, REFERENCES[:1], options=DiverseOptions(**{**SMALL, **wide}), backward=loaded)
    assert [o["text"] for o in both.outputs]
    forward = {o["text"]: o["score"] for o in fwd.outputs}
    shared = [o for o in both.outputs if o["text"] in forward]
    back = backward_nll(loaded, [o["text"] for o in shared], REFERENCES[0])
    assert shared and all(o["score"] == pytest.approx(forward[o["text"]] + b, abs=2e-4) for o, b in zip(shared, back))


def test_a_decoder_only_backward_model_reads_only_the_sources_columns_through_its_lm_head(loaded, monkeypatch):
    """Candidates of any length are scored together, left-padded so that every row's source ends in the last
    column: each forward's LM head (most of the work: 262k words for Gemma 3) runs on the source's columns alone,
    as many rows a forward as keep its logits within the bound, and each NLL is what one candidate alone gives."""
    import functools

    from generation.decoding import backward as backward_module
    from generation.decoding.backward import backward_nll
    from generation.rewriter.causal import continuation_ids

    tok, template = loaded.tokenizer, loaded.prompt
    candidates = ["mat", "the cat sat on the mat today and a big dog sat on the mat", "a dog", "the big cat sat"] * 3
    alone = [backward_nll(loaded, [c], REFERENCES[1])[0] for c in candidates[:4]]
    prompt = template.encode(tok, ["mat"])["input_ids"][0]
    source = continuation_ids(template, tok, template.render(tok, "mat"), list(prompt), REFERENCES[1])
    span = len(source) + 1  # the source's tokens and the end token
    forwards = []
    model = loaded.model
    real = model.forward

    @functools.wraps(real)
    def spy(*args, **kwargs):
        forwards.append((kwargs["input_ids"].shape, kwargs.get("logits_to_keep"), kwargs.get("position_ids")))
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    monkeypatch.setattr(backward_module, "CAUSAL_BACKWARD_LOGITS", 5 * (span + 1))
    got = backward_nll(loaded, candidates, REFERENCES[1])
    assert got == pytest.approx(alone * 3, abs=1e-4)
    assert sum(shape[0] for shape, _, _ in forwards) == len(candidates) and len(forwards) == 3  # 5, 5, 2 rows
    assert all(keep == span + 1 for _, keep, _ in forwards)  # (the columns before the source: never)
    # a left-padded row's positions start at its first token: the longest row's end at the last column, a shorter one's
    # before it (two of the three forwards mix lengths)
    ends = [
        (int(positions[:, -1].min()), int(positions[:, -1].max()), shape[1] - 1) for shape, _, positions in forwards
    ]
    assert all(top == last for _, top, last in ends) and sum(low < last for low, _, last in ends) == 2


def _cli(tmp_path, model, *extra, lines=REFERENCES):
    inp, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    inp.write_text("\n".join(lines) + "\n")
    args = ["--model", str(model), "--input", str(inp), "--output", str(out), "--device", "cpu", *extra]
    call_command("paraphrase", *args, stderr=io.StringIO())
    return [json.loads(x) for x in out.read_text().splitlines()], out


def test_cli_diverse_with_a_prompt_template(tmp_path, tiny_marian_dir):
    model = save_ending_llama(tmp_path / "llama")
    small = ("--negative-sets", "3", "--samples", "8", "--clusters", "4", "--keep", "3", "--max-length", "40")
    rows, _ = _cli(tmp_path, model, "--diverse", "--prompt-template", "paraphrase-plain", *small)
    assert [r["source"] for r in rows] == REFERENCES
    for r in rows:
        assert len(r["outputs"]) == 3 and r["candidates"]["sampled"] == 24
        assert not _banned_words_of(r["outputs"])
    # the template is the model's default when none is named (a base model: paraphrase-plain)
    default, _ = _cli(tmp_path, model, "--diverse", *small)
    assert default == rows
    # the model as its own backward model (the same folder: loaded once, with the same template)
    (tmp_path / "b").mkdir()
    wide = ("--max-nll", "100")
    back, _ = _cli(tmp_path / "b", model, "--diverse", "--backward-model", str(model), *small, *wide)
    forward, _ = _cli(tmp_path / "b", model, "--diverse", *small, *wide)
    assert [len(r["outputs"]) for r in back] == [3, 3]
    assert [o["score"] for r in back for o in r["outputs"]] != [o["score"] for r in forward for o in r["outputs"]]
    # a prompt template for an encoder-decoder model: the beam search's refusal, before anything is written
    (tmp_path / "x").mkdir()
    with pytest.raises(CommandError, match="--prompt-template: .*decoder-only"):
        _cli(tmp_path / "x", tiny_marian_dir, "--diverse", "--prompt-template", "paraphrase-plain", *small)
    assert not (tmp_path / "x" / "out.jsonl").exists()
