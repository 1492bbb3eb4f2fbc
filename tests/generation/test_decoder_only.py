"""Decoder-only models (issue 40): equal to Hugging Face's beam search token for token on tiny random Llama-,
Qwen2- and GPT-2-shaped models built here (no download), prompts of different lengths in one batch, several
EOS tokens; constraints hold in the continuation only; loading with a prompt template."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from generation.decoding import decode, from_objects, load_model, normalise_constraints, violations
from generation.prompts import PromptTemplate, PromptTemplateError
from generation.words import words_of

from .causal_models import save_chat_model, tiny_causal, tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# prompts of different lengths: one batch holds a 3-token prompt beside a 12-token one (left padding)
PROMPTS = ["How often do earthquakes occur?", "the cat", "a a b big red house today .", "dog"]
RAW = PromptTemplate("raw", "{source}", chat=False, stop_at_newline=False)  # the prompt is the source itself


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _model(kind: str, tok, seed: int = 0, std: float = 0.02):
    return tiny_causal(kind, tok, seed, std)


def _hf(loaded, prompts, K, N, max_length, lp, early):
    enc = loaded.tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = loaded.model.generate(
            **enc,
            num_beams=K,
            num_return_sequences=N,
            max_new_tokens=max_length - 1,  # ours counts a start column, as an encoder-decoder's does
            length_penalty=lp,
            early_stopping=early,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
        )
    return out, enc["input_ids"].shape[1]


def _assert_equal_to_hf(loaded, prompts, K, N, max_length, lp=1.0, early=False) -> int:
    """Ours and generate's n-best, token for token and score for score; returns how many outputs ended
    before max_length (so that a test can show its finishing path was exercised)."""
    out, P = _hf(loaded, prompts, K, N, max_length, lp, early)
    ours = decode(
        loaded, prompts, None, beam=K, nbest=N, max_length=max_length, length_penalty=lp,
        early_stopping=early, batch_size=len(prompts),
    )  # fmt: skip
    eos = set(loaded.vocab.eos_ids)
    ended = 0
    for i, r in enumerate(ours):
        assert len(r.outputs) == N, i
        for j, o in enumerate(r.outputs):
            hf = out.sequences[i * N + j, P:].tolist()
            cut = next((n for n, t in enumerate(hf) if t in eos), None)
            if cut is not None:
                hf, ended = hf[: cut + 1], ended + 1
            else:  # ran to max_length (the model may emit the pad token itself: nothing is stripped)
                assert len(hf) == max_length - 1
            ours_ids = loaded.tokenizer.convert_tokens_to_ids(o["tokens"])
            assert ours_ids == [t for t in hf if t != loaded.vocab.eos_id], (i, j)
            assert o["score"] / len(hf) ** lp == pytest.approx(float(out.sequences_scores[i * N + j]), abs=1e-4)
    return ended


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt2"])
@pytest.mark.parametrize(
    "K,N,max_length,lp,early", [(4, 2, 12, 1.0, False), (3, 1, 10, 2.0, "never"), (5, 3, 9, 0.5, True)]
)
def test_equals_hf_generate(tok, kind, K, N, max_length, lp, early):
    loaded = from_objects(_model(kind, tok), tok, "cpu", prompt_template=RAW)
    _assert_equal_to_hf(loaded, PROMPTS, K, N, max_length, lp, early)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt2"])
def test_equals_hf_with_several_eos_tokens(tok, kind):
    """A chat model's generation config lists end-of-turn tokens beside EOS; any of them ends an output (and
    generate keeps (1 + their number) x K candidates). Here three tokens the random model likes are made its
    end-of-turn tokens, so that outputs end at different steps."""
    model = _model(kind, tok, seed=3, std=0.3)  # (peaked: the model's favourites come back often)
    loaded = from_objects(model, tok, "cpu", prompt_template=RAW)
    probe = decode(loaded, PROMPTS, beam=2, nbest=2, max_length=12)
    counts = Counter(t for r in probe for o in r.outputs for t in tok.convert_tokens_to_ids(o["tokens"]))
    liked = [t for t, _ in counts.most_common(3)]
    model.generation_config.eos_token_id = [tok.eos_token_id, *liked]
    loaded = from_objects(model, tok, "cpu", prompt_template=RAW)
    assert loaded.vocab.eos_ids == (tok.eos_token_id, *liked)
    assert _assert_equal_to_hf(loaded, PROMPTS, 4, 3, 12) > 0


def test_constraints_hold_in_the_continuation_only(tok):
    """A required word that is already in the prompt must still be written by the model: the prompt never
    counts toward it. Without that rule the search would take the constraint as met at the start."""
    loaded = from_objects(_model("llama", tok), tok, "cpu", prompt_template=RAW)
    c = {"positive": [["cat"], ["big", "red"]], "negative": [["dog"], ["a", "a"]], "bos_avoid": [["the"]]}
    res = decode(loaded, PROMPTS, [c] * len(PROMPTS), beam=4, nbest=2, max_length=24)
    norm = normalise_constraints(c)
    for r in res:
        assert not r.unsatisfiable, r.reason
        assert r.safety_net_dropped == 0
        for o in r.outputs:
            assert violations(o["text"], norm) == []
            words = words_of(o["text"])
            assert "cat" in words and "big" in words and "red" in words


def test_banned_word_in_the_prompt_is_not_a_violation(tok):
    """The word "dog" is in the prompt (the reference) and banned: only the continuation must avoid it."""
    loaded = from_objects(_model("qwen2", tok), tok, "cpu", prompt_template=RAW)
    c = {"negative": [["dog"]]}
    [r] = decode(loaded, ["dog dog dog"], [c], beam=4, nbest=2, max_length=16)
    assert not r.unsatisfiable and r.outputs
    for o in r.outputs:
        assert "dog" not in words_of(o["text"])


def test_load_model_causal_folder_with_chat_template(tok, tmp_path):
    """A decoder-only checkpoint folder loads as it is (AutoModelForCausalLM); paraphrase-chat wraps the
    instruction and the reference in the tokenizer's chat template and ends at its end-of-turn token."""
    save_chat_model(tmp_path / "m")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    loaded = load_model(tmp_path / "m", device="cpu", prompt_template="paraphrase-chat")
    assert loaded.causal and loaded.prompt.name == "paraphrase-chat"
    assert loaded.vocab.eos_ids == (im_end, tok.eos_token_id)
    text = loaded.prompt.render(loaded.tokenizer, "the cat sat")
    assert text.startswith("<|im_start|>user\nParaphrase") and text.endswith("<|im_start|>assistant\n")
    assert "the cat sat" in text
    [r] = decode(loaded, ["the cat sat"], [{"positive": [["dog"]]}], beam=3, nbest=1, max_length=20)
    assert "dog" in words_of(r.outputs[0]["text"])
    assert "<|im_end|>" not in r.outputs[0]["tokens"]


