"""The regressor's modules depend on each other one way: no import cycle, not even one hidden in a function-level
import (issue 32: ``embeddings <-> encoder_head -> sts -> regressor`` was one)."""

from pathlib import Path

import scoring
from tests.import_graph import find_cycle, import_graph, imports_of

SCORING = Path(scoring.__file__).resolve().parent
# the encoder, its STS-tuned head, the features and their lexical processes, STS files and the regressor package
SIMILARITY = ("embeddings", "encoder_head", "features", "lexical_processes", "sts", "sts_files")
OWN = (*(f"scoring.similarity.{name}" for name in SIMILARITY), "scoring.regressor")


def _graph() -> dict[str, set[str]]:
    graph = import_graph(SCORING, skip=("migrations", "management"))
    own = {m for m in graph if any(m == o or m.startswith(o + ".") for o in OWN)}
    return {module: graph[module] & own for module in own}


def test_the_encoder_features_sts_and_regressor_modules_import_each_other_one_way():
    graph = _graph()
    assert "scoring.regressor.train" in graph and "scoring.similarity.embeddings" in graph
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)
    # the shared pooling and layer stepping live in the lowest module
    assert not graph["scoring.similarity.embeddings"]
    assert "scoring.similarity.embeddings" in graph["scoring.similarity.encoder_head"]
    assert "scoring.similarity.sts" not in graph["scoring.similarity.encoder_head"]


def test_the_check_sees_a_cycle_through_a_function_level_relative_import():
    hidden = "def f():\n    from ..regressor import spearman\n"
    found = imports_of(hidden, "scoring.similarity.sts", "scoring.")
    assert found == {"scoring.regressor", "scoring.regressor.spearman"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_package_keeps_every_public_name_its_importers_use():
    import scoring.regressor as regressor

    used = (
        "MIN_CANDIDATES MIN_REFERENCES NAME_MAX_LENGTH RECIPES PairsFileError RegressorError RegressorTrainOptions "
        "bootstrap_interval "
        "features_in_batches group_split pairs_file_score reference_batches regressor_load regressor_name_check "
        "regressor_train regressor_train_check select_estimator spearman storage_key training_data "
        "training_data_check"
    ).split()
    assert [name for name in used if not hasattr(regressor, name)] == []
