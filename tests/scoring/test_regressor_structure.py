"""The regressor's modules depend on each other one way: no import cycle, not even one hidden in a function-level
import (issue 32: ``embeddings <-> encoder_head -> sts -> regressor`` was one)."""

import ast
from pathlib import Path

import scoring

SCORING = Path(scoring.__file__).resolve().parent
# the encoder, its STS-tuned head, the features and their lexical processes, STS files and the regressor package
OWN = ("embeddings", "encoder_head", "features", "lexical_processes", "sts", "sts_files", "regressor")


def _module_name(path: Path) -> str:
    parts = path.relative_to(SCORING.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, name: str, *, is_package: bool = False) -> set[str]:
    """Every scoring module the module ``name`` (its ``source``) imports, at any depth of the file (function
    bodies included)."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c.startswith("scoring.") and c != name)
    return found


def _graph() -> dict[str, set[str]]:
    files = [p for p in SCORING.rglob("*.py") if "migrations" not in p.parts and "management" not in p.parts]
    modules = {_module_name(p): p for p in files}
    own = {m for m in modules if m.count(".") and m.split(".")[1] in OWN}
    graph = {}
    for module in own:
        path = modules[module]
        imported = _imports(path.read_text(encoding="utf-8"), module, is_package=path.name == "__init__.py")
        targets = {t for t in imported if t in own}
        # importing a name from a package runs its __init__, so a submodule's import of its own package
        # is not an edge to itself
        graph[module] = {t for t in targets if not module.startswith(t + ".")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_encoder_features_sts_and_regressor_modules_import_each_other_one_way():
    graph = _graph()
    assert "scoring.regressor.train" in graph and "scoring.embeddings" in graph
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    # the shared pooling and layer stepping live in the lowest module
    assert not graph["scoring.embeddings"]
    assert "scoring.embeddings" in graph["scoring.encoder_head"]
    assert "scoring.sts" not in graph["scoring.encoder_head"]


def test_the_check_sees_a_cycle_through_a_function_level_relative_import():
    hidden = "def f():\n    from .regressor import spearman\n"
    assert _imports(hidden, "scoring.sts") == {"scoring.regressor", "scoring.regressor.spearman"}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


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
