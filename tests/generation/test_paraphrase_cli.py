"""``manage.py paraphrase``: output shape and order, constraint files, errors."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command


def _run(tmp_path, model_dir, lines, constraints=None, *extra, stderr=None):
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    args = [
        "--model",
        str(model_dir),
        "--input",
        str(inp),
        "--output",
        str(out),
        "--beam",
        "3",
        "--nbest",
        "2",
        "--max-length",
        "16",
        "--device",
        "cpu",
        *extra,
    ]
    if constraints is not None:
        cf = tmp_path / "c.jsonl"
        cf.write_text("\n".join(constraints) + "\n")
        args += ["--constraints", str(cf)]
    call_command("paraphrase", *args, stderr=stderr)
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_cli_shape_and_order(tmp_path, tiny_marian_dir):
    lines = ["How often do earthquakes occur?\tHow often do earthquakes occur?", "the cat sat", "a b"]
    cons = [
        json.dumps(
            {
                "system": 18,
                "name": "x",
                "positive": [["today"]],
                "negative": [["often"], ["earthquakes"]],
                "bos_avoid": [],
            }
        ),
        json.dumps({"positive": [], "negative": [["the"]], "bos_avoid": [["a"]]}),
        "{}",
    ]
    rows = _run(tmp_path, tiny_marian_dir, lines, cons)
    assert [r["source"] for r in rows] == ["How often do earthquakes occur?", "the cat sat", "a b"]
    for r in rows:
        assert set(r) >= {"source", "outputs", "unsatisfiable"}
        assert r["unsatisfiable"] is False and 1 <= len(r["outputs"]) <= 2
        for o in r["outputs"]:
            assert set(o) == {"text", "tokens", "score", "satisfied"} and o["satisfied"] is True
            assert isinstance(o["score"], float) and o["score"] <= 0
    w0 = [re.findall(r"\w+", o["text"]) for o in rows[0]["outputs"]]
    assert all("today" in w and "often" not in w and "earthquakes" not in w for w in w0)
    assert all(re.findall(r"\w+", o["text"])[:1] != ["a"] for o in rows[1]["outputs"])


def test_cli_unconstrained(tmp_path, tiny_marian_dir):
    rows = _run(tmp_path, tiny_marian_dir, ["one line", "two"])
    assert len(rows) == 2 and all(len(r["outputs"]) == 2 for r in rows)


def test_cli_errors(tmp_path, tiny_marian_dir):
    with pytest.raises(CommandError, match="does not exist"):
        _run(tmp_path, tmp_path / "nope", ["x"])
    with pytest.raises(CommandError, match="2 constraint lines for 1 input"):
        _run(tmp_path, tiny_marian_dir, ["x"], ["{}", "{}"])
    with pytest.raises(CommandError, match="line 2: malformed JSON"):
        _run(tmp_path, tiny_marian_dir, ["x", "y"], ["{}", "{oops"])
    with pytest.raises(CommandError, match="--batch-size must be at least 1"):
        _run(tmp_path, tiny_marian_dir, ["x"], None, "--batch-size", "0")
    with pytest.raises(CommandError, match="--max-length must be at least 2"):
        _run(tmp_path, tiny_marian_dir, ["x"], None, "--max-length", "1")


def test_cli_stop_rule(tmp_path, tiny_marian_dir):
    """``--stop`` reaches the decoder: every rule's outputs obey the constraints; an unknown one is refused."""
    cons = [json.dumps({"positive": [["today"], ["cat"]], "negative": [["often"]]})] * 2
    for rule in ("auto", "beam", "nbest"):
        for r in _run(tmp_path, tiny_marian_dir, ["how often", "the cat sat"], cons, "--stop", rule):
            assert r["unsatisfiable"] is False and r["outputs"]
            assert all({"today", "cat"} <= set(re.findall(r"\w+", o["text"])) for o in r["outputs"])
    with pytest.raises(CommandError, match="--stop: invalid choice: 'first'"):
        _run(tmp_path, tiny_marian_dir, ["x"], None, "--stop", "first")


def test_cli_int8(tmp_path, tiny_marian_dir):
    """``--int8`` decodes on the CPU with int8 weights (constraints still hold); it refuses a GPU."""
    from generation.decoding import fast_step

    if not fast_step.int8_linear_works():
        pytest.skip("this torch has no quantized x86 engine")
    cons = [json.dumps({"positive": [["today"]], "negative": [["often"]]})] * 2
    for r in _run(tmp_path, tiny_marian_dir, ["how often", "the cat sat"], cons, "--int8"):
        assert r["unsatisfiable"] is False and r["outputs"]
        assert all(
            "today" in re.findall(r"\w+", o["text"]) and "often" not in re.findall(r"\w+", o["text"])
            for o in r["outputs"]
        )
    with pytest.raises(CommandError, match="--int8 runs on the CPU only"):
        _run(tmp_path, tiny_marian_dir, ["x"], None, "--int8", "--device", "cuda")


def test_bad_constraint_value_names_its_line_before_the_model_loads(tmp_path):
    with pytest.raises(CommandError, match=r"c.jsonl: line 2: 'positive' must be a list of phrases"):
        _run(tmp_path, tmp_path / "no-model-needed-yet", ["x", "y"], ["{}", '{"positive": "often"}'])
    with pytest.raises(CommandError, match=r"line 1: 'negative': empty phrase"):
        _run(tmp_path, tmp_path / "no-model-needed-yet", ["x"], ['{"negative": [["?"]]}'])


@pytest.mark.slow
def test_blocks_are_written_in_order_with_progress(tmp_path, tiny_marian_dir):
    from generation.management.commands.paraphrase import BLOCK_BATCHES

    n = BLOCK_BATCHES + 4  # --batch-size 1: two blocks
    lines = [f"line {i} the cat" for i in range(n)]
    err = io.StringIO()
    rows = _run(tmp_path, tiny_marian_dir, lines, None, "--batch-size", "1", stderr=err)
    assert [r["source"] for r in rows] == lines
    progress = err.getvalue().splitlines()
    assert progress[0].startswith(f"{BLOCK_BATCHES}/{n} inputs decoded")
    assert progress[-1].startswith(f"{n} inputs decoded, 0 unsatisfiable")


def test_interrupted_run_leaves_the_old_output_and_no_partial_file(tmp_path, tiny_marian_dir, monkeypatch):
    import generation.decoding as decoding

    real, calls = decoding.decode, []

    def interrupted(*a, **kw):  # Ctrl-C during the second block
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(decoding, "decode", interrupted)
    (tmp_path / "out.jsonl").write_text("earlier run\n")
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, tiny_marian_dir, ["a b c"] * 40, None, "--batch-size", "2")
    assert (tmp_path / "out.jsonl").read_text() == "earlier run\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out")) == ["out.jsonl"]
