#!/usr/bin/env bash
# Stop what .ci/cluster_up.sh started (slurmd, slurmctld, munged, sshd) and remove the
# env file so `cluster` tests skip again.  Idempotent; keeps keys and state for a fast restart.
set -uo pipefail
B=${CAMPAIGN_CLUSTER_DIR:-/tmp/campaign-cluster}
export SLURM_CONF=$B/slurm/slurm.conf
[ -f "$SLURM_CONF" ] && command -v scancel >/dev/null && scancel --quiet -u "$(id -un)" 2>/dev/null
rm -f "$B/env"
pids=()
# sshd's per-connection children (ssh masters persist 10 min) outlive the listener: end them too
if [ -s "$B/ssh/sshd.pid" ] && kill -0 "$(cat "$B/ssh/sshd.pid")" 2>/dev/null; then
  for c in $(pgrep -P "$(cat "$B/ssh/sshd.pid")"); do kill "$c" 2>/dev/null && pids+=("$c"); done
fi
for f in "$B/slurm/slurmd.pid" "$B/slurm/slurmctld.pid" /run/munge/munged.pid "$B/ssh/sshd.pid"; do
  if [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then pid=$(cat "$f"); kill "$pid" && pids+=("$pid"); fi
done
for _ in $(seq 100); do
  left=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
  [ $left = 0 ] && break; sleep 0.1
done
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
echo "cluster down"
exit 0
