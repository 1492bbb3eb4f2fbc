"""``DecodeOptions``: one home for the decoder's options (its checks, said as job params and as command options),
half precision as an option that the CPU refuses, and the default batch that follows the device."""

from __future__ import annotations

import copy
import json
import types

import pytest
import torch
from django.core.management import CommandError, call_command

from generation.batch_memory import CPU_BATCH, sentence_bytes
from generation.decode_options import DecodeOptions, DecodeOptionsError, dtype_device_error
from generation.decoding import decode, from_objects, load_model
from generation.decoding.batching import CUDA_CAP, batch_for_free_memory, default_batch_size
from generation.decoding.loading import model_dtype
from jobs.params import from_values, to_json

GiB, MiB = 2**30, 2**20


# --- one home: checks, both wordings -----------------------------------------------------------------


@pytest.mark.parametrize(
    "values, message, option_message",
    [
        ({"beam": 2, "nbest": 3}, "nbest (3) cannot exceed beam (2)", "(need 1 <= --nbest <= --beam)"),
        ({"beam": "x"}, "beam must be an integer written in digits 0-9, not 'x'", "--beam must be an integer"),
        ({"max_length": 1}, "max_length must be at least 2, not 1", "--max-length must be at least 2"),
        ({"batch_size": 0}, "batch_size must be at least 1, not 0", "--batch-size must be at least 1"),
        ({"length_penalty": float("nan")}, "length_penalty must be a finite number, not nan", "--length-penalty"),
        ({"stop": "first"}, "stop must be one of auto, beam, nbest, not 'first'", "stop must be one of"),
        ({"early_stopping": "sometimes"}, "early_stopping must be true, false or 'never'", "--early-stopping"),
        ({"device": "tpu"}, "device must be cpu or cuda, not 'tpu'", "--device must be cpu or cuda"),
        ({"dtype": "int4"}, "dtype must be one of float32, float16, bfloat16, not 'int4'", "--dtype must be"),
        ({"dtype": "float16", "device": "cpu"}, "dtype float16 needs a CUDA device", "--dtype float16 needs a CUDA"),
        ({"int8": True, "device": "cuda"}, "int8 runs on the CPU only", "--int8 runs on the CPU only (give --device"),
        ({"int8": True, "dtype": "bfloat16"}, "int8 runs on float32 weights only", "--int8 runs on float32"),
        ({"cuda_graph": True, "shrink": True}, "shrink and cuda_graph exclude each other", "exclude each other"),
    ],
)
def test_every_check_in_one_place_said_as_param_and_as_option(values, message, option_message):
    with pytest.raises(DecodeOptionsError) as raised:
        DecodeOptions(**values)
    assert message in str(raised.value) and option_message in raised.value.option_message
    assert isinstance(raised.value, ValueError)  # (what decode has always raised)


def test_from_values_reads_a_commands_options_and_a_jobs_params():
    parsed = {"beam": "4", "nbest": 2, "batch_size": None, "max_length": 20, "device": "", "verbosity": 1}
    options = from_values(DecodeOptions, parsed)
    assert (options.beam, options.nbest, options.batch_size, options.max_length, options.device) == (
        4,
        2,
        None,
        20,
        None,
    )
    params = to_json(options.replace(dtype="float32", batch_size=8))  # exactly the keys jobs have stored
    assert params == {
        "beam": 4,
        "nbest": 2,
        "stop": "auto",
        "max_length": 20,
        "length_penalty": 1.0,
        "batch_size": 8,
        "device": None,
        "dtype": "float32",
    }
    assert from_values(DecodeOptions, params) == options.replace(dtype="float32", batch_size=8)
    with pytest.raises(TypeError):
        options.replace(beams=3)  # a misspelt option is no silent default


