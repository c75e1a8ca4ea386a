#!/usr/bin/env bash
# start.sh -- bring up a REAL Slurm 22.05 cluster on this one Debian 12 machine
# (root, no systemd; cgroups optional), for dlperf_slurm's integration tests (tests/test_slurm_integration.py)
# and bench/bench_submit.py. Stop it with tests/slurm/stop.sh. Adapted from the team's slurm-testbed recipe.
#
# Usage:  bash tests/slurm/start.sh [NODES]
#   NODES=2 (default): slurmd "nodes" n1, n2 (what the integration tests expect).
#   NODES=1          : one slurmd, NodeName=localhost, port 6818.
#   NODES>1          : slurmd "nodes" n1..nN on this host, ports 17001.., each slurmd
#                      started in its own UTS namespace so `hostname` inside a job says n1, n2, ...
# Environment knobs:
#   SLURM_CI_DBD=1      (default) also run MariaDB + slurmdbd so `sacct` works (submitit needs it
#                       for job.state / detecting cancelled jobs). 0 = accounting_storage/none.
#   SLURM_CI_CPUS=N     CPUs advertised per node (default: nproc; may exceed real cores)
#   SLURM_CI_MEM_MB=N   RealMemory per node (default: 80% of RAM / NODES)
#   SLURM_CI_MAX_ARRAY=N MaxArraySize (default 1001, Slurm's default)
#   SLURM_CI_MAX_JOBS=N MaxJobCount (default 10000, Slurm's default; each task of an array counts):
#                       bench/bench_scale.py's 100,000 held runs need more
#   SLURM_CI_SLURMD_TIMEOUT=S SlurmdTimeout (default 10 s, Slurm's is 300): how soon a dead slurmd's node is
#                       marked DOWN and its jobs NODE_FAIL (tests/test_slurm_faults.py waits for that)
#   SLURM_CI_FRESH=1    wipe slurmctld/slurmd state (job ids restart at 1) before starting
#   SLURM_CI_CGROUP=1   use proctrack/cgroup + task/cgroup,task/affinity (cgroup v1 here): real
#                       --mem OOM enforcement and CPU binding. Default 0: proctrack/linuxproc, task/none.
#   SLURM_CI_NETNS=1    (NODES>1 only) give every node its own network namespace + IP on a private
#                       bridge (10.77.0.1 = controller, 10.77.0.11.. = n1..), instead of one shared
#                       loopback with one port per slurmd. SLURM_CI_SUBNET=10.77.0 changes the /24.
#   SLURM_CI_GPUS=N     (NODES>1) a GPU cluster as a center's is: every node N GRES GPUs (gpu:N, GresTypes=gpu, a
#                       gres.conf naming N stand-in device files a node, /run/slurm-ci/gpus/<node>/nvidia0.., made
#                       with mknod), AccountingStorageTRES=gres/gpu (sacct's AllocTRES shows them), a default
#                       partition `gpu` (every node) and a small `debug` one (the first node, MaxTime
#                       SLURM_CI_DEBUG_MAXTIME, default 00:15:00), the account `ci-gpu` whose QOS `ci-limited` has
#                       MaxSubmitJobsPerUser=SLURM_CI_QOS_SUBMIT (default 12) and MaxTRESPerUser=gres/gpu=
#                       SLURM_CI_QOS_GPUS (default 8), limits enforced (AccountingStorageEnforce=associations,
#                       limits,qos; root's own account has none). What only a GPU driver answers is stood in for on
#                       this test cluster only: a TaskProlog puts tests/slurm/gpubed/ first on every task's PATH,
#                       whose `nvidia-smi` answers from the devices Slurm bound to the calling process
#                       (CUDA_VISIBLE_DEVICES) whose device files exist: a wrong binding, or a node whose devices
#                       are gone, shows as one. Needs SLURM_CI_DBD=1.
#   SLURM_CI_SLOW_LINK=RATE (with SLURM_CI_NETNS=1) also give every node a second interface, eth1, on a second
#                       bridge (slurm-br1, SLURM_CI_SLOW_SUBNET=10.78.0: n1 = .11, ...), each node's sending on it
#                       limited to RATE (tc's units, e.g. 100mbit) by a tbf qdisc: two paths of different real
#                       bandwidth between the nodes (eth0 fast, eth1 slow), chosen per job by GLOO_SOCKET_IFNAME /
#                       NCCL_SOCKET_IFNAME (tests/test_network_slurm.py). Node names still resolve to eth0.
# Daemon PIDs end up in /run/slurm/*.pid, /run/munge/munged.pid, /run/mysqld/mysqld.pid;
# stop.sh stops exactly those PIDs.
set -euo pipefail

