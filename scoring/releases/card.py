"""What a release says about itself: its licence, its provenance by name, and the ``README.md`` card every release
carries (the Hugging Face hub reads its YAML header; a person reads the rest).

Licence: an SPDX identifier (``CC-BY-4.0``, ``Apache-2.0``, ``LicenseRef-my-terms`` for terms of your own),
checked against ``SPDX_LICENSES`` (``infra.licences``, which also says what a corpus's terms allow) and written in
SPDX's own case; the Hugging Face licence ids people know
(``cc-by-4.0``, ``odc-by``) are taken too. None given is ``NOASSERTION``, SPDX's word for "no licence is stated",
and the card, the manifest and the export's output say so in words: nobody may take a release without a
licence for one they may redistribute. The card's YAML header carries the hub's id for it (``unknown`` for
NOASSERTION, ``other`` with a ``license_name`` for a LicenseRef).

Provenance by name: a release travels, a path on the exporting machine means nothing elsewhere and tells
strangers how that machine is laid out. ``local_name`` turns a local path into a name (a Hugging Face cache
snapshot into ``org/name@revision``, a folder inside Paraforge into its path from the project root, anything
else into its last component), and ``without_local_paths`` applies it to every string of the manifest.

The card is built from the manifest alone, so it is as reproducible as the manifest (no date, no path).

Why one module of over 600 lines: the card is one document, and each of its sections (loading, layout,
calibration, trust, limitations, screening, provenance, whose judgments) is a short function of the manifest
that reads the same keys as its neighbours; split apart, a reader checking what the card promises would open
several files for one page.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from infra.licences import NO_LICENSE, SPDX_LICENSES, license_check, license_conflict  # noqa: F401 (re-exported)
from infra.local_paths import is_local_path, local_name, without_local_paths  # noqa: F401 (used here and re-exported)
from scoring.regressor.held_out import (
    SIMILAR_AT,
    calibration_of,
    calibration_table_cells,
    calibration_title,
    cv_rho,
    held_out_rho,
    percent,
    score_calibration_of,
)
from scoring.releases.columns import PARABANK2, PARABANK2_PARAPHRASES, PARAFORGE
from scoring.releases.filters import NEAR_COPY_EDITS

CARD_FILE = "README.md"
LICENSE_HELP = (
    "the release's licence, an SPDX id such as CC-BY-4.0, CC-BY-SA-4.0, CC-BY-NC-4.0, CC0-1.0, ODC-By-1.0 or "
    "Apache-2.0, or LicenseRef-NAME for terms of your own; it must allow what the corpus's, the model's and your "
    f"annotators' terms allow (default {NO_LICENSE}: no licence stated, said so on the card)"
)


def hub_license(spdx: str) -> dict[str, str]:
    """The card header's licence keys for the Hugging Face hub."""
    if spdx.startswith("LicenseRef-"):
        return {"license": "other", "license_name": spdx.removeprefix("LicenseRef-").lower()}
    return {"license": SPDX_LICENSES[spdx]}


# --- provenance by name: infra.local_paths (the admin names a campaign's model the same way) -------------

# --- the card -------------------------------------------------------------------------------------------

PARABANK_BIBTEX = """@inproceedings{hu2019parabank,
  title     = {{ParaBank}: Monolingual Bitext Generation and Sentential Paraphrasing via
               Lexically-constrained Neural Machine Translation},
  author    = {Hu, J. Edward and Rudinger, Rachel and Post, Matt and Van Durme, Benjamin},
  booktitle = {Proceedings of the AAAI Conference on Artificial Intelligence},
  volume    = {33},
  pages     = {6521--6528},
  year      = {2019},
  doi       = {10.1609/aaai.v33i01.33016521}
}"""


def size_category(n: int) -> str:
    """The hub's ``size_categories`` value for ``n`` rows."""
    bounds = [
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
        (100_000_000, "10M<n<100M"),
        (1_000_000_000, "100M<n<1B"),
        (10_000_000_000, "1B<n<10B"),
        (100_000_000_000, "10B<n<100B"),
        (1_000_000_000_000, "100B<n<1T"),
    ]
    return next((label for limit, label in bounds if n < limit), "n>1T")


