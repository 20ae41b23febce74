#!/usr/bin/env bash
# demo/demo.sh: what `make demo` runs. Pins demo/sample into a local store
# (no S3 server needed), shows the digest, the listing and a deep verify,
# walks it through admission (validate, approve, alias set, admit), then
# warms the node's cache with the train split, mounts the admitted
# snapshot with its permit, reads it, shows the run
# record and unmounts; then derives a filtered set from it with
# demo/harvest.sh and checks that derivation.
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

mnt=/tmp/pinfs-demo/$digest
cache=demo/cache
record=$cache/runs.jsonl
keys=$cache/keys
mkdir -p "$keys" && chmod 700 "$cache" "$keys"

# Admission (docs/admission.md): validate, sign, activate through the gate
# "demo", and admit a run; the mount then requires that permit.
step "$pinfs validate $digest --store $store --alias demo"
$pinfs validate "$digest" --store "$store" --alias demo

if [ ! -e "$keys/alice.key" ]; then
	step "$pinfs key generate $keys/alice   # the approver's key pair"
	$pinfs key generate "$keys/alice"
fi
step "echo '{\"approvers\": [\"alice.pub\"], \"threshold\": 1}' > $keys/policy.json   # the trust policy"
printf '{"approvers": ["alice.pub"], "threshold": 1}\n' >"$keys/policy.json"
cat "$keys/policy.json"
step "$pinfs approve $digest --store $store --key $keys/alice.key"
$pinfs approve "$digest" --store "$store" --key "$keys/alice.key"

step "$pinfs alias set demo $digest --store $store --policy $keys/policy.json"
$pinfs alias set demo "$digest" --store "$store" --policy "$keys/policy.json"

step "$pinfs status $digest --store $store"
$pinfs status "$digest" --store "$store"

step "$pinfs admit demo --purpose demo --run-record $record --store $store"
read -r run admitted < <($pinfs admit demo --purpose demo --run-record "$record" --store "$store")
echo "$run $admitted"

step "$pinfs warm $admitted --split train --store $store --cache-dir $cache   # fill the node's disk cache before training"
$pinfs warm "$admitted" --split train --store "$store" --cache-dir "$cache"
if mountpoint -q "$mnt" 2>/dev/null; then $pinfs unmount --lazy "$mnt" || true; fi
trap '$pinfs unmount --lazy "$mnt" 2>/dev/null || true' EXIT

step "$pinfs mount $admitted $mnt --mkdir --store $store --cache-dir $cache --run-record $record --run-id $run --require-permit --policy $keys/policy.json"
$pinfs mount "$admitted" "$mnt" --mkdir --store "$store" --cache-dir "$cache" --run-record "$record" --run-id "$run" --require-permit --policy "$keys/policy.json"

step "ls -l $mnt $mnt/train"
ls -l "$mnt" "$mnt/train"

step "head -n 2 $mnt/val/part-000.jsonl"
head -n 2 "$mnt/val/part-000.jsonl"

step "getfattr -d $mnt/val/part-000.jsonl"
getfattr -d "$mnt/val/part-000.jsonl" 2>/dev/null || python3 -c 'import os,sys; p=sys.argv[1]; [print(f"{a}={os.getxattr(p,a).decode()!r}") for a in os.listxattr(p)]' "$mnt/val/part-000.jsonl"

step "$pinfs status $mnt   # what the mount is doing (exit 0: serving; the readiness probe of a sidecar)"
$pinfs status "$mnt"

step "echo x > $mnt/new   # refused: read-only"
if (echo x > "$mnt/new") 2>&1; then echo "demo: a write succeeded" >&2; exit 1; fi

step "$pinfs unmount $mnt"
$pinfs unmount "$mnt"
for _ in $(seq 50); do grep -q '"event":"run_end"' "$record" 2>/dev/null && break; sleep 0.1; done

step "$pinfs run show $run --run-record $record --cache-dir $cache --members   # what the run read"
$pinfs run show "$run" --run-record "$record" --cache-dir "$cache" --members

step "$pinfs run replay $run --run-record $record --cache-dir $cache --store $store   # can we read those bytes again?"
$pinfs run replay "$run" --run-record "$record" --cache-dir "$cache" --store "$store"

step "$pinfs run list --run-record $record --cache-dir $cache"
$pinfs run list --run-record "$record" --cache-dir "$cache"

step "$pinfs derive --input raw=$admitted --transform harvest@v1 --param label=billing --store $store --cache-dir $cache --record demo/cache/slice.json -- sh demo/harvest.sh   # a derived set, with its record"
billing=$($pinfs derive --input raw="$admitted" --transform harvest@v1 --param label=billing --store "$store" --cache-dir "$cache" \
	--record demo/cache/slice.json -- sh demo/harvest.sh | tail -n 1)
echo "$billing"

step "cat demo/cache/slice.json   # the derivation record: inputs, transform version, params, command, output"
cat demo/cache/slice.json

step "$pinfs derive --input raw=$admitted --transform harvest@v1 --param label=billing --store $store --cache-dir $cache -- sh demo/harvest.sh   # the same again: cached, nothing runs"
$pinfs derive --input raw="$admitted" --transform harvest@v1 --param label=billing --store "$store" --cache-dir "$cache" -- sh demo/harvest.sh

step "$pinfs derive --check demo/cache/slice.json --store $store --cache-dir $cache   # in CI: does harvest@v1 still give these bytes?"
$pinfs derive --check demo/cache/slice.json --store "$store" --cache-dir "$cache"

step "$pinfs derive log $billing --store $store"
$pinfs derive log "$billing" --store "$store"

step "$pinfs mount latest /tmp/pinfs-demo --store $store   # refused: digests only"
if $pinfs mount latest /tmp/pinfs-demo --store "$store"; then
	echo "demo: mount of a non-digest was not refused" >&2
	exit 1
else
	echo "(exit status $?)"
fi
