"""``manage.py paraphrase``: output shape and order, constraint files, errors."""
from __future__ import annotations

import json
import re

import pytest
from django.core.management import CommandError, call_command


def _run(tmp_path, model_dir, lines, constraints=None, *extra):
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["--model", str(model_dir), "--input", str(inp), "--output", str(out), "--beam", "3", "--nbest", "2",
            "--max-length", "16", "--device", "cpu", *extra]
    if constraints is not None:
        cf = tmp_path / "c.jsonl"
        cf.write_text("\n".join(constraints) + "\n")
        args += ["--constraints", str(cf)]
    call_command("paraphrase", *args)
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_cli_shape_and_order(tmp_path, tiny_marian_dir):
    lines = ["How often do earthquakes occur?\tHow often do earthquakes occur?", "the cat sat", "a b"]
    cons = [json.dumps({"system": 18, "name": "x", "positive": [["today"]], "negative": [["often"], ["earthquakes"]],
                        "bos_avoid": []}), json.dumps({"positive": [], "negative": [["the"]], "bos_avoid": [["a"]]}),
            "{}"]
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
