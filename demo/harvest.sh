#!/bin/sh
# demo/harvest.sh: the transform `make demo` derives with (as version
# harvest@v1). It reads the snapshot mounted at $PINFS_INPUT_raw and
# writes to $PINFS_OUTPUT, split by split, the records whose label is
# $PINFS_PARAM_LABEL. The same input and label give the same bytes.
set -eu
cd "$PINFS_INPUT_raw"
for f in */*.jsonl; do
	mkdir -p "$PINFS_OUTPUT/${f%/*}"
	grep -F "\"label\": \"$PINFS_PARAM_LABEL\"" "$f" >"$PINFS_OUTPUT/$f" || true
done