def _fence(text: str, info: str = "") -> str:
    """``text`` in a Markdown code block whose fence no backtick run inside it can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _code(text: Any) -> str:
    """Inline code for a short value (names come from users: backticks cannot break out)."""
    text = str(text).replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}" if longest else f"`{text}`"


def _cell(text: Any) -> str:
    """A Markdown table cell: no line breaks, no column separator."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)


def license_text(spdx: str) -> str:
    """The card's licence paragraph (the job result page shows its first sentence)."""
    if spdx == NO_LICENSE:
        return (
            f"**No licence was given** when this release was exported (SPDX `{NO_LICENSE}`). Nobody may assume a "
            "right to use or redistribute it: ask its maker, who must choose a licence that the terms of the "
            "corpus, the model and the annotators' consent allow, and export it again with `--license`."
        )
    return (
        f"**{spdx}** (SPDX identifier), as chosen by the release's maker, who is responsible for it being "
        "compatible with the terms of the corpus the references come from, of the model that wrote the "
        "paraphrases, and of the annotators' consent."
    )


def _loading(fmt: str, files: dict[str, str], layout: str = PARAFORGE) -> list[str]:
    """How to read the files, run from this folder with what Paraforge installs (pyarrow, Python's csv, gzip and
    json), then the optional readers (``datasets``, ``pandas``: not installed with Paraforge) and how to get
    them. Issue 48: the card said the release loads with ``datasets.load_dataset`` and showed pandas, neither of
    which a quick start has."""
    pairs, judgments = files["pairs"], files["judgments"]
    read_judgments = [
        f'with gzip.open("{judgments}", "rt", encoding="utf-8", newline="") as fh:',
        '    judgments = list(csv.DictReader(fh, delimiter="\\t", quoting=csv.QUOTE_NONE))',
    ]
    if layout == PARABANK2:  # no header, and lines of different lengths: read it as rows of cells
        code = [
            "import csv, gzip",
            f'with gzip.open("{pairs}", "rt", encoding="utf-8", newline="") as fh:',
            '    lines = list(csv.reader(fh, delimiter="\\t", quoting=csv.QUOTE_NONE))',
            "# each line: score, reference, paraphrase 1 (the best), paraphrase 2, ... (at most 5)",
            *read_judgments,
        ]
        optional = f'pandas.read_csv("{judgments}", sep="\\t", quoting=csv.QUOTE_NONE, keep_default_na=False)'
    elif fmt == "parquet":
        code = [
            "import pyarrow.parquet as pq",
            f'pairs = pq.read_table("{pairs}").to_pylist()  # a dict per pair',
            f'judgments = pq.read_table("{judgments}").to_pylist()',
        ]
        optional = (
            'datasets.load_dataset("path/to/this/folder", "pairs", split="train") (the `judgments` configuration '
            f'likewise), or pandas.read_parquet("{pairs}")'
        )
    else:
        if fmt == "jsonl":
            read_pairs = [
                "import csv, gzip, json",
                f'with gzip.open("{pairs}", "rt", encoding="utf-8") as fh:',
                "    pairs = [json.loads(line) for line in fh]  # one object per reference",
            ]
            optional = f'pandas.read_json("{pairs}", lines=True)'
        else:
            read_pairs = [
                "import csv, gzip",
                f'with gzip.open("{pairs}", "rt", encoding="utf-8", newline="") as fh:',
                '    pairs = list(csv.DictReader(fh, delimiter="\\t", quoting=csv.QUOTE_NONE))  # a dict per pair',
            ]
            optional = f'pandas.read_csv("{pairs}", sep="\\t", quoting=csv.QUOTE_NONE, keep_default_na=False)'
        code = [*read_pairs, *read_judgments]
    reader = (
        "pyarrow (installed with Paraforge)"
        if fmt == "parquet" and layout != PARABANK2
        else "Python's standard library"
    )
    return [
        f"Read it with {reader}, from this folder:",
        "",
        "```python",
        *code,
        "```",
        "",
        f"Optional, with packages that do not come with Paraforge (`pip install datasets pandas`): `{optional}`.",
    ]