def test_prompt_template_file_and_errors(tok, tmp_path, tiny_marian_dir):
    f = tmp_path / "t.txt"
    f.write_text("Rewrite: {source}\nRewritten:\n")
    model = _model("gpt2", tok)
    loaded = from_objects(model, tok, "cpu", prompt_template=str(f))
    assert loaded.prompt == PromptTemplate("file:t.txt", "Rewrite: {source}\nRewritten:", False, True)
    nl = tok.convert_tokens_to_ids("Ċ")  # a line break ends the output under a file's template
    assert nl in loaded.vocab.eos_ids
    [r] = decode(loaded, ["the cat"], beam=3, max_length=12)
    assert "\n" not in r.outputs[0]["text"]
    # read as every user's file is: a Windows editor's byte-order mark dropped, a byte that is not UTF-8 named
    (tmp_path / "bom.txt").write_bytes("\ufeffRewrite: {source}\nRewritten:\n".encode())
    assert from_objects(model, tok, "cpu", prompt_template=str(tmp_path / "bom.txt")).prompt.text == loaded.prompt.text
    (tmp_path / "latin1.txt").write_bytes("Réécris : {source}\n".encode("latin-1"))
    with pytest.raises(PromptTemplateError, match=r"latin1.txt:1: not UTF-8 \(byte 0xe9"):
        from_objects(model, tok, "cpu", prompt_template=str(tmp_path / "latin1.txt"))
    (tmp_path / "bad.txt").write_text("no placeholder")
    with pytest.raises(PromptTemplateError, match="source"):
        from_objects(model, tok, "cpu", prompt_template=str(tmp_path / "bad.txt"))
    with pytest.raises(PromptTemplateError, match="neither a built-in"):
        from_objects(model, tok, "cpu", prompt_template="paraphrase-poem")
    with pytest.raises(PromptTemplateError, match="decoder-only"):
        load_model(tiny_marian_dir, device="cpu", prompt_template="paraphrase-plain")
    # a tokenizer without a chat template: plain by default, and paraphrase-chat says what is missing
    t2 = tok.__class__(tokenizer_object=tok.backend_tokenizer, eos_token="<|endoftext|>", pad_token="<|pad|>")
    assert not t2.chat_template
    plain = from_objects(model, t2, "cpu")  # no template named: plain for a base model
    assert plain.prompt.name == "paraphrase-plain"
    with pytest.raises(PromptTemplateError, match="no chat template"):
        decode(from_objects(model, t2, "cpu", prompt_template="paraphrase-chat"), ["x"], max_length=4)


def test_gpu_batch_rule_counts_grouped_query_attention_cache(tok):
    """A GPU's default batch comes from the key/value bytes per token: with grouped-query attention that is
    the key/value heads' width (Llama here: 2 of 4 heads of 8 dims = 16), not the hidden size (32)."""
    from generation.decoding.batching import model_sizes

    assert model_sizes(_model("llama", tok)) == (2, 16)
    assert model_sizes(_model("qwen2", tok)) == (2, 8)
    assert model_sizes(_model("gpt2", tok)) == (2, 32)  # no grouped-query attention: every head