NODES=${1:-${SLURM_CI_NODES:-2}}
DBD=${SLURM_CI_DBD:-1}
NETNS=${SLURM_CI_NETNS:-0}; [ "$NODES" -le 1 ] && NETNS=0
SUBNET=${SLURM_CI_SUBNET:-10.77.0}
SLOW_LINK=${SLURM_CI_SLOW_LINK:-}; [ "$NETNS" = 1 ] || SLOW_LINK=""
SLOW_SUBNET=${SLURM_CI_SLOW_SUBNET:-10.78.0}
if [ -n "${SLURM_CI_SLOW_LINK:-}" ] && [ -z "$SLOW_LINK" ]; then
  echo "slurm-ci: SLURM_CI_SLOW_LINK needs SLURM_CI_NETNS=1 and NODES>1 (each node its own network namespace)" >&2
  exit 1
fi
GPUS=${SLURM_CI_GPUS:-0}
if [ "$GPUS" != 0 ]; then
  case $GPUS in *[!0-9]*) echo "slurm-ci: SLURM_CI_GPUS=$GPUS: expected a number of GPUs a node" >&2; exit 1 ;; esac
  if [ "$NODES" -le 1 ] || [ "$DBD" != 1 ]; then
    echo "slurm-ci: SLURM_CI_GPUS needs NODES>1 and SLURM_CI_DBD=1 (its account and QOS live in slurmdbd)" >&2; exit 1
  fi
fi
GPUBED=$(cd "$(dirname "$0")" && pwd)/gpubed
CTL_ADDR=127.0.0.1; [ "$NETNS" = 1 ] && CTL_ADDR=$SUBNET.1
if [ "${SLURM_CI_CGROUP:-0}" = 1 ]; then
  PROCTRACK=proctrack/cgroup; TASK=task/cgroup,task/affinity; GATHER=jobacct_gather/cgroup
else
  PROCTRACK=proctrack/linuxproc; TASK=task/none; GATHER=jobacct_gather/linux
fi
CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm
t_start=$(date +%s.%N)
log() { printf '[slurm-ci %6.1fs] %s\n' "$(awk -v a="$(date +%s.%N)" -v b="$t_start" 'BEGIN{print a-b}')" "$*"; }