def _layout(layout: str) -> list[str]:
    """What the parabank2 layout is, for a reader who knows ParaBank 2's files (nothing for Paraforge's own)."""
    if layout != PARABANK2:
        return []
    return [
        "",
        f"The pairs are laid out as ParaBank 2's TSV (Hu et al., CoNLL 2019): a line per reference, no header, "
        f"holding a score, the reference and its paraphrases, at most {PARABANK2_PARAPHRASES}, best first: a diverse "
        "resource's outputs in rank order (rank 1 first), other resources' pairs by predicted similarity, highest "
        "first. The score is the first paraphrase's `score` (0-100, calibrated as the paraforge layout's when the "
        "regressor has a calibration map: see below; empty: it has none), not a score of the reference. Each "
        "paraphrase's own score and raw score, systems, constraints and caveat are in a release of the paraforge "
        "layout.",
    ]


def _calibrated_scores(manifest: dict[str, Any]) -> list[str]:
    """What the pairs' ``score`` is: ``raw_score`` through the regressor's calibration map (fitted on how many
    held-out pairs of which campaign, and what a calibrated score means), or the raw prediction and why."""
    calibration = manifest.get("calibration") or {}
    if not calibration.get("applied"):
        reason = (
            f"the regressor's held-out part had only {calibration.get('pairs') or 0:,} pairs, fewer than the "
            f"{calibration.get('min_pairs')} a calibration map needs. Judge more pairs, train it again"
            if calibration.get("status") == "too_few_pairs"
            else "the regressor was trained before Paraforge kept a calibration map. Train it again"
        )
        campaign, name = calibration.get("campaign") or "CAMPAIGN", manifest["regressor"]["name"]
        retrain = _code(f"train_regressor {campaign} --name {name} --replace")
        rescore = _code(f"score_resource {manifest['resource']} --regressor {name} --wait")
        return [
            f"**The scores are not calibrated.** `score` is the regressor's raw prediction (the same as `raw_score`), "
            f"not an estimate of human similarity: {reason} ({retrain}, with the settings of its signature below), "
            f"score the resource with it again ({rescore}) and export again for calibrated scores.",
            "",
        ]
    campaign = f" of campaign {_code(calibration['campaign'])}" if calibration.get("campaign") else ""
    references = f" ({calibration['n_references']:,} references)" if calibration.get("n_references") else ""
    target = (
        "the bias-corrected human similarity (`--target zscore`)"
        if calibration.get("target") == "zscore"
        else "the mean human similarity"
    )
    return [
        f"**Calibrated scores.** `score` is the regressor's prediction (`raw_score`) mapped through a calibration "
        f"fitted on {calibration['pairs']:,} held-out pairs{references}{campaign}: an isotonic regression (monotone, "
        f"increasing) of {target} on the predicted score. A calibrated score is the expected mean human similarity "
        "(0-100) of pairs predicted like this one: held-out pairs the map gives 70 were judged 70 on average. "
        "Being monotone, it keeps the pairs' order; pairs on one step of the map share a score (and are ordered by "
        "`raw_score`). `--min-score` (`score=`), `rerank=score`, `top` and the parabank2 layout act on `score`, "
        "the calibrated value. Its breakpoints are in `manifest.json` (`regressor.metrics.calibration_map`); it was "
        "fitted with the model fitted on the train part, and the deployed model is refit on every judged pair, so "
        "it is an estimate for the recipe, like the rho.",
        "",
    ]


