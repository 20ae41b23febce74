#!/usr/bin/env bash
# demo/demo.sh: what `make demo` runs. Pins demo/sample into a local store
# (no S3 server needed), then shows the digest, the listing and a deep verify.
set -euo pipefail
cd "$(dirname "$0")/.."
pinfs=bin/pinfs
store=demo/store

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step "$pinfs pin demo/sample --store $store --purpose demo"
digest=$($pinfs pin demo/sample --store "$store" --purpose demo | tail -n 1)
echo "$digest"

step "$pinfs ls $digest --store $store"
$pinfs ls "$digest" --store "$store"

step "$pinfs verify $digest --store $store --deep"
$pinfs verify "$digest" --store "$store" --deep

step "$pinfs mount latest /tmp/pinfs-demo --store $store   # refused: digests only"
if $pinfs mount latest /tmp/pinfs-demo --store "$store"; then
	echo "demo: mount of a non-digest was not refused" >&2
	exit 1
else
	echo "(exit status $?)"
fi
