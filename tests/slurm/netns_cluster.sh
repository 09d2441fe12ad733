# shellcheck shell=bash
# A throw-away multi-node Slurm cluster on one machine, for tests: N "nodes", each a network
# namespace with its own host name (a UTS namespace) and one slurmd, wired by veth pairs into a
# bridge; slurmctld and munged on a "head" namespace that owns the bridge. Source this file:
#   netns_cluster_start DIR N [CPUS]   # N nodes of CPUS CPUs (default 2); exports SLURM_CONF
#   netns_cluster_exec CMD...          # CMD on the head (sbatch, squeue, scontrol: the login node)
#   netns_cluster_stop                 # cancels jobs, stops every process by PID, deletes it all
# Layout, for N = 2 and tag T (random per cluster):
#
#   netns dlperf-T-head  (host name mTh)               netns dlperf-T-n1 (host name mTn1)
#     br0 10.213.0.254/24 --- v1 ==veth== eth0 10.213.0.1/24   slurmd -N mTn1
#     munged, slurmctld   \-- v2 ==veth== eth0 10.213.0.2/24   slurmd -N mTn2   (netns dlperf-T-n2)
#
# Nothing is added to the machine's own network namespace (no bridge, route or listening
# port there), so every packet stays inside these namespaces, the fixed Slurm ports cannot
# collide with anything (ports are per namespace), and two clusters (two test runs) never
# meet: each has its own tag, bridge, namespaces, munge key and state directory, and its
# node host names (which Open MPI's /dev/shm and session file names contain) are unique.
# Each node's Slurm temporary directory (TmpFS, where the PMIx plugin puts files whose names
# are the same on every node) is its own, under DIR. Outside DIR: /run/netns/dlperf-T-*.
# Namespaces are entered with nsenter, never `ip netns exec` or `ip -n`: those remount /sys
# and make / a slave mount, which fails in a chroot (scripts/check-fresh-machine.sh) where /
# is not a mount point; nothing here needs a mount namespace. Node names resolve through
# NodeAddr in slurm.conf; nothing else looks them up.
#
# The node links: netns_cluster_link_dev I prints node I's switch-side veth (in the head
# namespace) for `tc` or `ip link set down`; netns_cluster_shape RATE sets every link's
# bandwidth both ways (tbf). Node I's processes: `ip netns pids "$(netns_cluster_ns I)"`.
# Needs root, iproute2 (ip, tc), util-linux (nsenter, unshare), slurm-wlm and munge.

NETNS_CLUSTER_PIDS=()  # "name:pid" of every daemon started, in start order
NETNS_CLUSTER_NS=()    # namespaces created, head first
NETNS_CLUSTER_TAG=
NETNS_CLUSTER_NODES=0
# shellcheck disable=SC2034  # for the caller
NETNS_CLUSTER_JOB_STATE=       # set by netns_cluster_wait_job
readonly NETNS_CLUSTER_NET=10.213.0    # /24 inside the head namespace only
readonly NETNS_CLUSTER_PORT=6817       # slurmctld; slurmd on +1: per namespace, never shared

netns_cluster_log() { echo "netns-cluster: $*" >&2; }

netns_cluster_ns() { echo "dlperf-$NETNS_CLUSTER_TAG-n$1"; }            # node I's namespace
netns_cluster_host() { echo "m${NETNS_CLUSTER_TAG}n$1"; }                  # node I's host and Slurm node name
netns_cluster_head() { echo "dlperf-$NETNS_CLUSTER_TAG-head"; }
netns_cluster_link_dev() { echo "v$1"; }                                  # in the head namespace
netns_cluster_in() { local ns=$1; shift; nsenter --net="/run/netns/$ns" "$@"; }  # CMD in namespace $1
netns_cluster_exec() { netns_cluster_in "$(netns_cluster_head)" "$@"; }