def test_options_travel_to_the_search(tiny_marian, monkeypatch):
    """``decode``'s keywords are the options' fields; the same options as one value decode the same, and
    reach ``beam_search`` (then ``BeamSearch``) as that one value, resolved for the model's device."""
    import generation.decoding as decoding

    seen = []
    real = decoding.beam_search
    monkeypatch.setattr(decoding, "beam_search", lambda *a, **kw: seen.append(kw["options"]) or real(*a, **kw))
    sources = ["the cat sat on the mat .", "big red house"]
    cons = [{"positive": [["dog"]]}, {"negative": [["red"]]}]
    by_keywords = decode(tiny_marian, sources, cons, beam=3, nbest=2, max_length=12, stop="beam", batch_size=1)
    options = DecodeOptions(beam=3, nbest=2, max_length=12, stop="beam", batch_size=1)
    as_one = decode(tiny_marian, sources, cons, options=options)
    assert [r.to_json() for r in by_keywords] == [r.to_json() for r in as_one]
    assert seen and all(o == options.replace(device="cpu") for o in seen)
    with pytest.raises(DecodeOptionsError, match="the options ask for device 'cuda', the model is on 'cpu'"):
        decode(tiny_marian, sources, None, device="cuda")


# --- half precision: a GPU's option, refused on the CPU ----------------------------------------------


