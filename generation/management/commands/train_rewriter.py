"""``python manage.py train_rewriter``: train the monolingual rewriter (see generation/rewriter/).

    python manage.py train_rewriter --make-demo-pairs var/rewriter-train/demo-pairs.tsv
    python manage.py train_rewriter --pairs var/rewriter-train/demo-pairs.tsv --out var/rewriter-train \\
        --steps 4000 --threads 2
    python manage.py train_rewriter --out var/rewriter-train --export-only --export generation/demo/model

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

from api.numbers import cli_float, cli_int


def _fmt_s(sec) -> str:
    if sec is None:
        return "?"
    sec = int(sec)
    h, r = divmod(sec, 3600)
    m, s = divmod(r, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Command(BaseCommand):
    help = (
        "Train an English->English Marian-style seq2seq rewriter on sentence<TAB>paraphrase pairs "
        "(checkpoints, automatic resumption) and save a Hugging Face folder."
    )

    def add_arguments(self, parser):
        parser.add_argument("--pairs", help="sentence<TAB>paraphrase file (.tsv or .tsv.gz)")
        parser.add_argument("--out", help="training folder: checkpoints/, tokenizer/ and the final export")
        parser.add_argument(
            "--export", dest="export_dir", help="write the final Hugging Face folder here instead of --out"
        )
        parser.add_argument(
            "--export-only", action="store_true", help="export the latest checkpoint in --out without training"
        )
        parser.add_argument("--fp16", action="store_true", help="export float16 weights (half the size)")
        parser.add_argument("--steps", type=cli_int, default=3000, help="total optimizer steps (default 3000)")
        parser.add_argument(
            "--stop-after",
            type=cli_int,
            default=None,
            help="stop this run after N new steps (checkpointed); re-run to resume",
        )
        parser.add_argument("--batch-size", type=cli_int, default=64)
        parser.add_argument("--lr", type=cli_float, default=7e-4, help="peak learning rate")
        parser.add_argument("--warmup", type=cli_int, default=400, help="linear warm-up steps")
        parser.add_argument("--schedule", choices=["inverse_sqrt", "linear", "constant"], default="inverse_sqrt")
        parser.add_argument("--label-smoothing", type=cli_float, default=0.1)
        parser.add_argument("--layers", type=cli_int, default=None, help="encoder and decoder layers (default 3)")
        parser.add_argument("--d-model", type=cli_int, default=None, help="model width (default 256)")
        parser.add_argument("--ffn-dim", type=cli_int, default=None, help="feed-forward width (default 4 x d-model)")
        parser.add_argument("--heads", type=cli_int, default=None, help="attention heads (default 4)")
        parser.add_argument("--vocab-size", type=cli_int, default=8000, help="SentencePiece vocabulary")
        parser.add_argument("--max-len", type=cli_int, default=128, help="max subword tokens per side")
        parser.add_argument("--checkpoint-every", type=cli_int, default=200)
        parser.add_argument("--keep-checkpoints", type=cli_int, default=3)
        parser.add_argument("--threads", type=cli_int, default=None, help="torch CPU threads")
        parser.add_argument("--seed", type=cli_int, default=13)
        parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda when available)")
        parser.add_argument(
            "--no-resume", action="store_true", help="start afresh (deletes --out/checkpoints and --out/tokenizer)"
        )
        parser.add_argument(
            "--log-every", type=cli_int, default=25, help="progress line interval when stderr is not a terminal"
        )
        parser.add_argument("--data-note", default=None, help="free text recorded in paraforge_training.json")
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
        from generation import rewriter

        if o["make_demo_pairs"]:
            data_dir = Path(o["data_dir"] or Path(settings.BASE_DIR).parent / "shared" / "data")
            try:
                summary = rewriter.build_synthetic_pairs(
                    data_dir, o["make_demo_pairs"], seed=o["seed"], copies=o["demo_copies"]
                )
            except FileNotFoundError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(json.dumps(summary))
            return

        if not o["out"]:
            raise CommandError("--out is required")
        if not o["export_only"]:
            if not o["pairs"]:
                raise CommandError("--pairs is required (or --export-only, or --make-demo-pairs)")
            if not Path(o["pairs"]).is_file():
                raise CommandError(f"pairs file not found: {o['pairs']}")
        for option in ("layers", "d_model", "ffn_dim", "heads"):
            if o[option] is not None and o[option] < 1:
                raise CommandError(f"--{option.replace('_', '-')} must be at least 1, not {o[option]}")

        config = {"layers": o["layers"], "d_model": o["d_model"], "heads": o["heads"]}
        if o["ffn_dim"]:
            config["ffn_dim"] = o["ffn_dim"]
        elif o["d_model"]:
            config["ffn_dim"] = 4 * o["d_model"]
        if o["heads"] is None and o["d_model"] and o["d_model"] % 4:
            config["heads"] = 1

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

        command = (
            "python manage.py train_rewriter " + shlex.join(sys.argv[2:])
            if len(sys.argv) > 1 and sys.argv[1] == "train_rewriter"
            else None
        )
        train_config = rewriter.TrainConfig(
            o["pairs"],
            o["out"],
            architecture=config,
            steps=o["steps"],
            batch_size=o["batch_size"],
            lr=o["lr"],
            warmup=o["warmup"],
            schedule=o["schedule"],
            label_smoothing=o["label_smoothing"],
            vocab_size=o["vocab_size"],
            max_len=o["max_len"],
            checkpoint_every=o["checkpoint_every"],
            keep_checkpoints=o["keep_checkpoints"],
            seed=o["seed"],
            threads=o["threads"],
            resume=not o["no_resume"],
            export_dir=o["export_dir"],
            export_only=o["export_only"],
            half=o["fp16"],
            command=command,
            data_note=o["data_note"],
            stop_after=o["stop_after"],
            device=o["device"],
        )
        try:
            result = rewriter.train_with(train_config, progress=progress)
        except (rewriter.PairsFileError, rewriter.TrainOptionsError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from None
        if tty:
            err.write("\n")
        summary = result.as_dict()
        summary.pop("history", None)
        self.stdout.write(json.dumps(summary))
