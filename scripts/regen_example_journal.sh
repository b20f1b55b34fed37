#!/usr/bin/env bash
# Regenerate journal/example/ from a real run of the default playbook on the simulated
# node: run to the review gate, resume after "upgrading" the node to CUDA 13, copy the journal.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
set +e
campaign run "$root/playbooks/eagle_verify.yaml" --db c.db --quiet
rc=$?
set -e
[ "$rc" = 3 ] || { echo "expected the review gate (exit 3), got $rc" >&2; exit 1; }
cid=$(campaign status --db c.db --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
campaign resume "$cid" --db c.db --approve --set node.cuda=13.0 --note "node upgraded to CUDA 13" --quiet
mkdir -p "$root/journal/example"      # the vLLM example beside it stays
rm -rf "$root/journal/example/eagle-fast-verify.md" "$root/journal/example/eagle-fast-verify.plots" "$root/journal/example/eagle-fast-verify.d"
cp -r journal/. "$root/journal/example/"
echo "journal/example/ regenerated from campaign $cid"
