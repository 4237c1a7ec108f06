#!/usr/bin/env bash
# A real single-host Slurm for the Slurm tests and examples/slurm: Debian's slurm-wlm and
# munge, run as root without systemd (munged, slurmctld, slurmd on this machine, one node
# named after `hostname -s`). Idempotent: does nothing when the node already answers idle.
#
# It must not break CI where Slurm cannot run (no root, no sudo, a container that forbids
# it): then it prints why, writes the reason to $WASHOUT_SLURM_STATUS (the tests that need
# Slurm skip with that reason) and exits 0. Where it starts Slurm it removes that file, so
# a test that finds no Slurm and no reason fails rather than skips.
set -euo pipefail
status_file="${WASHOUT_SLURM_STATUS:-/tmp/washout-slurm-unavailable}"
conf=/etc/slurm/slurm.conf
mark="# written by washout's scripts/services/slurm.sh"

give_up() {
  echo "slurm.sh: Slurm not started: $*" >&2
  echo "$*" >"$status_file"
  exit 0
}

node_state() { sinfo -h -n "$(hostname -s)" -o %T 2>/dev/null | head -n1; }

if command -v sinfo >/dev/null 2>&1 && [ "$(node_state)" = idle ]; then
  rm -f "$status_file"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || give_up "needs root to run slurmctld, slurmd and munged as this script sets them up (running as $(id -un))"

if ! [ -x /usr/sbin/slurmctld ] || ! [ -x /usr/sbin/slurmd ] || ! [ -x /usr/sbin/munged ]; then
  . "$(dirname "$0")/lib/apt.sh"
  apt_install slurm.sh slurm-wlm munge || give_up "apt-get could not install slurm-wlm and munge"
fi

# munge: the key Slurm's daemons authenticate each other with (1024 random bytes, mode 400).
if ! [ -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! pgrep -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged || give_up "munged did not start (see /var/log/munge/munged.log)"
fi

# slurm.conf: this machine is the controller and the only node. A slurm.conf this script
# did not write is a site's: it is left alone.
host="$(hostname -s)"
if [ -e "$conf" ] && ! grep -qF "$mark" "$conf"; then
  give_up "$conf exists and was not written by this script; start that site's Slurm yourself"
fi
mem_mib=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 9 / 10))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat >"$conf" <<EOF
$mark
ClusterName=washout
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# linuxproc and task/none: no cgroup hierarchy of Slurm's own is needed on a test machine.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The default MPI plugin (pmix) does not load here; none is all washout's steps need.
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$(nproc) RealMemory=$mem_mib State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
# Slurm 22.05 has no "disabled" cgroup plugin; v1 matches how this kind of VM mounts cgroups.
cat >/etc/slurm/cgroup.conf <<EOF
$mark
CgroupPlugin=cgroup/v1
EOF

pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld || give_up "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd || give_up "slurmd did not start (slurmd -D -vvv says why)"
for _ in $(seq 1 60); do
  state="$(node_state)"
  if [ "$state" = idle ]; then
    rm -f "$status_file"
    exit 0
  fi
  case "$state" in
    down* | drain*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
give_up "node $host is '${state:-unknown}', not idle, 60 s after starting slurmd (see /var/log/slurm/)"
