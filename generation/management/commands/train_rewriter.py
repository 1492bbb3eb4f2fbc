"""``python manage.py train_rewriter``: train the monolingual rewriter (see generation/rewriter/).

    python manage.py train_rewriter --make-demo-pairs var/rewriter-train/demo-pairs.tsv
    python manage.py train_rewriter --pairs var/rewriter-train/demo-pairs.tsv --out var/rewriter-train \\
        --steps 4000 --threads 2
    python manage.py train_rewriter --out var/rewriter-train --export-only --export generation/demo/model
    python manage.py train_rewriter --pairs pairs.tsv --out var/qwen-rewriter --base-model Qwen/Qwen2.5-0.5B-Instruct \
        --prompt-template paraphrase-chat --steps 2000 --batch-size 16 --device cuda

With ``--base-model`` a checkpoint is fine-tuned instead: a decoder-only one on its prompt + the paraphrase
(``--prompt-template``, recorded in the export: ``paraphrase`` and ``generate`` decode with it), an
encoder-decoder one on sentence -> paraphrase.

Progress goes to stderr (a bar on a terminal, a line every ``--log-every`` steps otherwise); one
line of JSON on stdout summarises the run.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from api.numbers import cli_int
from generation import rewriter
from generation.rewriter import TrainConfig, TrainOptionsError
from infra.textfiles import TextFileError
from jobs.params import add_arguments, from_values


def _fmt_s(sec) -> str:
    if sec is None:
        return "?"
    sec = int(sec)
    h, r = divmod(sec, 3600)
    m, s = divmod(r, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Command(BaseCommand):
    help = (
        "Train an English->English rewriter on sentence<TAB>paraphrase pairs (checkpoints, automatic resumption) "
        "and save a Hugging Face folder: a Marian-style seq2seq model from scratch, or with --base-model a "
        "fine-tuned checkpoint (a decoder-only one learns to answer --prompt-template's prompt, which the export "
        "records and paraphrase/generate then use when they are given no --prompt-template)."
    )

    def add_arguments(self, parser):
        # the training settings come from TrainConfig (one field, one option); the rest are this command's
        add_arguments(parser, TrainConfig, exclude=("data_note",))
        parser.add_argument(
            "--log-every", type=cli_int, default=25, help="progress line interval when stderr is not a terminal"
        )
        add_arguments(parser, TrainConfig, only=("data_note",))
        parser.add_argument(
            "--make-demo-pairs",
            metavar="OUT.tsv",
            help="build synthetic demo pairs (STS-B + SICK sentences noised with PPDB synonyms) into OUT.tsv and exit",
        )
        parser.add_argument(
            "--data-dir", default=None, help="public data for --make-demo-pairs (default ../shared/data)"
        )
        parser.add_argument("--demo-copies", type=cli_int, default=2, help="noised copies per sentence")

    def handle(self, *args, **o):
        if o["make_demo_pairs"]:
            data_dir = Path(o["data_dir"] or Path(settings.BASE_DIR).parent / "shared" / "data")
            seed = TrainConfig.seed if o["seed"] is None else o["seed"]
            try:
                summary = rewriter.build_synthetic_pairs(
                    data_dir, o["make_demo_pairs"], seed=seed, copies=o["demo_copies"]
                )
            except (FileNotFoundError, TextFileError) as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(json.dumps(summary))
            return

        command = (
            "python manage.py train_rewriter " + shlex.join(sys.argv[2:])
            if len(sys.argv) > 1 and sys.argv[1] == "train_rewriter"
            else None
        )
        try:
            train_config = from_values(TrainConfig, o, command=command)
        except TrainOptionsError as exc:
            raise CommandError(exc.option_message) from None
        if not train_config.export_only:
            if not train_config.pairs:
                raise CommandError("--pairs is required (or --export-only, or --make-demo-pairs)")
            if not Path(train_config.pairs).is_file():
                raise CommandError(f"pairs file not found: {train_config.pairs}")

        err = self.stderr._out if hasattr(self.stderr, "_out") else sys.stderr
        tty = hasattr(err, "isatty") and err.isatty()
        log_every = max(1, o["log_every"])
        last = {"t": 0.0}

        def progress(info):
            step, total = info["step"], info["total"]
            line = (
                f"step {step}/{total} loss {info['loss']:.3f} (avg {info['avg_loss']:.3f}) "
                f"lr {info['lr']:.2e} {info['steps_per_s']:.2f} steps/s ETA {_fmt_s(info['eta_s'])}"
            )
            if info.get("valid_loss") is not None:
                line += f" valid {info['valid_loss']:.3f}"
            if tty:
                width = 30
                done = int(width * step / max(total, 1))
                now = time.time()
                if now - last["t"] > 0.2 or step == total:
                    last["t"] = now
                    err.write(f"\r[{'#' * done}{'.' * (width - done)}] {line}\x1b[K")
                    err.flush()
            elif step % log_every == 0 or step in (1, total, info.get("stop_at")):
                err.write(line + "\n")
                err.flush()

        try:
            result = rewriter.train_with(train_config, progress=progress)
        except TrainOptionsError as exc:
            raise CommandError(exc.option_message) from None
        except (rewriter.PairsFileError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from None
        if tty:
            err.write("\n")
        summary = result.as_dict()
        summary.pop("history", None)
        self.stdout.write(json.dumps(summary))
