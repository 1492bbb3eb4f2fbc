"""The monolingual rewriter (§6) on a decoder-only model: ``train_rewriter --base-model M --prompt-template T``
fine-tunes tiny random Llama- and GPT-2-shaped models built here (no download) on prompt + paraphrase, only the
continuation counting; it resumes from its checkpoints; its export loads as a causal LM that ``paraphrase``
and the generate job decode under constraints with the recorded template. Refusals are one-line errors."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
import torch
from django.core.management import CommandError, call_command

from generation import rewriter
from generation.decoding import from_objects, load_model, normalise_constraints, violations
from generation.decoding.causal import prompt_batch
from generation.prompts import builtin, resolve
from generation.rewriter.causal import IGNORE, causal_loss, collate, encode_pairs, end_token_id, labelled

from .causal_models import PAIRS, save_chat_model, tiny_causal, tiny_tokenizer, train_rewriter_cli, write_pairs

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# a handful of pairs in the tiny tokenizer's words (tests/generation/conftest.py: corpus)
TEMPLATE_TEXT = "In: {source}\nOut:"
FAST = {"batch_size": 4, "warmup": 2, "threads": 1, "valid_size": 0, "seed": 3}


def _save_base(folder: Path, kind: str, chat: bool = True) -> Path:
    """A tiny random model's folder: a chat one (end of turn ``<|im_end|>``) or a base one without a chat
    template."""
    if chat:
        return save_chat_model(folder, kind)
    tok = tiny_tokenizer(chat=False)
    tiny_causal(kind, tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return _save_base(tmp_path_factory.mktemp("base_llama") / "m", "llama")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return _save_base(tmp_path_factory.mktemp("base_gpt2") / "m", "gpt2", chat=False)


# ------------------------------------------------------------------------------------------ the examples


@pytest.mark.parametrize("template", ["paraphrase-chat", "paraphrase-plain"])
def test_an_example_is_the_decoders_prompt_then_the_paraphrase_and_only_the_paraphrase_is_learnt(template):
    tok = tiny_tokenizer()
    model = tiny_causal("llama", tok)
    model.generation_config.eos_token_id = [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    loaded = from_objects(model, tok, "cpu", prompt_template=template)
    end = end_token_id(loaded.prompt, tok, (tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id))
    # a chat reply ends with the end-of-turn token the chat template writes after it; a plain one with EOS
    assert end == tok.convert_tokens_to_ids("<|im_end|>" if template == "paraphrase-chat" else "<|endoftext|>")
    src, para = PAIRS[0]
    [(ids, labels)] = encode_pairs(loaded.prompt, tok, end, [(src, para)], max_len=64)
    prompt_ids, mask = prompt_batch(loaded, [src])  # what the decoder feeds the model for this sentence
    prompt = prompt_ids[0][mask[0].bool()].tolist()
    n = len(prompt)
    assert ids[:n] == prompt  # train and decode agree token for token
    assert labels[:n] == [IGNORE] * n  # the prompt (and the reference in it) carries no loss
    assert labels[n:] == ids[n:] and ids[-1] == end
    assert tok.decode(ids[n:-1]).strip() == para
    assert labelled([5, 6], [7, 8]) == ([5, 6, 7, 8], [IGNORE, IGNORE, 7, 8])
    # the continuation is cut to --max-len tokens, its end kept; the prompt never is
    [(short, short_labels)] = encode_pairs(loaded.prompt, tok, end, [(src, para)], max_len=3)
    assert short[:n] == prompt and len(short) == n + 3 and short[-1] == end


def test_the_loss_counts_the_continuation_only_and_padding_changes_nothing():
    tok = tiny_tokenizer()
    model = tiny_causal("llama", tok)
    template = builtin("paraphrase-plain")
    examples = encode_pairs(template, tok, tok.eos_token_id, PAIRS[:2], max_len=64)
    assert len(examples[0][0]) != len(examples[1][0])  # one batch pads one of them
    with torch.no_grad():
        ids, mask, labels = collate(examples, tok.pad_token_id)
        assert (mask.sum(1).tolist()) == [len(x) for x, _ in examples] and bool(mask[:, 0].all())  # right-padded
        batch_loss, _ = causal_loss(model, ids, mask, labels, 0.0)
        # by hand: each position predicts the next token; only labelled ones count, each sequence alone
        total, count = 0.0, 0
        for x, y in examples:
            logits = model(input_ids=torch.tensor([x])).logits[0]
            for t in range(len(x) - 1):
                if y[t + 1] != IGNORE:
                    total -= torch.log_softmax(logits[t], -1)[y[t + 1]].item()
                    count += 1
        n_cont = sum(sum(1 for v in y if v != IGNORE) for _, y in examples)
        assert count == n_cont
        assert batch_loss.item() == pytest.approx(total / count, rel=1e-4)


# ------------------------------------------------------------------------------------------ training runs


def test_fine_tuning_a_llama_shape_loss_falls_resumes_and_exports(tmp_path, llama_dir):
    pairs = write_pairs(tmp_path / "pairs.tsv")
    out, seen = tmp_path / "run", []
    common = dict(base_model=str(llama_dir), steps=24, checkpoint_every=6, lr=1e-2, **FAST)
    first = rewriter.train(pairs, out, stop_after=12, progress=seen.append, **common)
    assert first.step == 12 and not first.exported and rewriter.latest_checkpoint(out).name == "step-0000012"
    second = rewriter.train(pairs, out, progress=seen.append, **common)
    assert second.start_step == 12 and second.step == 24 and second.exported
    assert [i["step"] for i in seen] == list(range(1, 25))  # continued, not restarted
    losses = [i["loss"] for i in seen]
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 1.0

    # an uninterrupted run ends with the same weights: the resumed one saw the same batches, RNG and schedule
    whole = rewriter.train(pairs, tmp_path / "whole", **common)
    assert whole.step == 24
    a = load_model(out, device="cpu").model.state_dict()
    b = load_model(tmp_path / "whole", device="cpu").model.state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)

    info = json.loads((out / "paraforge_training.json").read_text())
    assert info["base_model"] == str(llama_dir)
    assert info["prompt_template"] == builtin("paraphrase-chat").to_json()  # the base has a chat template
    assert info["model"]["model_type"] == "llama" and info["model"]["decoder_only"]
    assert info["training"]["steps"] == 24 and info["data"]["pairs"] == 2 * len(PAIRS)
    loaded = load_model(out, device="cpu")
    assert loaded.causal and loaded.prompt == builtin("paraphrase-chat")
    assert type(loaded.model).__name__ == "LlamaForCausalLM"
    # the base's end-of-turn tokens survive the checkpoints: the decoder still stops at <|im_end|>
    im_end = loaded.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in loaded.model.generation_config.eos_token_id

    # export-only needs no --base-model: the checkpoint says what it is
    again = rewriter.train(None, out, export_only=True, export=tmp_path / "again", fp16=True)
    assert again.exported and load_model(tmp_path / "again", device="cpu").prompt == builtin("paraphrase-chat")


def test_cli_fine_tunes_gpt2_and_paraphrase_decodes_it_with_the_recorded_template(tmp_path, gpt2_dir):
    pairs = write_pairs(tmp_path / "pairs.tsv", copies=1)
    template = tmp_path / "prompt.txt"
    template.write_text(TEMPLATE_TEXT + "\n", encoding="utf-8")
    out = tmp_path / "gpt2-rewriter"
    args = ["--pairs", str(pairs), "--out", str(out), "--base-model", str(gpt2_dir), "--prompt-template",
            str(template), "--steps", "60", "--batch-size", "4", "--lr", "1e-2", "--warmup", "2",
            "--label-smoothing", "0", "--checkpoint-every", "30", "--threads", "1"]  # fmt: skip
    summary = train_rewriter_cli(*args)
    assert summary["exported"] and summary["step"] == 60
    recorded = json.loads((out / "paraforge_training.json").read_text())["prompt_template"]
    assert recorded == {"name": "file:prompt.txt", "text": TEMPLATE_TEXT, "chat": False, "stop_at_newline": True}
    template.unlink()  # decoding needs no file: the export carries the template's text

    sources = [s for s, _ in PAIRS]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    cons = [{"positive": [["dog"]], "negative": [["cat"]]}, {}, {"negative": [["often"]]}, {}]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cons))
    got = tmp_path / "out.jsonl"
    call_command(
        "paraphrase", "--model", str(out), "--input", str(tmp_path / "in.txt"), "--output", str(got),
        "--constraints", str(tmp_path / "c.jsonl"), "--beam", "4", "--max-length", "16", "--device", "cpu",
        stderr=StringIO(),
    )  # fmt: skip
    rows = [json.loads(line) for line in got.read_text().splitlines()]
    for row, c in zip(rows, cons):
        assert not row["unsatisfiable"] and row["outputs"]
        assert violations(row["outputs"][0]["text"], normalise_constraints(c)) == []
    # unconstrained, the rewriter says what it learnt under that prompt: the recorded template was used
    assert rows[1]["outputs"][0]["text"] == PAIRS[1][1] and rows[3]["outputs"][0]["text"] == PAIRS[3][1]
    assert load_model(out, device="cpu").prompt == resolve(recorded)
    # an explicit --prompt-template still wins over the recorded one
    assert load_model(out, device="cpu", prompt_template="paraphrase-plain").prompt.name == "paraphrase-plain"

    # the generate job stores the recorded template when none is given (a worker decodes with it)
    from generation.generation_job.params import prompt_template_json

    assert prompt_template_json(str(out), True, None) == recorded


def test_an_encoder_decoder_base_fine_tunes_too(tmp_path, tiny_marian_dir):
    pairs = write_pairs(tmp_path / "pairs.tsv")
    res = rewriter.train(pairs, tmp_path / "m", base_model=str(tiny_marian_dir), steps=3, checkpoint_every=3, **FAST)
    assert res.exported
    info = json.loads((tmp_path / "m" / "paraforge_training.json").read_text())
    assert info["base_model"] == str(tiny_marian_dir) and info["prompt_template"] is None
    loaded = load_model(tmp_path / "m", device="cpu")
    assert not loaded.causal and loaded.model.config.model_type == "marian"


# ------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "args, message",
    [
        (["--layers", "2", "--d-model", "64"], "--layers, --d-model set the from-scratch Marian rewriter; "
         "--base-model brings its own architecture and tokenizer: leave them out"),
        (["--vocab-size", "500"], "--vocab-size set the from-scratch Marian rewriter"),
        (["--prompt-template", "paraphrase-poem"], "--prompt-template: prompt template 'paraphrase-poem' is "
         "neither a built-in"),
    ],
)  # fmt: skip
def test_settings_that_cannot_fine_tune_are_refused(tmp_path, llama_dir, args, message):
    pairs = write_pairs(tmp_path / "pairs.tsv")
    out = tmp_path / "o"
    with pytest.raises(CommandError, match=message):
        train_rewriter_cli("--pairs", str(pairs), "--out", str(out), "--base-model", str(llama_dir), *args)
    assert not out.exists()


def test_a_template_or_base_that_cannot_work_is_refused_before_anything_is_written(tmp_path, gpt2_dir, tiny_marian_dir):
    pairs = write_pairs(tmp_path / "pairs.tsv")
    out = tmp_path / "o"
    common = ["--pairs", str(pairs), "--out", str(out)]
    with pytest.raises(CommandError, match="--prompt-template needs --base-model .*from-scratch Marian"):
        train_rewriter_cli(*common, "--prompt-template", "paraphrase-plain")
    with pytest.raises(CommandError, match="--base-model: model folder .*nowhere.* does not exist"):
        train_rewriter_cli(*common, "--base-model", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="--prompt-template: paraphrase-chat: the model's tokenizer has no chat"):
        train_rewriter_cli(*common, "--base-model", str(gpt2_dir), "--prompt-template", "paraphrase-chat")
    with pytest.raises(CommandError, match="--prompt-template is for a decoder-only --base-model; .* encoder-decoder"):
        train_rewriter_cli(*common, "--base-model", str(tiny_marian_dir), "--prompt-template", "paraphrase-plain")
    assert not (out / "checkpoints").exists() and not (out / "tokenizer").exists()


def test_a_checkpointed_run_is_resumed_only_as_itself(tmp_path, llama_dir, gpt2_dir):
    pairs = write_pairs(tmp_path / "pairs.tsv")
    out = tmp_path / "run"
    common = ["--pairs", str(pairs), "--out", str(out), "--steps", "4", "--batch-size", "4", "--threads", "1"]
    train_rewriter_cli(*common, "--base-model", str(llama_dir), "--stop-after", "1", "--checkpoint-every", "1")
    before = rewriter.latest_checkpoint(out)
    with pytest.raises(CommandError, match=r"holds checkpoints fine-tuned from .*give --base-model .* or --no-resume"):
        train_rewriter_cli(*common)
    with pytest.raises(CommandError, match=r"fine-tuned from .*, not from .*m'"):
        train_rewriter_cli(*common, "--base-model", str(gpt2_dir))
    with pytest.raises(
        CommandError, match=r"--prompt-template 'paraphrase-plain' is not the template .*'paraphrase-chat'"
    ):
        train_rewriter_cli(*common, "--base-model", str(llama_dir), "--prompt-template", "paraphrase-plain")
    assert rewriter.latest_checkpoint(out) == before and (out / "tokenizer").is_dir()
    # a from-scratch run's folder is not continued as a fine-tuning one either
    scratch = tmp_path / "scratch"
    rewriter.train(pairs, scratch, steps=2, stop_after=1, checkpoint_every=1, vocab_size=200,
                   config={"d_model": 16, "layers": 1, "heads": 2}, **FAST)  # fmt: skip
    with pytest.raises(CommandError, match="holds checkpoints of a from-scratch Marian rewriter"):
        train_rewriter_cli("--pairs", str(pairs), "--out", str(scratch), "--base-model", str(llama_dir))
    # --no-resume starts the fine-tuning afresh there
    fresh = ["--no-resume", "--steps", "1", "--batch-size", "4", "--threads", "1"]
    assert train_rewriter_cli("--pairs", str(pairs), "--out", str(scratch), "--base-model", str(llama_dir), *fresh)[
        "exported"
    ]