def _trust(manifest: dict[str, Any]) -> list[str]:
    """The held-out rho with its n, interval and warning, what the scores are (calibrated or raw), and the
    calibration table."""
    regressor = manifest["regressor"]
    metrics = regressor.get("metrics") or {}
    rho, cv = held_out_rho(metrics), cv_rho(metrics)
    applied = (manifest.get("calibration") or {}).get("applied")
    predicted = "`raw_score`" if applied else "`score`"
    lines = [
        "## How far to trust the scores",
        "",
        f"{predicted} is predicted by the similarity regressor {_code(regressor['name'])}, trained on human judgments "
        "and tested once on references it never saw (its split keeps a reference's pairs together). Held-out "
        f"Spearman's rho between predicted and human similarity: **{rho.text()}**."
        + (
            f" Over every reference, by nested cross-validation ({metrics.get('cv_folds')} folds by reference; "
            f"the estimator chosen and fitted without the fold it predicts): **{cv.text()}**."
            if cv is not None
            else ""
        ),
        "",
        *_calibrated_scores(manifest),
    ]
    if rho.warning():
        lines += [f"> **Warning.** {rho.warning()}", ""]
    calibration = calibration_of(metrics)
    if calibration is None:
        lines += [
            "The calibration (how often pairs above a score were judged similar) was not kept for this regressor: "
            "it was trained before Paraforge kept it. Train it again to get the table.",
            "",
        ]
        return lines
    score_map = score_calibration_of(metrics) if applied else None
    lines += [
        f"**{calibration_title(score_map)}.** "
        + ("" if applied else "This table is not a calibration: the scores above are the raw predictions. ")
        + f"A held-out pair counts as *judged similar* when its mean human similarity is at least "
        f"{calibration.similar_at:g} of 100. Of the regressor's {calibration.pairs:,} held-out pairs, "
        f"{calibration.similar:,} ({percent(calibration.base_rate)}) were. For each cut on the predicted score"
        + (" (`raw_score`, with the calibrated `score` it maps to):" if applied else ":"),
        "",
    ]
    header, rows = calibration_table_cells(calibration, score_map)
    align = ["---" if h.startswith("precision") else "---:" for h in header]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    lines += [
        "",
        f"Read a row as: keeping the pairs with {predicted} at or above the cut"
        + (
            " (`--min-score` at the `score` beside it keeps them, and any pair on the same step of the map)"
            if applied
            else ""
        )
        + ", about *precision* of them would be judged similar by people, and about *similar pairs kept* of the "
        "pairs people find similar are kept (measured on the held-out references, interval by Wilson's method). "
        "The deployed regressor was refit on every judged pair, so these are estimates for the recipe, like the rho.",
        "",
    ]
    return lines


def _limitations(manifest: dict[str, Any]) -> list[str]:
    counts, provenance = manifest["counts"], manifest.get("provenance") or {}
    filters = manifest.get("filters") or {}
    metrics = manifest["regressor"].get("metrics") or {}
    corpus = provenance.get("corpus") or {}
    training = (manifest["regressor"].get("signature") or {}).get("campaign")
    n_fit = metrics.get("n_fit_final") or (metrics.get("n_train", 0) + metrics.get("n_test", 0)) or None
    copies = counts.get("copies_read", 0)
    kept = "kept (`--keep-copies`)" if filters.get("keep_copies") else "left out"
    lines = [
        "## Limitations",
        "",
        "- The scores are predictions, not judgments: a regressor"
        + (f" trained on {n_fit:,} judged pairs" if n_fit else "")
        + (f" of campaign {_code(training)}" if training else "")
        + " estimates each pair's similarity from lexical and embedding features. It can be confidently wrong, "
        "most of all on pairs unlike those it was trained on (other lengths, domains or systems).",
        f"- Calibration and rho come from the training campaign's held-out references; a resource from another "
        f"corpus or model may differ. Judged similar means a mean of at least {SIMILAR_AT:g} of 100, not an "
        "exact paraphrase.",
        f"- {counts.get('pairs_unscored', 0):,} released pair(s) have no score; their `caveat` says why: a "
        "non-word kept, a reference longer than any the regressor was trained on "
        f"({counts.get('long_reference_pairs', 0):,} pair(s)), or one the regressor skipped.",
        f"- {copies:,} paraphrase(s) identical to their reference (same text after Unicode NFKC, case folding and "
        + (
            f"whitespace collapsing) and {counts['near_copies_read']:,} near-copies (the same once punctuation is "
            f'dropped too, or {NEAR_COPY_EDITS} character apart: "A Women is eating" for "A woman is eating.") '
            f"were {kept}. Paraphrases a word or more from their reference remain; the overlap and BLEU filters "
            "remove more."
            if "near_copies_read" in counts  # releases made before near-copies were screened lack the count
            else f"whitespace collapsing) were {kept}. Near-copies were not screened in this release."
        ),
        '- Slips the non-word screen cannot see stay in: every word of "The cats is eating" is a word, so a '
        "wrong number, tense or agreement passes, and the regressor scores meaning, not grammar. Check the "
        "pairs you keep (or filter by `gm`-judged fluency where you have judgments) before training on them.",
        "- The paraphrases are machine output of "
        + (
            "sampling under negative constraints"
            if (manifest.get("generation") or {}).get("diverse")
            else "lexically constrained decoding"
        )
        + ": they can be ungrammatical, "
        "change the meaning, or repeat words. Fluency was judged only for the judged sample (`gm` in the "
        "judgments), not predicted for every pair.",
        f"- The references are the English side of corpus {_code(corpus.get('name', manifest['resource']))}"
        + (f" ({corpus['origin']})" if corpus.get("origin") else "")
        + f", under {_code(corpus.get('license') or NO_LICENSE)}"
        + (f" ({corpus['terms']})" if corpus.get("terms") else "")
        + ": its terms bind the release, and its domain, its errors and its biases carry over, as do the model's.",
        "- The judgments come from a small number of anonymised workers (numbered per campaign); their scores "
        "vary by person, and a worker's number means nothing across campaigns.",
    ]
    return lines + [""]