wait_for() {  # wait_for SECONDS DESCRIPTION CMD...
  local limit=$1 what=$2; shift 2
  local end=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then echo "slurm-ci: timed out waiting for $what" >&2; return 1; fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- 1. packages
pkgs=()
command -v slurmctld >/dev/null || pkgs+=(slurm-wlm)
command -v munged    >/dev/null || pkgs+=(munge)
command -v mpirun    >/dev/null || pkgs+=(openmpi-bin libopenmpi-dev)
if [ "$DBD" = 1 ]; then
  command -v slurmdbd >/dev/null || pkgs+=(slurmdbd)
  command -v mariadbd >/dev/null || pkgs+=(mariadb-server)
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  log "apt-get install ${pkgs[*]}"
  # keep package postinst scripts from trying to start services (there is no systemd here)
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/tmp/slurm-ci-apt.log 2>&1 \
    || { tail -30 /tmp/slurm-ci-apt.log; exit 1; }
  [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  log "packages installed"
fi

mkdir -p "$CONF_DIR" "$LOG_DIR" /run/slurm /var/spool/slurmctld /var/spool/slurmd
if [ "${SLURM_CI_FRESH:-0}" = 1 ]; then rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*; fi

# ---------------------------------------------------------------- 2. node list
if [ "$NODES" -le 1 ]; then
  NODE_NAMES=(localhost)
else
  NODE_NAMES=(); for i in $(seq 1 "$NODES"); do NODE_NAMES+=("n$i"); done
fi
# job code resolves node names (MASTER_ADDR=n1 etc.): keep a marked block in /etc/hosts
sed -i '/# slurm-ci$/d' /etc/hosts
if [ "$NODES" -gt 1 ]; then
  for i in $(seq 1 "$NODES"); do
    if [ "$NETNS" = 1 ]; then echo "$SUBNET.$((10 + i)) n$i # slurm-ci"; else echo "127.0.0.1 n$i # slurm-ci"; fi
  done >>/etc/hosts
fi
if [ "$NETNS" = 1 ]; then
  # private bridge + one netns/veth per node; names recorded so stop.sh removes exactly these
  touch /run/slurm/netns-created
  if ! ip link show slurm-br0 >/dev/null 2>&1; then
    ip link add slurm-br0 type bridge && echo "link slurm-br0" >>/run/slurm/netns-created
    ip addr add "$CTL_ADDR/24" dev slurm-br0; ip link set slurm-br0 up
  fi
  for i in $(seq 1 "$NODES"); do
    ns=slurm-n$i
    if [ ! -e "/run/netns/$ns" ]; then
      ip netns add "$ns" && echo "netns $ns" >>/run/slurm/netns-created
      ip link add "slurm-veth$i" type veth peer name eth0 netns "$ns" && echo "link slurm-veth$i" >>/run/slurm/netns-created
      ip link set "slurm-veth$i" master slurm-br0 up
      ip -n "$ns" addr add "$SUBNET.$((10 + i))/24" dev eth0
      ip -n "$ns" link set eth0 up; ip -n "$ns" link set lo up
    fi
  done
fi
if [ -n "$SLOW_LINK" ]; then
  # the slow path: a second bridge, eth1 in every node, each node's egress on it shaped by tbf (recorded, so
  # stop.sh deletes the qdiscs, the veths and the bridge it made, in reverse order)
  if ! ip link show slurm-br1 >/dev/null 2>&1; then
    ip link add slurm-br1 type bridge && echo "link slurm-br1" >>/run/slurm/netns-created
    ip link set slurm-br1 up
  fi
  for i in $(seq 1 "$NODES"); do
    ns=slurm-n$i
    if ! ip -n "$ns" link show eth1 >/dev/null 2>&1; then
      ip link add "slurm-vslow$i" type veth peer name eth1 netns "$ns" && echo "link slurm-vslow$i" >>/run/slurm/netns-created
      ip link set "slurm-vslow$i" master slurm-br1 up
      ip -n "$ns" addr add "$SLOW_SUBNET.$((10 + i))/24" dev eth1
      ip -n "$ns" link set eth1 up
    fi
    if ! tc -n "$ns" qdisc replace dev eth1 root tbf rate "$SLOW_LINK" burst 64kb latency 50ms; then
      echo "slurm-ci: SLURM_CI_SLOW_LINK=$SLOW_LINK: tc refused it (expected a rate such as 100mbit); stop.sh" \
        "removes what was made" >&2
      exit 1
    fi
    echo "qdisc $ns eth1" >>/run/slurm/netns-created
  done
  log "slow path: eth1 on slurm-br1 ($SLOW_SUBNET.0/24), each node's egress limited to $SLOW_LINK (tbf)"
fi
CPUS=${SLURM_CI_CPUS:-$(nproc)}
NODE_GRES=""; [ "$GPUS" != 0 ] && NODE_GRES=" Gres=gpu:$GPUS"
rm -rf /run/slurm-ci/gpus
if [ "$GPUS" != 0 ]; then
  # the stand-in GPUs: character devices (those of /dev/null: harmless to open), one folder a node
  for n in "${NODE_NAMES[@]}"; do
    mkdir -p "/run/slurm-ci/gpus/$n"
    for g in $(seq 0 $((GPUS - 1))); do mknod -m 666 "/run/slurm-ci/gpus/$n/nvidia$g" c 1 3; done
  done
  # the stand-in's folder first on PATH: a TaskProlog runs for every task of every job (the batch step too)
  printf '#!/bin/sh\necho "export PATH=%s:$PATH"\necho "export DLPERF_CI_GPU_DIR=/run/slurm-ci/gpus/$SLURMD_NODENAME"\n' \
    "$GPUBED" >/run/slurm-ci/task-prolog.sh
  chmod 755 /run/slurm-ci/task-prolog.sh
fi
total_mb=$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)
MEM=${SLURM_CI_MEM_MB:-$(( total_mb * 8 / 10 / (NODES > 1 ? NODES : 1) ))}

# ---------------------------------------------------------------- 3. config files
if [ "$DBD" = 1 ]; then
  ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819"
else
  ACCT="AccountingStorageType=accounting_storage/none"
fi
{
cat <<EOF
# generated by start.sh: single-machine CI cluster, Slurm 22.05, root, no systemd
ClusterName=ci
SlurmctldHost=localhost($CTL_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=$PROCTRACK
TaskPlugin=$TASK
JobAcctGatherType=$GATHER
JobAcctGatherFrequency=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
TmpFS=/tmp/slurm-%n
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
$ACCT
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG_DIR/jobcomp.log
MinJobAge=300
MaxArraySize=${SLURM_CI_MAX_ARRAY:-1001}
MaxJobCount=${SLURM_CI_MAX_JOBS:-10000}
KillWait=5
SlurmdTimeout=${SLURM_CI_SLURMD_TIMEOUT:-10}
InactiveLimit=0
Waittime=0
EOF
if [ "$GPUS" != 0 ]; then
  echo "GresTypes=gpu"
  echo "AccountingStorageTRES=gres/gpu"
  echo "AccountingStorageEnforce=associations,limits,qos"
  echo "TaskProlog=/run/slurm-ci/task-prolog.sh"
fi
if [ "$NODES" -le 1 ]; then
  echo "NodeName=localhost NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"
elif [ "$NETNS" = 1 ]; then
  for i in $(seq 1 "$NODES"); do echo "NodeName=n$i NodeHostname=n$i NodeAddr=$SUBNET.$((10 + i)) CPUs=$CPUS RealMemory=$MEM$NODE_GRES State=UNKNOWN"; done
else
  echo "NodeName=n[1-$NODES] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[17001-$((17000 + NODES))] CPUs=$CPUS RealMemory=$MEM$NODE_GRES State=UNKNOWN"
fi
if [ "$GPUS" != 0 ]; then
  echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  echo "PartitionName=debug Nodes=${NODE_NAMES[0]} MaxTime=${SLURM_CI_DEBUG_MAXTIME:-00:15:00} State=UP"
else
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
fi
} >"$CONF_DIR/slurm.conf"
if [ "$GPUS" != 0 ]; then
  { echo "# generated by start.sh (SLURM_CI_GPUS=$GPUS): stand-in device files, no driver"
    echo "AutoDetect=off"
    for n in "${NODE_NAMES[@]}"; do echo "NodeName=$n Name=gpu File=/run/slurm-ci/gpus/$n/nvidia[0-$((GPUS - 1))]"; done
  } >"$CONF_DIR/gres.conf"
else
  rm -f "$CONF_DIR/gres.conf"
fi
for n in "${NODE_NAMES[@]}"; do mkdir -p "/var/spool/slurmd/$n" "/tmp/slurm-$n"; done
# slurmd 22.05 initialises its cgroup plugin even with proctrack/linuxproc (needs /sys/fs/cgroup);
# autodetect picks v1 on this kernel's mixed hierarchy, so pin it explicitly.
printf 'CgroupPlugin=cgroup/v1\nConstrainCores=yes\nConstrainRAMSpace=yes\n' >"$CONF_DIR/cgroup.conf"

# ---------------------------------------------------------------- 4. munge
if ! { [ -s /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 600 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged
  wait_for 10 munged sh -c 'munge -n | unmunge'
  log "munged up (pid $(cat /run/munge/munged.pid))"
fi

# ---------------------------------------------------------------- 5. mariadb + slurmdbd
if [ "$DBD" = 1 ]; then
  if ! { [ -s /run/mysqld/mysqld.pid ] && kill -0 "$(cat /run/mysqld/mysqld.pid)" 2>/dev/null; }; then
    mkdir -p /run/mysqld && chown mysql:root /run/mysqld
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    /usr/sbin/mariadbd --user=mysql --skip-networking --socket=/run/mysqld/mysqld.sock \
      --pid-file=/run/mysqld/mysqld.pid >"$LOG_DIR/mariadb.log" 2>&1 </dev/null &
    wait_for 60 mariadb mariadb-admin --socket=/run/mysqld/mysqld.sock ping
    wait_for 10 "mariadb pid file" test -s /run/mysqld/mysqld.pid
    log "mariadb up (pid $(cat /run/mysqld/mysqld.pid))"
  fi
  mariadb --socket=/run/mysqld/mysqld.sock -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmci';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  cat >"$CONF_DIR/slurmdbd.conf" <<EOF
# generated by start.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=$LOG_DIR/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurmci
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$CONF_DIR/slurmdbd.conf"
  if ! { [ -s /run/slurm/slurmdbd.pid ] && kill -0 "$(cat /run/slurm/slurmdbd.pid)" 2>/dev/null; }; then
    /usr/sbin/slurmdbd
    wait_for 60 slurmdbd sacctmgr -n show cluster
    log "slurmdbd up (pid $(cat /run/slurm/slurmdbd.pid))"
  fi
fi

# ---------------------------------------------------------------- 6. slurmctld + slurmd(s)
if [ -s /run/slurm/slurmctld.pid ] && kill -0 "$(cat /run/slurm/slurmctld.pid)" 2>/dev/null; then
  echo "slurm-ci: slurmctld already running (pid $(cat /run/slurm/slurmctld.pid)); run stop.sh first" >&2
  exit 1
fi
/usr/sbin/slurmctld
wait_for 30 slurmctld scontrol ping
log "slurmctld up (pid $(cat /run/slurm/slurmctld.pid))"

for n in "${NODE_NAMES[@]}"; do
  if [ "$NODES" -le 1 ]; then
    /usr/sbin/slurmd -N "$n"
  elif [ "$NETNS" = 1 ]; then
    # nsenter, not `ip netns exec`: the latter remounts /sys, and slurmd 22.05 then dies with
    # "No filesystem mounted on /sys/fs/cgroup / Unable to initialize cgroup plugin"
    nsenter --net="/run/netns/slurm-$n" unshare --uts /bin/sh -c "hostname $n && exec /usr/sbin/slurmd -N $n"
  else
    # own UTS namespace: same network, own hostname, so each "node" looks distinct to jobs
    unshare --uts /bin/sh -c "hostname $n && exec /usr/sbin/slurmd -N $n"
  fi
done
# Readiness: every node IDLE, nothing else. (`sinfo -t idle` would also list IDLE+DRAIN nodes.) slurmctld keeps
# node states across restarts, so a node an earlier run left DRAIN or DOWN (by hand, by a test, by a failure)
# is resumed once it has registered; a node that still is not idle after that stops the start, named with its
# state and its `sinfo -R` reason.
node_state() { sinfo -h -N -n "$1" -o %T 2>/dev/null | head -1 || true; }
node_reason() { sinfo -h -R -N -n "$1" -o %E 2>/dev/null | head -1 || true; }
registered() {  # every slurmd has answered: no "unknown" state, no "*" (not responding) suffix
  local n s; for n in "${NODE_NAMES[@]}"; do s=$(node_state "$n"); case $s in ''|unknown*|*'*') return 1 ;; esac; done
}
all_idle() { local n; for n in "${NODE_NAMES[@]}"; do [ "$(node_state "$n")" = idle ] || return 1; done; }
wait_for 60 "every slurmd to register" registered || true  # judged below, node by node
# Jobs left in slurmctld's saved state by a cluster that stopped without stop.sh (a machine frozen or killed with
# the cluster up, a session's end) belong to that earlier cluster: a test cluster starts with none. One such job,
# recorded RUNNING on n1 while its slurmstepd no longer existed, kept n1 MIXED past the idle wait below and CI
# failed at the start. They are cancelled here (stop.sh cancels its own before stopping) and the queue drains.
left=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
if [ -n "${left// }" ]; then
  log "cancelling jobs an earlier cluster left in its saved state: $left"
  scancel $left 2>/dev/null || true
  wait_for 30 "the earlier cluster's jobs to leave the queue" sh -c '[ -z "$(squeue -h -o %A 2>/dev/null)" ]' || true
fi
for n in "${NODE_NAMES[@]}"; do
  s=$(node_state "$n")
  case $s in
    drain*|down*|fail*|inval*)
      log "node $n is $s (reason: $(node_reason "$n")): resuming it"
      scontrol update nodename="$n" state=resume || true ;;
  esac
done
if ! wait_for 30 "nodes idle" all_idle; then
  for n in "${NODE_NAMES[@]}"; do
    s=$(node_state "$n")
    [ "$s" = idle ] || echo "slurm-ci: node $n is not idle: state ${s:-unknown}, reason: $(node_reason "$n")" >&2
  done
  sinfo -N; sinfo -R; tail -n 20 "$LOG_DIR"/slurmd-*.log
  echo "slurm-ci: refusing to report the cluster ready (stop it with tests/slurm/stop.sh)" >&2
  exit 1
fi
if [ "$DBD" = 1 ]; then wait_for 30 "cluster registered in slurmdbd" sh -c 'sacctmgr -n -P show cluster format=cluster,controlport | grep -q "^ci|6817"'; fi
if [ "$GPUS" != 0 ]; then
  # a center's limits: the account ci-gpu, whose only QOS, ci-limited, caps what one user may have submitted (array
  # tasks count one each) and the GPUs one user may hold at once; set anew on every start (sacctmgr keeps them)
  q_submit=${SLURM_CI_QOS_SUBMIT:-12}; q_gpus=${SLURM_CI_QOS_GPUS:-8}
  sacctmgr -i -Q add qos ci-limited >/dev/null 2>&1 || true
  sacctmgr -i -Q modify qos ci-limited set MaxSubmitJobsPerUser="$q_submit" MaxTRESPerUser=gres/gpu="$q_gpus" >/dev/null 2>&1 || true
  sacctmgr -i -Q add account ci-gpu Description="GPU test account" Organization=ci >/dev/null 2>&1 || true
  sacctmgr -i -Q add user root account=ci-gpu >/dev/null 2>&1 || true
  sacctmgr -i -Q modify user root where account=ci-gpu set qos=ci-limited defaultqos=ci-limited >/dev/null 2>&1 || true
  got=$(sacctmgr -n -P show qos ci-limited format=maxsubmitjobsperuser,maxtresperuser 2>/dev/null)
  if [ "$got" != "$q_submit|gres/gpu=$q_gpus" ]; then
    echo "slurm-ci: the QOS ci-limited reads '$got', not '$q_submit|gres/gpu=$q_gpus'" >&2; exit 1
  fi
  scontrol reconfigure >/dev/null 2>&1 || true
  log "GPU mode: gpu:$GPUS a node (stand-in devices under /run/slurm-ci/gpus), partitions gpu (default) and debug," \
    "account ci-gpu with QOS ci-limited (MaxSubmitJobsPerUser=$q_submit, MaxTRESPerUser=gres/gpu=$q_gpus)"
fi
log "cluster ready: $(sinfo -h -N -o '%N' | sort -u | tr '\n' ' ')(slurmd pids: $(cat /run/slurm/slurmd-*.pid | tr '\n' ' '))"