# Can this process make namespaces, veths and a bridge? Prints why not and returns 1.
netns_cluster_can_start() {
  local probe="dlperf-probe-$$" why=
  if [ "$(id -u)" -ne 0 ]; then echo "needs root (network namespaces, veth, bridge)"; return 1; fi
  for t in ip tc nsenter unshare munged mungekey slurmctld slurmd sbatch; do
    command -v "$t" >/dev/null || { echo "$t not found (scripts/setup-debian.sh --tests installs it)"; return 1; }
  done
  if ! why=$(ip netns add "$probe" 2>&1); then echo "cannot create a network namespace: $why"; return 1; fi
  if ! why=$(netns_cluster_in "$probe" ip link add br0 type bridge 2>&1 &&
             netns_cluster_in "$probe" ip link add v0 type veth peer name v1 2>&1 &&
             netns_cluster_in "$probe" tc qdisc add dev v0 root tbf rate 1mbit burst 16k latency 100ms 2>&1 &&
             netns_cluster_in "$probe" unshare --uts hostname dlperf-probe 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot create a bridge, veth pair, tbf qdisc or UTS namespace in a network namespace: $why"
    return 1
  fi
  ip netns del "$probe"
}

# Namespaces of earlier runs whose test process is gone (killed with SIGKILL, so its EXIT
# trap never ran): the tag starts with that process's PID. Their processes are killed by PID.
netns_cluster_remove_stale() {
  local ns owner pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^dlperf-[0-9]+x[0-9a-f]+-(head|n[0-9]+)$' || true); do
    owner=${ns#dlperf-}
    owner=${owner%%x*}
    kill -0 "$owner" 2>/dev/null && continue
    netns_cluster_log "removing $ns, left by test process $owner (gone)"
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}

# Starts a daemon in network namespace $2 under its own UTS namespace with host name $3; the
# rest is the command, its output going to $4. nsenter, unshare (without --fork) and sh exec
# in turn, so $! is the daemon's PID (nsenter itself, not a shell function: a function run
# in the background is a subshell that would stand between $! and the daemon).
netns_cluster_spawn() {
  local name=$1 ns=$2 host=$3 log=$4
  shift 4
  # shellcheck disable=SC2016
  nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$host" "$@" >"$log" 2>&1 &
  NETNS_CLUSTER_PIDS+=("$name:$!")
}

netns_cluster_start() {
  local dir=$1 n=$2 cpus=${3:-2} i ns head
  [ "$n" -ge 1 ] && [ "$n" -le 32 ] || { netns_cluster_log "node count $n out of 1..32"; return 1; }
  netns_cluster_remove_stale
  NETNS_CLUSTER_TAG="$$x$(printf '%04x' $((RANDOM % 65536)))"
  NETNS_CLUSTER_NODES=$n
  head=$(netns_cluster_head)
  mkdir -p "$dir"/{munge,state,log}
  for i in $(seq 1 "$n"); do
    mkdir -p "$dir/spool/$(netns_cluster_host "$i")" "$dir/tmp/$(netns_cluster_host "$i")"
    chmod 1777 "$dir/tmp/$(netns_cluster_host "$i")"
  done
  chmod 0755 "$dir" "$dir/munge"

  # The fabric: a bridge in the head namespace, one veth pair per node.
  ip netns add "$head" || return 1
  NETNS_CLUSTER_NS+=("$head")
  netns_cluster_in "$head" ip link set lo up
  netns_cluster_in "$head" ip link add br0 type bridge
  netns_cluster_in "$head" ip addr add "$NETNS_CLUSTER_NET.254/24" dev br0
  netns_cluster_in "$head" ip link set br0 up
  for i in $(seq 1 "$n"); do
    ns=$(netns_cluster_ns "$i")
    ip netns add "$ns" || return 1
    NETNS_CLUSTER_NS+=("$ns")
    netns_cluster_in "$ns" ip link set lo up
    netns_cluster_in "$head" ip link add "v$i" type veth peer name eth0 netns "$ns"
    netns_cluster_in "$head" ip link set "v$i" master br0 up
    netns_cluster_in "$ns" ip addr add "$NETNS_CLUSTER_NET.$i/24" dev eth0
    netns_cluster_in "$ns" ip link set eth0 up
  done

  mungekey --create --keyfile "$dir/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  local nodes="m${NETNS_CLUSTER_TAG}n[1-$n]"
  {
    cat <<CONF
# Generated by tests/slurm/netns_cluster.sh: $n nodes in network namespaces, state under $dir.
ClusterName=dlperfmn
SlurmctldHost=m${NETNS_CLUSTER_TAG}h($NETNS_CLUSTER_NET.254)
SlurmctldPort=$NETNS_CLUSTER_PORT
SlurmdPort=$((NETNS_CLUSTER_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
# Per node (the PMIx plugin's spmix_appdir_<uid>_<job>.<step> would collide in one /tmp).
TmpFS=$dir/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SchedulerType=sched/backfill
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
# srun gives a step whose tasks will not end (a node cut off) KillWait + 2 s after an abort.
KillWait=5
# An RPC to a node that does not answer (its link cut) fails after this long (Slurm's default,
# stated: multinode_test.sh's bound for a cut node counts it).
MessageTimeout=10
FirstJobId=$((1000 + RANDOM % 50000))
CONF
    for i in $(seq 1 "$n"); do
      echo "NodeName=$(netns_cluster_host "$i") NodeAddr=$NETNS_CLUSTER_NET.$i NodeHostname=$(netns_cluster_host "$i")" \
           "CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf

  netns_cluster_spawn munged "$head" "m${NETNS_CLUSTER_TAG}h" "$dir/log/munged.out" \
    munged -F --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --log-file="$dir/log/munged.log" --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed"
  for _ in $(seq 1 50); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
  netns_cluster_spawn slurmctld "$head" "m${NETNS_CLUSTER_TAG}h" "$dir/log/slurmctld.out" slurmctld -D -i -f "$SLURM_CONF"
  for _ in $(seq 1 100); do netns_cluster_exec scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
  for i in $(seq 1 "$n"); do
    netns_cluster_spawn "slurmd-n$i" "$(netns_cluster_ns "$i")" "$(netns_cluster_host "$i")" "$dir/log/slurmd-n$i.out" \
      slurmd -D -N "$(netns_cluster_host "$i")" -f "$SLURM_CONF"
  done
  local idle=0
  for _ in $(seq 1 300); do
    idle=$(netns_cluster_exec sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | grep -c . || true)
    if [ "$idle" -eq "$n" ]; then
      netns_cluster_log "up: $n nodes $nodes idle ($cpus CPUs each), head m${NETNS_CLUSTER_TAG}h, SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  netns_cluster_log "only $idle of $n nodes became idle; logs in $dir/log:"
  netns_cluster_exec sinfo -N >&2 || true
  tail -n 20 "$dir"/log/* >&2 || true
  return 1
}

# Bandwidth of every node link, both directions: a token bucket on each end of each veth
# (egress of the node's eth0 = what it sends; egress of the switch-side v$i = what it
# receives). RATE in tc units (100mbit); "none" removes the limit. The bucket holds 2 ms of
# traffic (at least 16 KiB, about ten full frames), so a link never bursts far above RATE.
netns_cluster_shape() {
  local rate=$1 i head burst bits
  head=$(netns_cluster_head)
  for i in $(seq 1 "$NETNS_CLUSTER_NODES"); do
    netns_cluster_in "$head" tc qdisc del dev "v$i" root 2>/dev/null || true
    netns_cluster_in "$(netns_cluster_ns "$i")" tc qdisc del dev eth0 root 2>/dev/null || true
  done
  [ "$rate" = none ] && return 0
  bits=$(netns_cluster_rate_bits "$rate") || return 1
  burst=$((bits / 8 / 500))
  [ "$burst" -ge 16384 ] || burst=16384
  for i in $(seq 1 "$NETNS_CLUSTER_NODES"); do
    netns_cluster_in "$head" tc qdisc add dev "v$i" root tbf rate "$rate" burst "$burst" latency 100ms || return 1
    netns_cluster_in "$(netns_cluster_ns "$i")" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms || return 1
  done
}

# "100mbit" -> 100000000 (bits/s; tc's decimal units kbit, mbit, gbit).
netns_cluster_rate_bits() {
  local v=${1%%[a-zA-Z]*} u=${1##*[0-9]}
  case $u in
    bit | "") echo "$v" ;;
    kbit) echo $((v * 1000)) ;;
    mbit) echo $((v * 1000000)) ;;
    gbit) echo $((v * 1000000000)) ;;
    *) netns_cluster_log "rate '$1': use bit, kbit, mbit or gbit"; return 1 ;;
  esac
}

# Stops what netns_cluster_start started: jobs are cancelled while slurmctld is up (so slurmd
# ends their steps), daemons get SIGTERM (SIGKILL after 10 s) newest first, any process still
# inside a node namespace (a job step that outlived its slurmd) is killed by PID, then the
# namespaces go, and with them the veths and the bridge.
netns_cluster_stop() {
  local i name pid ns
  if [ ${#NETNS_CLUSTER_PIDS[@]} -gt 0 ] && netns_cluster_exec scontrol ping >/dev/null 2>&1; then
    netns_cluster_exec squeue -h -o %i 2>/dev/null | xargs -r nsenter --net="/run/netns/$(netns_cluster_head)" scancel >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do
      [ -z "$(netns_cluster_exec squeue -h -t R,CG,PD -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for ((i = ${#NETNS_CLUSTER_PIDS[@]} - 1; i >= 0; i--)); do
    name=${NETNS_CLUSTER_PIDS[$i]%%:*}
    pid=${NETNS_CLUSTER_PIDS[$i]#*:}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      netns_cluster_log "$name ($pid) ignored SIGTERM: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  NETNS_CLUSTER_PIDS=()
  for ns in "${NETNS_CLUSTER_NS[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      netns_cluster_log "killing PID $pid ($(cat "/proc/$pid/comm" 2>/dev/null)), left in $ns"
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  for ns in "${NETNS_CLUSTER_NS[@]}"; do
    ip netns del "$ns" 2>/dev/null || netns_cluster_log "could not delete namespace $ns"
  done
  [ ${#NETNS_CLUSTER_NS[@]} -eq 0 ] || netns_cluster_log "stopped; namespaces ${NETNS_CLUSTER_NS[*]} deleted"
  NETNS_CLUSTER_NS=()
}

# Waits until job $1 has left the queue (at most $2 s) and sets NETNS_CLUSTER_JOB_STATE to
# its final state (COMPLETED, FAILED, ...). Not meant for $(...): the loop runs in the
# caller's shell, so its INT/TERM trap runs within one poll, not when the wait ends.
netns_cluster_wait_job() {
  local id=$1 limit=$2 t=0
  NETNS_CLUSTER_JOB_STATE=
  while [ -n "$(netns_cluster_exec squeue -h -j "$id" -o %i 2>/dev/null)" ]; do
    if [ "$t" -ge $((limit * 5)) ]; then
      netns_cluster_log "job $id still queued or running after $limit s"
      return 1
    fi
    sleep 0.2
    t=$((t + 1))
  done
  NETNS_CLUSTER_JOB_STATE=$(netns_cluster_job_state "$id")
}

# The state of job $1 as scontrol reports it (PENDING, RUNNING, COMPLETING, COMPLETED, ...).
netns_cluster_job_state() {
  netns_cluster_exec scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1
}