def _corpus_details(corpus: dict[str, Any]) -> str:
    """The provenance table's cell of the corpus: where its sentences come from, under which terms, which file."""
    parts = [corpus["origin"]] if corpus.get("origin") else []
    parts.append(f"licence {_code(corpus.get('license') or NO_LICENSE)}")
    if corpus.get("terms"):
        parts.append(corpus["terms"])
    if corpus.get("source"):
        parts.append(f"imported from {_code(corpus['source'])}")
    return "; ".join(parts)


def _screen(manifest: dict[str, Any]) -> list[str]:
    """What the release left out or marked as a HIT batch would (``generation.screening``), in words."""
    screen, counts = manifest.get("screen") or {}, manifest["counts"]
    if not screen:
        return []
    kept = (manifest.get("filters") or {}).get("keep_non_words")
    if screen.get("vocabulary") is None:
        said = f"Paraphrases were not screened for non-words: {screen.get('note')}."
    else:
        said = (
            f"**Non-words.** As in the HIT batches, {screen['non_word_rule']} (here: {screen['vocabulary']}). "
            f"The {counts.get('non_words_read', 0):,} such pair(s) were "
            + (
                "kept (`--keep-non-words`), each with an empty `score` and the `caveat` `non_words`: the regressor "
                "never saw a non-word, so its score would mean nothing."
                if kept
                else "left out, as the HIT batches leave them out (`--keep-non-words` keeps them, marked)."
            )
        )
    return [
        said,
        "",
        f"References longer than {screen.get('length_limit')} tokens (the longest the regressor was trained on) "
        "keep their pairs with an empty `score` and the `caveat` `long_reference`.",
        "",
    ]


def _model_details(model: dict[str, Any]) -> str:
    """The weights' SHA-256; for a model converted from a GGUF file, also the file, its name and its licence."""
    parts = [f"weights SHA-256 `{model['weights_sha256']}`"] if model.get("weights_sha256") else []
    origin = model.get("origin") or {}
    if origin:
        parts.append(
            f"converted from GGUF `{origin.get('file')}` (SHA-256 `{origin.get('sha256')}`; "
            f"{origin.get('architecture')} {origin.get('name') or ''})".replace(" )", ")")
        )
        licence = origin.get("license_name") or origin.get("license") or "none stated"
        files = ", ".join(f"`{f}`" for f in origin.get("licence_files") or ())
        parts.append(f"model licence: **{licence}**" + (f" (with its terms: {files})" if files else ""))
    return "; ".join(parts)


