"""Constraints under tokenizers without word-start marks (issue 40's leftover): a WordLevel vocabulary split on
whitespace (every token a whole word) and a WordPiece one with "##" continuation pieces (BERT's scheme). Before,
every positive constraint was reported unsatisfiable with them. Tiny tokenizers trained here, tiny random BART
models saved to a temporary folder and loaded as a user's would be (no network)."""

from __future__ import annotations

import random
import re

import pytest

from generation.decoding import decode, load_model
from generation.decoding.vocab import spell_words, surface_strings, word_scheme
from generation.words import words_of

from .conftest import corpus, tiny_config_kwargs

SOURCES = ["how often do earthquakes occur ?", "the cat sat on the mat ."]


def wordlevel_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
    t.train_from_iterator(corpus(), trainers.WordLevelTrainer(special_tokens=specials, show_progress=False))
    return PreTrainedTokenizerFast(
        tokenizer_object=t, pad_token="[PAD]", unk_token="[UNK]", bos_token="[BOS]", eos_token="[EOS]"
    )


WHOLE_WORDS_PIECED = {
    "running": "run ##n ##in ##g",
    "walked": "walk ##ed",
    "earthquakes": "earth ##quakes",
    "runs": "run ##s",
}


def wordpiece_tokenizer():
    """BERT's layout: punctuation split off, "##" continuation pieces, the WordPiece decoder.

    The vocabulary is written here, not trained: the WordPiece trainer breaks ties between equally frequent merges in
    hash order, so a trained vocabulary (and every decode under it) changed from one process to the next. Every
    character of the corpus is a piece of its own, so any word can be spelled; the words of ``WHOLE_WORDS_PIECED``
    are spelled in several pieces, as the trained one spelled them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    chars = sorted(set("".join(corpus())) - {" "})
    pieces = {p for spelling in WHOLE_WORDS_PIECED.values() for p in spelling.split()}
    words = {w for line in corpus() for w in re.findall(r"[a-z]+", line)} - set(WHOLE_WORDS_PIECED)
    vocab = [*specials, *chars, *(f"##{c}" for c in chars if c.isalnum()), *sorted(pieces | words - set(chars))]
    t = Tokenizer(models.WordPiece({piece: i for i, piece in enumerate(dict.fromkeys(vocab))}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.decoder = decoders.WordPiece(prefix="##")
    tok = PreTrainedTokenizerFast(
        tokenizer_object=t, pad_token="[PAD]", unk_token="[UNK]", bos_token="[CLS]", eos_token="[SEP]"
    )
    assert all(" ".join(tok.tokenize(w)) == spelling for w, spelling in WHOLE_WORDS_PIECED.items())
    return tok


def save_tiny_bart(folder, tok, seed=0):
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(seed)
    cfg = BartConfig(
        **{
            **tiny_config_kwargs(len(tok), tok.pad_token_id, tok.eos_token_id),
            "decoder_start_token_id": tok.eos_token_id,
            "bos_token_id": tok.bos_token_id,
            "forced_bos_token_id": None,
        }
    )
    BartForConditionalGeneration(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def wordlevel(tmp_path_factory):
    return load_model(save_tiny_bart(tmp_path_factory.mktemp("wordlevel"), wordlevel_tokenizer()), device="cpu")


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
    return load_model(save_tiny_bart(tmp_path_factory.mktemp("wordpiece"), wordpiece_tokenizer()), device="cpu")


def run(m, constraints, **kw):
    return decode(m, SOURCES[: len(constraints)], constraints, beam=4, nbest=2, max_length=16, **kw)


def _has(words, phrase):
    n = len(phrase)
    return any(words[i : i + n] == phrase for i in range(len(words) - n + 1))


def test_schemes_are_read_from_the_tokenizer(wordlevel, wordpiece, tiny_marian):
    def scheme(tok):
        return word_scheme(tok, [tok.convert_ids_to_tokens(i) for i in range(len(tok))])

    assert scheme(wordlevel.tokenizer).kind == "whole_words"
    assert (scheme(wordpiece.tokenizer).kind, scheme(wordpiece.tokenizer).prefix) == ("continuation", "##")
    assert (scheme(tiny_marian.tokenizer).kind, scheme(tiny_marian.tokenizer).byte_level) == ("marks", False)


@pytest.mark.parametrize("name", ["wordlevel", "wordpiece"])
def test_the_decoder_spells_words_as_the_tokenizer_decodes_them(name, request):
    """Any token sequence: the words the decoder's tables see are the words of the detokenised text."""
    m = request.getfixturevalue(name)
    tok = m.tokenizer
    special = set(tok.all_special_ids)
    ids = [i for i in range(len(tok)) if i not in special]
    rnd = random.Random(0)
    for _ in range(200):
        seq = [rnd.choice(ids) for _ in range(rnd.randint(1, 8))]
        text = tok.decode(seq, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        assert spell_words(m.vocab, seq)[0] == words_of(text), [tok.convert_ids_to_tokens(seq)]


@pytest.mark.parametrize(
    "name, phrases",
    [
        ("wordlevel", [["running"]]),
        ("wordlevel", [["the", "cat"], ["walked"]]),
        ("wordpiece", [["running"]]),  # a word of four pieces: run ##n ##in ##g
        ("wordpiece", [["earthquakes", "occur"], ["walked"]]),
    ],
)
def test_positive_constraints_are_met(name, phrases, request, one_torch_thread):
    m = request.getfixturevalue(name)
    for r in run(m, [{"positive": phrases}] * 2):
        assert not r.unsatisfiable, r.reason
        assert r.outputs
        for o in r.outputs:
            assert o["satisfied"]
            assert all(_has(words_of(o["text"]), p) for p in phrases), o["text"]


@pytest.mark.parametrize("name", ["wordlevel", "wordpiece"])
def test_banned_words_never_appear(name, request, one_torch_thread):
    m = request.getfixturevalue(name)
    [free] = run(m, [None])
    banned = words_of(free.outputs[0]["text"])[0]  # what the model says first when nothing is banned
    for r in run(m, [{"negative": [[banned]]}, {"negative": [[banned]], "positive": [["walked"]]}]):
        assert not r.unsatisfiable, r.reason
        for o in r.outputs:
            assert banned not in words_of(o["text"])
            assert o["satisfied"]


@pytest.mark.parametrize("name", ["wordlevel", "wordpiece"])
def test_a_word_that_starts_like_a_banned_word_is_allowed(name, request, one_torch_thread):
    """Banning "run" is exact at word level: "running" (run ##n ##in ##g under WordPiece) stays possible."""
    m = request.getfixturevalue(name)
    for r in run(m, [{"positive": [["running"]], "negative": [["run"]]}]):
        assert not r.unsatisfiable, r.reason
        for o in r.outputs:
            words = words_of(o["text"])
            assert "running" in words and "run" not in words, o["text"]


def test_a_bert2bert_encoder_decoder_meets_its_constraints(one_torch_thread):
    """The WordPiece case as users meet it: BERT's tokenizer under a BERT2BERT ``EncoderDecoderModel``."""
    import torch
    from transformers import BertConfig, EncoderDecoderConfig, EncoderDecoderModel

    from generation.decoding import from_objects

    tok = wordpiece_tokenizer()
    kw = dict(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    cfg = EncoderDecoderConfig.from_encoder_decoder_configs(
        BertConfig(**kw), BertConfig(**kw, is_decoder=True, add_cross_attention=True)
    )
    cfg.decoder_start_token_id, cfg.eos_token_id, cfg.pad_token_id = (
        tok.bos_token_id,
        tok.eos_token_id,
        tok.pad_token_id,
    )
    torch.manual_seed(0)
    model = EncoderDecoderModel(config=cfg)
    gen = model.generation_config
    gen.decoder_start_token_id, gen.eos_token_id, gen.pad_token_id = (
        tok.bos_token_id,
        tok.eos_token_id,
        tok.pad_token_id,
    )
    m = from_objects(model, tok, device="cpu")
    for r in run(m, [{"positive": [["running"], ["walked"]], "negative": [["run"], ["walk"]]}] * 2):
        assert not r.unsatisfiable, r.reason
        for o in r.outputs:
            words = words_of(o["text"])
            assert {"running", "walked"} <= set(words) and not {"run", "walk"} & set(words), o["text"]


def test_a_word_outside_a_wordlevel_vocabulary_is_unsatisfiable_with_a_reason(wordlevel):
    [r] = run(wordlevel, [{"positive": [["zebra"]]}])
    assert r.unsatisfiable and not r.outputs
    assert "cannot spell 'zebra'" in r.reason


def test_sentencepiece_spelling_is_unchanged(tiny_marian):
    """The "▁" path: a token's surface is its piece with "▁" as a space, as before."""
    tok = tiny_marian.tokenizer
    n = len(tok)
    surfaces, special = surface_strings(tok, n)
    for i in range(n):
        piece = tok.convert_ids_to_tokens(i)
        if i not in special and not piece.startswith("<0x"):
            assert surfaces[i] == piece.replace("▁", " ")


def test_a_positive_phrase_is_spelled_as_written_where_the_vocabulary_allows(tmp_path, tiny_marian, one_torch_thread):
    """A user's "flute." is decoded as written: a whitespace-split vocabulary that holds "flute." but no "flute"
    meets it, and a SentencePiece model writes the full stop after the word; each is checked at the word level."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    lines = [*corpus(), "she plays the flute.", "he plays a flute."]
    t.train_from_iterator(
        lines, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[BOS]", "[EOS]"], show_progress=False)
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=t, pad_token="[PAD]", unk_token="[UNK]", bos_token="[BOS]", eos_token="[EOS]"
    )
    assert "flute." in tok.get_vocab() and "flute" not in tok.get_vocab()
    m = load_model(save_tiny_bart(tmp_path / "split", tok), device="cpu")
    for model, phrase in ((m, "flute."), (tiny_marian, "cat.")):
        [r] = run(model, [{"positive": [[phrase]]}])
        assert not r.unsatisfiable, r.reason
        for o in r.outputs:
            assert o["satisfied"] and phrase in o["text"], o["text"]
    [r] = run(m, [{"positive": [["flute"]]}])  # as written, "flute" is a word this vocabulary cannot spell alone
    assert r.unsatisfiable and "cannot spell 'flute'" in r.reason