def test_half_precision_is_refused_on_the_cpu_everywhere(tiny_marian, tiny_marian_dir, tmp_path):
    problem = dtype_device_error("bfloat16", "cpu")
    assert "dtype bfloat16 needs a CUDA device: on the CPU the decoder computes in float32" in str(problem)
    assert dtype_device_error("float16", "cuda") is None and dtype_device_error("float32", "cpu") is None
    with pytest.raises(DecodeOptionsError, match="dtype float16 needs a CUDA device"):
        load_model(tiny_marian_dir, device="cpu", dtype="float16")  # (before the weights are read)
    with pytest.raises(DecodeOptionsError, match="dtype float16 needs a CUDA device"):
        decode(tiny_marian, ["a b"], None, dtype="float16")
    with pytest.raises(DecodeOptionsError, match="the options ask for dtype float32, the model is in float16"):
        decode(types.SimpleNamespace(device=torch.device("cuda"), dtype="float16"), ["a b"], None, dtype="float32")
    (tmp_path / "in.txt").write_text("a b\n")
    args = ["--model", str(tiny_marian_dir), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o")]
    with pytest.raises(CommandError, match=r"^--dtype bfloat16 needs a CUDA device: .*give --dtype float32\)$"):
        call_command("paraphrase", *args, "--device", "cpu", "--dtype", "bfloat16")
    with pytest.raises(CommandError, match="--dtype: invalid choice: 'half'"):
        call_command("paraphrase", *args, "--dtype", "half")
    assert not (tmp_path / "o").exists()


def test_dtype_rule_and_its_plumbing_on_the_cpu(tiny_marian, tiny_marian_dir, tmp_path):
    """None: float16 on a GPU (as the decoder always ran there), float32 on the CPU, a float16 checkpoint
    included; the chosen dtype is what the model is put in and what ``paraphrase --dtype`` decodes with."""
    assert model_dtype("cuda", None) == torch.float16
    assert model_dtype("cuda", "bfloat16") == torch.bfloat16 and model_dtype("cuda", "float32") == torch.float32
    assert model_dtype("cpu", None) == torch.float32 == model_dtype("cpu", "float32")
    half = from_objects(copy.deepcopy(tiny_marian.model).to(torch.float16), tiny_marian.tokenizer, "cpu")
    assert half.dtype == "float32"  # (a half-precision checkpoint computes in float32 on the CPU)
    assert tiny_marian.dtype == "float32"
    plain = decode(tiny_marian, ["the cat sat"], None, beam=3, max_length=10)
    assert [
        r.to_json() for r in decode(tiny_marian, ["the cat sat"], None, beam=3, max_length=10, dtype="float32")
    ] == [r.to_json() for r in plain]
    (tmp_path / "in.txt").write_text("the cat sat\n")
    out = tmp_path / "out.jsonl"
    call_command(
        "paraphrase",
        *("--model", str(tiny_marian_dir), "--input", str(tmp_path / "in.txt"), "--output", str(out)),
        *("--beam", "3", "--max-length", "10", "--device", "cpu", "--dtype", "float32"),
    )
    assert [json.loads(line) for line in out.read_text().splitlines()] == [r.to_json() for r in plain]


# --- the default batch follows the device ------------------------------------------------------------


def test_batch_rule_from_free_memory():
    """The rule with given free-memory figures: a power of two <= half the free memory over one sentence's
    bytes, between 1 and 512."""
    # opus-mt-cs-en's shape in float16: 6 decoder layers of width 512, 58,101 tokens, beam 5, 128 tokens
    per = sentence_bytes(layers=6, width=512, vocab=58101, beam=5, max_length=128, value_bytes=2)
    assert per == 2 * 6 * 512 * 2 * 5 * 3 * 128 + 8 * 5 * 58101 * 4  # cache + a step's float32 [beam, V] arrays
    assert 31 * MiB < per < 32 * MiB
    assert batch_for_free_memory(75 * GiB, per) == CUDA_CAP == 512  # an idle 80 GB card: capped
    assert batch_for_free_memory(14 * GiB, per) == 128  # a 16 GB card: 7 GiB / 31.4 MiB = 228 -> 128
    assert batch_for_free_memory(2 * GiB, per) == 32  # 1 GiB / 31.4 MiB = 32.6 -> 32
    assert batch_for_free_memory(1.5 * GiB, per) == 16  # 24.5 -> 16
    assert batch_for_free_memory(10 * MiB, per) == 1  # never less than one sentence
    assert batch_for_free_memory(75 * GiB, per, cap=256) == 256


def test_default_batch_follows_the_device(tiny_marian, monkeypatch):
    options = DecodeOptions(beam=5, max_length=128)
    assert default_batch_size(tiny_marian, options).size == CPU_BATCH == 32
    gpu = types.SimpleNamespace(
        device=torch.device("cuda"),
        model=torch.nn.Linear(2, 2).half(),  # (parameters say the value size: 2 bytes)
        vocab=types.SimpleNamespace(size=58101),
    )
    gpu.model.config = types.SimpleNamespace(decoder_layers=6, d_model=512)
    choice = default_batch_size(gpu, options, free_bytes=14 * GiB)
    assert choice.size == 128 and "14.0 GiB free" in choice.rule and "-> 128" in choice.rule
    assert default_batch_size(gpu, options.replace(beam=20), free_bytes=14 * GiB).size == 32  # more beams, fewer
    # decode with no batch size: the device's (32 on the CPU)
    import generation.decoding as decoding

    sizes = []
    real = decoding.beam_search
    monkeypatch.setattr(
        decoding, "beam_search", lambda m, ids, *a, **kw: sizes.append(ids.shape[0]) or real(m, ids, *a, **kw)
    )
    decode(tiny_marian, [f"the cat {i}" for i in range(40)], None, beam=2, max_length=6)
    assert sizes == [32, 8]


def test_every_decoding_option_is_in_exactly_one_scope():
    """Beam search's, shared, a process's knob or the diverse mode's: declared once on each field, so a new
    option cannot be left out of the lists the commands, the job and the forms derive from them (a field with no
    scope would be offered nowhere, or refused by nothing)."""
    import dataclasses

    from generation.decode_options import SCOPES, DecodeOptions, DiverseOptions
    from jobs.params import field_param

    for cls in (DecodeOptions, DiverseOptions):
        for f in dataclasses.fields(cls):
            assert field_param(f)["scope"] in SCOPES, f"{cls.__name__}.{f.name} has no scope"


def test_the_scoped_lists_are_what_commands_and_jobs_have_always_read():
    from generation.decode_options import BEAM_ONLY, DIVERSE_SHARED, NOT_JOB_OPTIONS

    assert BEAM_ONLY == ("beam", "nbest", "stop", "length_penalty", "avoid_copies")
    assert NOT_JOB_OPTIONS == ("early_stopping", "int8", "rerank_dissimilar", "cuda_graph", "shrink", "fast_step")
    assert DIVERSE_SHARED == ("seed", "max_length", "batch_size", "keep_facts")