def _provenance(manifest: dict[str, Any]) -> list[str]:
    provenance = manifest.get("provenance") or {}
    corpus, model = provenance.get("corpus") or {}, provenance.get("model") or {}
    regressor = provenance.get("regressor") or {}
    prompt = (manifest.get("generation") or {}).get("prompt_template") or {}  # a decoder-only model's
    rows = [
        ("corpus", corpus.get("name"), _corpus_details(corpus)),
        (
            "paraphrase model",
            model.get("name"),
            _model_details(model),
        ),
        ("prompt template", prompt.get("name"), _code(prompt["text"]) if prompt.get("text") else ""),
        ("IDF table", provenance.get("idf_table"), ""),
        ("PPDB", provenance.get("ppdb"), ""),
        (
            "similarity regressor",
            regressor.get("name"),
            f"`{regressor['signature']}`" if regressor.get("signature") else "",
        ),
        ("regressor's training campaign", regressor.get("campaign"), ""),
        ("regressor's sentence encoder", regressor.get("encoder"), ""),  # issue 41: which one scored the pairs
    ]
    lines = ["## Provenance", "", "| what | name | details |", "|---|---|---|"]
    lines += [f"| {what} | {_code(name)} | {_cell(details)} |" for what, name, details in rows if name]
    lines += [
        "",
        "Judgments from campaign(s) "
        + (", ".join(_code(c) for c in manifest["campaigns"]) or "none")
        + ": every verified judgment of the campaigns that evaluated this resource's generation job and of the "
        "regressor's training campaign.",
        "",
    ]
    return lines


def _whose_judgments(manifest: dict[str, Any]) -> list[str]:
    """Which judgments the release ships, in plain words (issue 48: a diverse release's card was easy to read
    as if people had judged its pairs): ``score`` is the regressor's, never a person's; each campaign of the
    judgments file with its number of human judgments, whether they are of this resource's own pairs or of
    another resource's, and whether the regressor learned from them."""
    counts = manifest["counts"]
    lines = [
        "## Whose judgments",
        "",
        "`score` and `raw_score` in the pairs are the similarity regressor's predictions for every pair: no person "
        "gave them. The judgments file holds human judgments (people's slider scores: crowd workers or local "
        f"annotators), {counts.get('judgments', 0):,} in all" + (":" if manifest.get("judgment_sources") else "."),
        "",
    ]
    sources = manifest.get("judgment_sources")
    if sources is None:  # a manifest written before the sources were kept
        return lines
    for s in sources:
        if s["pairs_judged"] == "this resource":
            what = "of a sample of this resource's own pairs"
        else:
            other = f" {_code(s['resource'])}" if s.get("resource") else ""
            what = f"of pairs of another resource{other}, none of them a pair of this release"
        trained = "; the regressor was trained on them" if s.get("trained_the_regressor") else ""
        lines.append(f"- {s['judgments']:,} of campaign {_code(s['campaign'])}: {what}{trained}.")
    if not any(s["pairs_judged"] == "this resource" for s in sources):
        lines.append(
            "- No person judged this resource's own pairs: how well `score` holds for them is the held-out "
            "figure below, measured on the regressor's training campaign, not on this resource."
        )
    if not sources:
        lines.append("- None: no campaign judged this resource, and the regressor names no training campaign.")
    lines.append("")
    return lines


