"""Low-rank adapters for the rewriter (issue 47): ``train_rewriter --base-model M --lora-rank R`` trains LoRA
adapters on a tiny random Llama-shaped base built here (no download), checkpoints only the adapters, resumes
as itself, and exports an adapter folder of its own (no copy of the base's weights) that ``paraphrase`` and
``load_model`` decode on top of the base, exactly as the merged model does."""

from __future__ import annotations

import json
import shutil
from io import StringIO

import pytest
import torch
from django.core.management import CommandError, call_command

from generation import rewriter
from generation.decoding import load_model
from generation.model_source import is_adapter_folder

from .causal_models import save_chat_model, train_rewriter_cli, write_pairs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return save_chat_model(tmp_path_factory.mktemp("base_llama") / "m", "llama")


def _common(tmp_path, llama_dir, out) -> list[str]:
    pairs = write_pairs(tmp_path / "pairs.tsv")
    return [
        "--pairs", str(pairs), "--out", str(out), "--base-model", str(llama_dir), "--batch-size", "4",
        "--threads", "1", "--warmup", "2", "--lr", "0.01", "--lora-rank", "4",
    ]  # fmt: skip


def test_adapters_train_resume_and_export_a_few_weights_that_decode_as_the_merged_model(tmp_path, llama_dir):
    out = tmp_path / "run"
    common = _common(tmp_path, llama_dir, out)
    first = train_rewriter_cli(*common, "--steps", "6", "--stop-after", "3", "--checkpoint-every", "3")
    assert not first["exported"]
    # a checkpoint keeps the adapters, not the base: far smaller than the base's weights
    state = torch.load(rewriter.latest_checkpoint(out) / "state.pt", weights_only=False)
    assert state["model"] and all("lora_" in k for k in state["model"])
    assert state["meta"]["lora"] == {"rank": 4, "alpha": 8.0, "dropout": 0.05}
    # resumed as itself, it goes on from step 3 and exports
    done = train_rewriter_cli(*common, "--steps", "6", "--checkpoint-every", "3")
    assert done["exported"] and done["step"] == 6
    assert is_adapter_folder(out) and not (out / "model.safetensors").exists()
    info = json.loads((out / "paraforge_training.json").read_text())
    assert info["base_model"] == str(llama_dir) and info["model"]["lora"]["rank"] == 4
    assert 0 < info["model"]["trained_parameters"] < info["model"]["parameters"] / 5

    # load_model merges the adapter into its base: greedy decoding equals the unmerged peft model's
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    loaded = load_model(out, device="cpu")
    assert loaded.causal and loaded.prompt.name == "paraphrase-chat"
    base = AutoModelForCausalLM.from_pretrained(str(llama_dir), dtype=torch.float32)
    unmerged = PeftModel.from_pretrained(base, str(out)).eval()
    ids = loaded.tokenizer(["the cat sat on the mat"], return_tensors="pt")
    with torch.no_grad():
        a = loaded.model.generate(**ids, max_new_tokens=8, do_sample=False)
        b = unmerged.generate(**ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(a, b)
    # and the adapter changed what the base says (the test would pass on an untrained adapter otherwise)
    plain = AutoModelForCausalLM.from_pretrained(str(llama_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        logits_base = plain(**ids).logits
        logits_adapted = loaded.model(**ids).logits
    assert not torch.allclose(logits_base, logits_adapted)

    # shipped without the base's tokenizer (the packaged paraphraser leaves it out), it reads the base's
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors", "paraforge_training.json"):
        shutil.copy(out / name, shipped / name)
    again = load_model(shipped, device="cpu")
    with torch.no_grad():
        assert torch.equal(again.model.generate(**ids, max_new_tokens=8, do_sample=False), a)


def test_paraphrase_decodes_an_adapter_folder_on_top_of_its_base(tmp_path, llama_dir):
    out = tmp_path / "run"
    train_rewriter_cli(*_common(tmp_path, llama_dir, out), "--steps", "2", "--checkpoint-every", "2")
    (tmp_path / "in.txt").write_text("the cat sat on the mat\n")
    got = tmp_path / "out.jsonl"
    call_command(
        "paraphrase", "--model", str(out), "--input", str(tmp_path / "in.txt"), "--output", str(got),
        "--beam", "2", "--max-length", "8", "--device", "cpu", stderr=StringIO(),
    )  # fmt: skip
    row = json.loads(got.read_text().splitlines()[0])
    assert row["outputs"] and not row["unsatisfiable"]
    # a generation job takes the adapter folder as its model too (the web's picker offers the packaged one):
    # a decoder-only model by its base, fingerprinted by its adapter and its base together
    from generation.generation_job.params import GenerationSettingsError, check_model_folder
    from generation.model_source import model_fingerprint

    assert check_model_folder(str(out)) is True
    assert model_fingerprint(str(out)) != model_fingerprint(str(llama_dir))
    # and the diverse mode's memory estimate reads the base's shape, with the adapter's weights added
    from generation.generation_job.budget import model_shape

    (base_weights, *base_shape), (weights, *shape) = model_shape(llama_dir), model_shape(out)
    assert shape == base_shape and weights > base_weights
    (out / "paraforge_training.json").write_text(json.dumps({"base_model": str(tmp_path / "gone")}))
    with pytest.raises(GenerationSettingsError, match="its base model"):
        check_model_folder(str(out))


def test_an_adapter_run_is_refused_without_a_base_and_resumed_only_with_its_own_rank(tmp_path, llama_dir):
    pairs = write_pairs(tmp_path / "pairs.tsv")
    with pytest.raises(CommandError, match="--lora-rank trains adapters on a pretrained --base-model"):
        train_rewriter_cli("--pairs", str(pairs), "--out", str(tmp_path / "x"), "--lora-rank", "4")
    with pytest.raises(CommandError, match="--lora-alpha needs --lora-rank"):
        train_rewriter_cli(
            "--pairs", str(pairs), "--out", str(tmp_path / "x"), "--base-model", str(llama_dir), "--lora-alpha", "8"
        )
    out = tmp_path / "run"
    common = _common(tmp_path, llama_dir, out)
    train_rewriter_cli(*common, "--steps", "4", "--stop-after", "1", "--checkpoint-every", "1")
    with pytest.raises(CommandError, match="holds checkpoints trained with adapters .*rank.*: 4.*give the same"):
        train_rewriter_cli(*[a if a != "4" else "8" for a in common], "--steps", "4")
    # every weight, on the same folder, is another run too
    no_lora = common[: common.index("--lora-rank")]
    with pytest.raises(CommandError, match="not none \\(every weight\\)|trained with adapters"):
        train_rewriter_cli(*no_lora, "--steps", "4")


def test_an_adapter_export_names_its_base_as_given_and_keeps_the_folders_readme(tmp_path, monkeypatch):
    """The adapter of a base given as a GGUF file (converted into a cache folder) names the file, as the run was
    given it, not the cache folder's absolute path on the training machine; peft's model-card template does not
    replace the README kept in the export folder (the packaged paraphraser's)."""
    from .tiny_gguf import write_tiny_gguf

    monkeypatch.setenv("PARAFORGE_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    gguf = write_tiny_gguf(tmp_path / "tiny-f32.gguf")
    out, dest = tmp_path / "run", tmp_path / "adapter"
    dest.mkdir()
    (dest / "README.md").write_text("ours\n")
    pairs = write_pairs(tmp_path / "pairs.tsv")
    done = train_rewriter_cli(
        "--pairs", str(pairs), "--out", str(out), "--base-model", str(gguf), "--prompt-template", "paraphrase-plain",
        "--batch-size", "4", "--threads", "1", "--warmup", "1", "--lora-rank", "2", "--steps", "2",
        "--export", str(dest),
    )  # fmt: skip
    assert done["exported"]
    config = json.loads((dest / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(gguf)
    assert (dest / "README.md").read_text() == "ours\n"
    assert load_model(dest, device="cpu").causal  # found again through the name it records
