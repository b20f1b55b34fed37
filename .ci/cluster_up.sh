#!/usr/bin/env bash
# Start the CI cluster on this machine: a loopback sshd (127.0.0.1:2222) and a
# single-node Slurm cluster (munge + slurmctld + slurmd, 8 fake GPUs as GRES).
# Needs root and apt (Debian).  Idempotent: daemons already running are kept.
# Writes $B/env (KEY=VALUE lines) that the `cluster` tests read; see
# load_cluster_env() in tests/tools/executors/conftest.py (override the path with CAMPAIGN_CLUSTER_ENV).
set -euo pipefail
B=${CAMPAIGN_CLUSTER_DIR:-/tmp/campaign-cluster}
SSH_PORT=${CAMPAIGN_CLUSTER_SSH_PORT:-2222}
t0=$(date +%s)
[ "$(id -u)" = 0 ] || { echo "cluster_up.sh: run as root (it starts sshd, munged, slurmctld, slurmd)" >&2; exit 2; }

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# ---------- packages (skipped when already installed) ----------
need=()
for b in /usr/sbin/sshd:openssh-server /usr/bin/ssh:openssh-client /usr/bin/scp:openssh-client \
         /usr/sbin/slurmctld:slurmctld /usr/sbin/slurmd:slurmd /usr/bin/sbatch:slurm-client \
         /usr/sbin/munged:munge /usr/bin/rsync:rsync /usr/bin/python3:python3; do
  [ -x "${b%%:*}" ] || need+=("${b#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # postinst "start" may be denied by policy-rc.d: fine, we start the daemons ourselves
  apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

# ---------- A. sshd on 127.0.0.1:$SSH_PORT ----------
# Tests log in as an unprivileged user with a plain /bin/sh (as on a real node; a
# root login would source root's rc files on every command, and as root signals
# over an ssh channel are refused).  Unlocked ('*'): with UsePAM no a locked account
# cannot log in even with a key.
SSH_USER=${CAMPAIGN_CLUSTER_SSH_USER:-campaign}
id -u "$SSH_USER" >/dev/null 2>&1 || useradd -m -s /bin/sh "$SSH_USER"
usermod -p '*' "$SSH_USER"
S=$B/ssh; mkdir -p "$S"; chmod 711 "$S"
install -d -m 0755 /run/sshd                       # privilege-separation dir, else sshd exits 255
[ -f "$S/host_ed25519" ]   || ssh-keygen -q -t ed25519 -N '' -f "$S/host_ed25519"
[ -f "$S/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C campaign-ci -f "$S/client_ed25519"
cp "$S/client_ed25519.pub" "$S/authorized_keys"; chmod 644 "$S/authorized_keys"  # read as the user
printf '[127.0.0.1]:%s %s\n' "$SSH_PORT" "$(cut -d' ' -f1,2 "$S/host_ed25519.pub")" > "$S/known_hosts"
cat > "$S/sshd_config" <<CONF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $S/host_ed25519
PidFile $S/sshd.pid
AuthorizedKeysFile $S/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 64
MaxStartups 64:30:128
AllowTcpForwarding yes
Subsystem sftp internal-sftp
CONF
/usr/sbin/sshd -t -f "$S/sshd_config"
alive "$S/sshd.pid" || /usr/sbin/sshd -f "$S/sshd_config" -E "$S/sshd.log"   # daemonizes
SSH=(ssh -p "$SSH_PORT" -i "$S/client_ed25519" -o UserKnownHostsFile="$S/known_hosts"
     -o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR "$SSH_USER@127.0.0.1")
for _ in $(seq 100); do "${SSH[@]}" true 2>/dev/null && break; sleep 0.1; done
"${SSH[@]}" true || { echo "cluster_up.sh: sshd on 127.0.0.1:$SSH_PORT does not answer; see $S/sshd.log" >&2; exit 1; }

# ---------- B. munge ----------
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
install -d -o munge -g munge -m 0755 /run/munge
alive /run/munge/munged.pid || runuser -u munge -- /usr/sbin/munged
for _ in $(seq 100); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n | unmunge >/dev/null

# ---------- C. slurm: one node "localhost", 8 fake GPUs ----------
L=$B/slurm; mkdir -p "$L/state" "$L/spool" "$L/log" "$L/fakegpu" "$B/shared"; chmod 1777 "$L/log" "$B/shared"
# GRES files must be character devices, else CUDA_VISIBLE_DEVICES is not set in jobs
for i in 0 1 2 3 4 5 6 7; do [ -c "$L/fakegpu/nvidia$i" ] || mknod "$L/fakegpu/nvidia$i" c 195 "$i"; done
cat > "$L/slurm.conf" <<CONF
ClusterName=ci
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MailProg=/bin/true
StateSaveLocation=$L/state
SlurmdSpoolDir=$L/spool
SlurmctldPidFile=$L/slurmctld.pid
SlurmdPidFile=$L/slurmd.pid
SlurmctldLogFile=$L/log/slurmctld.log
SlurmdLogFile=$L/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=60
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
cat > "$L/gres.conf" <<CONF
AutoDetect=off
NodeName=localhost Name=gpu File=$L/fakegpu/nvidia[0-7]
CONF
export SLURM_CONF=$L/slurm.conf
alive "$L/slurmctld.pid" || slurmctld
alive "$L/slurmd.pid" || slurmd -N localhost      # -N: the hostname is not "localhost"
state=""
for _ in $(seq 200); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
  case "$state" in idle|mixed|allocated) break;; esac
  sleep 0.1
done
case "$state" in idle|mixed|allocated) ;;
  *) echo "cluster_up.sh: slurm node state '$state'; see $L/log/" >&2; exit 1;; esac

# ---------- env file the tests read ----------
cat > "$B/env.tmp" <<ENV
CAMPAIGN_CLUSTER_SSH_HOST=127.0.0.1
CAMPAIGN_CLUSTER_SSH_PORT=$SSH_PORT
CAMPAIGN_CLUSTER_SSH_USER=$SSH_USER
CAMPAIGN_CLUSTER_SSH_KEY=$S/client_ed25519
CAMPAIGN_CLUSTER_SSH_KNOWN_HOSTS=$S/known_hosts
SLURM_CONF=$L/slurm.conf
CAMPAIGN_CLUSTER_SLURM_PARTITION=debug
CAMPAIGN_CLUSTER_SLURM_GPUS=8
CAMPAIGN_CLUSTER_SHARED_DIR=$B/shared
ENV
mv "$B/env.tmp" "$B/env"
echo "cluster up in $(( $(date +%s) - t0 )) s: sshd 127.0.0.1:$SSH_PORT, slurm node localhost ($state); env: $B/env"
