"""``paraphrase`` of a few sentences decodes on one CPU thread (issue 37: two sentences took 3-8 s on two threads of
a busy 2-core machine, 0.3 s on one: OpenMP's hand-offs cost more than a step's operations on so few rows); a big
input, a GPU, or threads the user chose keep torch's default."""

from __future__ import annotations

import pytest

from generation.management.commands.paraphrase import ONE_THREAD_ROWS, small_input_threads

from .test_paraphrase_cli import _run


@pytest.fixture
def no_thread_variables(monkeypatch):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)


def test_one_thread_only_for_a_small_cpu_decoding_the_user_left_to_us(no_thread_variables, monkeypatch):
    assert small_input_threads(2, 4, "cpu") == 1
    assert small_input_threads(ONE_THREAD_ROWS // 5, 5, "cpu") == 1
    assert small_input_threads(ONE_THREAD_ROWS, 5, "cpu") is None  # enough rows for threads to pay
    assert small_input_threads(2, 4, "cuda") is None
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert small_input_threads(2, 4, "cpu") is None


def test_two_sentences_are_decoded_on_one_thread(tmp_path, tiny_marian_dir, no_thread_variables):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rows = _run(tmp_path, tiny_marian_dir, ["one line", "two"], None, "--beam", "4")
        assert len(rows) == 2
        assert torch.get_num_threads() == 1  # what the command set for its decoding
    finally:
        torch.set_num_threads(before)