def dataset_card(manifest: dict[str, Any], columns: list[tuple[str, list[tuple[str, str, str]]]]) -> str:
    """The release's ``README.md``: the hub's YAML header (licence, task, size, language, name; for parquet the
    configurations and their files) and, for a person, what the release is, its licence, files and columns, how
    far to trust the scores (held-out rho with n and interval, the calibration table), counts, limitations,
    provenance, the settings, and the citation of ParaBank. ``columns``: per file title, its ``(name, type,
    meaning)`` rows. Built from the manifest alone, so it is as reproducible."""
    counts, fmt = manifest["counts"], manifest["pairs_format"]
    layout = manifest.get("layout", PARAFORGE)
    files = manifest["files"]
    names = {
        "pairs": next(n for n in files if n.startswith("pairs.")),
        "judgments": next(n for n in files if n.startswith("judgments.")),
    }
    name = f"Paraforge paraphrases: {manifest['resource']} {manifest['version']}"
    header: dict[str, Any] = {"pretty_name": name, **hub_license(manifest["license"])}
    header.update(
        {
            "language": ["en"],
            "task_categories": ["text2text-generation", "sentence-similarity"],
            "size_categories": [size_category(counts["pairs"])],
            "tags": ["paraphrase", "paraphrase-generation", "parabank", "paraforge"],
        }
    )
    if fmt == "parquet":
        header["configs"] = [
            {"config_name": "pairs", "data_files": [{"split": "train", "path": names["pairs"]}], "default": True},
            {"config_name": "judgments", "data_files": [{"split": "train", "path": names["judgments"]}]},
        ]
    rows = {names["pairs"]: counts["pairs"], names["judgments"]: counts["judgments"]}
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=1000).rstrip("\n"),
        "---",
        "",
        f"# {name}",
        "",
        f"Paraphrases of the references of resource {_code(manifest['resource'])}, generated "
        + (
            "by sampling under random negative constraints, scored and clustered into ranked outputs, the way "
            "ParaBank 2 (Hu et al., 2019b) was built"
            if (manifest.get("generation") or {}).get("diverse")
            else "with lexically constrained decoding the way ParaBank (Hu et al., 2019) was built"
        )
        + ", each pair scored (0-100) by a similarity regressor trained on human judgments, with the human "
        "judgments said under *Whose judgments* below. Release "
        f"{_code(manifest['version'])}, format `{fmt}`, layout `{layout}`; `manifest.json` beside this card holds "
        "every fact below and the SHA-256 of each file.",
        *_layout(layout),
        "",
        *_whose_judgments(manifest),
        "## Licence",
        "",
        license_text(manifest["license"]),
        "",
        "## Files",
        "",
        "| file | rows | SHA-256 |" if fmt != "parquet" else "| config | file | rows | SHA-256 |",
        "|---|---:|---|" if fmt != "parquet" else "|---|---|---:|---|",
    ]
    for config in ("pairs", "judgments"):
        file = names[config]
        n = f"{rows[file]:,}"
        if (fmt == "jsonl" or layout == PARABANK2) and config == "pairs":
            n = f"{counts['references']:,} references ({counts['pairs']:,} pairs)"
        cells = [f"`{file}`", n, f"`{files[file]['sha256']}`"]
        if fmt == "parquet":
            cells.insert(0, f"{config} (default)" if config == "pairs" else config)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *_loading(fmt, names, layout), ""]
    for title, described in columns:
        lines += [f"### Columns of `{title}`", "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{column}` | `{kind}` | {_cell(meaning)} |" for column, kind, meaning in described]
        lines.append("")
    lines += [
        "The same thing has the same name in every file: `reference`, `paraphrase`, `systems`, `nll` in the pairs "
        "and the judgments alike; `score` is the predicted similarity (calibrated when the regressor has a "
        "calibration map, see below), `raw_score` the regressor's own prediction, `human_score` a person's.",
        "",
        *_trust(manifest),
        "## Counts",
        "",
        "| | read | released |",
        "|---|---:|---:|",
        f"| references | {counts['references_read']:,} | {counts['references']:,} |",
        f"| pairs | {counts['pairs_read']:,} | {counts['pairs']:,} |",
        f"| paraphrases identical to their reference | {counts.get('copies_read', 0):,} "
        f"| {counts.get('copies', 0):,} |",
        *(
            [f"| near-copies of their reference | {counts['near_copies_read']:,} | {counts['near_copies']:,} |"]
            if "near_copies_read" in counts
            else []
        ),
        f"| paraphrases with a non-word | {counts.get('non_words_read', 0):,} | {counts.get('non_words', 0):,} |",
        "",
        *_screen(manifest),
        f"Unscored pairs released: {counts['pairs_unscored']:,}. Judgments: {counts['judgments']:,} from "
        f"{counts['campaigns']:,} campaign(s).",
        "",
        *_limitations(manifest),
        *_provenance(manifest),
        "## Settings",
        "",
        "Generation settings:",
        "",
        _fence(_json(manifest.get("generation")), "json"),
        "",
        "Filters:",
        "",
        _fence(_json(manifest.get("filters")), "json"),
        "",
        "Regressor metrics and signature:",
        "",
        _fence(
            _json(
                {"metrics": manifest["regressor"].get("metrics"), "signature": manifest["regressor"].get("signature")}
            ),
            "json",
        ),
        "",
        "## Citation",
        "",
        "Paraforge follows ParaBank; please cite it: J. Edward Hu, Rachel Rudinger, Matt Post and Benjamin Van "
        'Durme (2019). "ParaBank: Monolingual Bitext Generation and Sentential Paraphrasing via '
        'Lexically-constrained Neural Machine Translation." AAAI 2019.',
        "",
        _fence(PARABANK_BIBTEX, "bibtex"),
        "",
    ]
    return "\n".join(lines)
