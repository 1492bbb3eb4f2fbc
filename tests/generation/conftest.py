"""Tiny seq2seq model folders for the decoder tests (random weights, tokenizers trained here; no network)."""

from __future__ import annotations

import json
import os
import random

import pytest

WORDS = (
    "how often do earthquakes occur today the a b c cat dog sat on mat is was it and of to in for with "
    "that this he she they we you big small red blue green run runs running ran walk walked talk talks "
    "house tree car sun moon sky water fire earth wind time day night year people world life hand part "
    "place case week company system program question work government number point home fact"
).split()


def corpus(n=400, seed=0):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        ws = [rnd.choice(WORDS) for _ in range(rnd.randint(3, 12))]
        if rnd.random() < 0.5:
            ws[0] = ws[0].capitalize()
        out.append(" ".join(ws) + rnd.choice([".", "?", "!", ",", ""]))
    out += ["a a a b .", "a a b", "often, often.", "How often do earthquakes occur?", "U.S. it's 3.5 don't"]
    return out


def tiny_config_kwargs(vocab_size, pad_id, eos_id=0):
    return dict(
        vocab_size=vocab_size,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=128,
        pad_token_id=pad_id,
        eos_token_id=eos_id,
        decoder_start_token_id=pad_id,
        forced_eos_token_id=eos_id,
    )


def build_marian(folder, vocab_size=300, seed=0):
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    text = folder / "corpus.txt"
    text.write_text("\n".join(corpus()) + "\n")
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(folder / "sp"),
        vocab_size=vocab_size,
        character_coverage=1.0,
        model_type="unigram",
        bos_id=-1,
        eos_id=1,
        unk_id=2,
        pad_id=-1,
        minloglevel=2,
        hard_vocab_limit=False,
    )
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in ("</s>", "<unk>")]
    vocab = {"</s>": 0, "<unk>": 1}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tok = MarianTokenizer(
        str(folder / "sp.model"),
        str(folder / "sp.model"),
        str(folder / "vocab.json"),
        source_lang="en",
        target_lang="en",
    )
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**tiny_config_kwargs(len(vocab), vocab["<pad>"])))
    out = folder / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_bart(folder, seed=0):
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        corpus(),
        vocab_size=400,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    bpe.save_model(str(folder))
    tok = BartTokenizerFast(vocab_file=str(folder / "vocab.json"), merges_file=str(folder / "merges.txt"))
    torch.manual_seed(seed)
    cfg = BartConfig(
        **{
            **tiny_config_kwargs(len(tok), tok.pad_token_id, tok.eos_token_id),
            "decoder_start_token_id": tok.eos_token_id,
            "bos_token_id": tok.bos_token_id,
            "forced_bos_token_id": None,
        }
    )
    model = BartForConditionalGeneration(cfg)
    out = folder / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_t5(folder, vocab_size=300, seed=0):
    """T5 as Hugging Face lays it out: <pad>=0 doubles as the decoder start, </s>=1, <unk>=2, "▁" marks
    a word start, relative position buckets instead of embeddings."""
    import sentencepiece as spm
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    text = folder / "corpus.txt"
    text.write_text("\n".join(corpus()) + "\n")
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(folder / "sp"),
        vocab_size=vocab_size,
        character_coverage=1.0,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
        hard_vocab_limit=False,
    )
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    tok = T5Tokenizer(vocab=[(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())], extra_ids=0)
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(
        T5Config(
            vocab_size=len(tok),
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=1,
            num_decoder_layers=1,
            num_heads=2,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            decoder_start_token_id=tok.pad_token_id,
        )
    )
    out = folder / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_marian_dir(tmp_path_factory):
    return build_marian(tmp_path_factory.mktemp("tiny_marian"))


@pytest.fixture(scope="session")
def tiny_marian(tiny_marian_dir):
    from generation.decoding import load_model

    return load_model(tiny_marian_dir, device="cpu")


@pytest.fixture(scope="session")
def tiny_bart_dir(tmp_path_factory):
    return build_bart(tmp_path_factory.mktemp("tiny_bart"))


@pytest.fixture(scope="session")
def tiny_t5_dir(tmp_path_factory):
    return build_t5(tmp_path_factory.mktemp("tiny_t5"))


@pytest.fixture(scope="module")
def one_torch_thread():
    """The tiny models decode faster on one thread than on two cores shared with other processes."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def one_torch_thread_per_worker():
    """The Celery worker a test starts inherits ``OMP_NUM_THREADS=1``: tiny models decode faster on one thread
    than on shared cores, and a batch's step takes no less time on a fast host."""
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    if before is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = before
