#!/usr/bin/env bash
# A real two-node Slurm 22.05 test cluster on one Debian host (DESIGN.md §5, approach (a)).
#
#   scripts/slurm-test-cluster.sh [start|stop|status|restart|logs]
#
# slurmctld runs in the host network namespace on the bridge address; node1 and node2 are network
# (and UTS) namespaces on that bridge, each with its own slurmd, address and hostname.
# start/stop/restart need root; status does not; logs prints the daemons' last log lines.
#
# Environment:
#   HPCDET_TEST_MAX_ARRAY_SIZE  MaxArraySize (default 1001)
#   HPCDET_TEST_START_TIMEOUT   seconds to wait for both nodes (default 60)
#
# Quirks of nodes that are namespaces of one host:
# - The host's own name may resolve to 127.0.0.1, which inside a node is the node itself; jobs
#   reach the submit host at 10.197.0.1.
# - MPI: the PyPI wheels mpi4py + mpich work across both nodes with `srun --mpi=pmi2` and need
#   no interface selection (a node has only lo and eth0). The wheel's MPICH uses UCX, which sees
#   one host and moves inter-node data through shared memory (no traffic on the veths);
#   export UCX_TLS=self,tcp to send it over the bridge as on real nodes.
# - Do not use --mpi=pmix: both nodes share /tmp and collide on /tmp/spmix_appdir_<uid>_<job>.*
set -euo pipefail

CLUSTER_NAME=hpcdet-test
BRIDGE=hpcdet-br0
HOST_IP=10.197.0.1
NET_PREFIX=24
NODES=(node1 node2)
NODE_IPS=(10.197.0.11 10.197.0.12)
# Two more login nodes: network and UTS namespaces on the bridge that run no slurmd, where the
# tests run hpcdet as on a cluster's other login nodes (one filesystem, other host names).
LOGINS=(login1 login2)
LOGIN_IPS=(10.197.0.21 10.197.0.22)
NODE_CPUS=4
NODE_MEMORY_MB=4096

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE_DIR=/var/spool/slurmctld/$CLUSTER_NAME
SPOOL_BASE=/var/spool/slurmd
LOG_DIR=/var/log/slurm
RUN_DIR=/run/hpcdet-slurm
UTS_DIR=/run/hpcdet-uts
CTLD_PIDFILE=$RUN_DIR/slurmctld.pid
DBD_PIDFILE=$RUN_DIR/slurmdbd.pid
DBD_CONF=$CONF_DIR/slurmdbd.conf
DB_PIDFILE=/run/mysqld/mariadbd.pid  # where the server, as user mysql, may write it
DB_LOG_DIR=$LOG_DIR/mariadb
DB_SOCKET=/run/mysqld/mysqld.sock
# Only slurmdbd uses it, over the socket; the server listens on no port.
DB_PASSWORD=hpcdet-test-accounting
MUNGE_PIDFILE=/run/munge/munged.pid
MUNGE_OURS=$RUN_DIR/munged.started-by-us
LOCK_FILE=/run/hpcdet-slurm-test-cluster.lock
HOSTS_BEGIN="# >>> hpcdet-test-cluster >>>"
HOSTS_END="# <<< hpcdet-test-cluster <<<"

MAX_ARRAY_SIZE=${HPCDET_TEST_MAX_ARRAY_SIZE:-1001}
START_TIMEOUT=${HPCDET_TEST_START_TIMEOUT:-60}

if ! [[ $MAX_ARRAY_SIZE =~ ^(0|[1-9][0-9]{0,6})$ ]] || ((MAX_ARRAY_SIZE > 4000001)); then
    echo "HPCDET_TEST_MAX_ARRAY_SIZE must be 0..4000001, got '$MAX_ARRAY_SIZE'" >&2
    exit 2
fi
[[ $START_TIMEOUT =~ ^[0-9]+$ ]] ||
    { echo "HPCDET_TEST_START_TIMEOUT must be a number, got '$START_TIMEOUT'" >&2; exit 2; }

log() { echo "[slurm-test-cluster] $*"; }
die() { echo "[slurm-test-cluster] ERROR: $*" >&2; exit 1; }

need_root() { [[ $(id -u) -eq 0 ]] || die "'$1' needs root"; }

# Serialise start/stop/restart: parallel pytest workers may each call `start`. Every daemon is
# started with fd 9 closed (9>&-): a daemon inheriting it would hold the lock for its lifetime.
take_lock() {
    exec 9>"$LOCK_FILE"
    flock -w 300 9 || die "could not lock $LOCK_FILE"
}

# --- pid files -------------------------------------------------------------------------------

# Prints the pid recorded in $1 if that process is alive and its command name is $2. Checking
# the name guards against a stale pid file whose pid has been reused.
pid_from_file() {
    local file=$1 comm=$2 pid
    [[ -r $file ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]] || return 1
    echo "$pid"
}

# Arguments: triples "pidfile comm label". All get SIGTERM at once (each daemon takes ~2 s to
# exit), then SIGKILL whatever is still alive after 15 s.
stop_by_pidfiles() {
    local pids=() labels=() pid i j alive
    while (($# >= 3)); do
        if pid=$(pid_from_file "$1" "$2"); then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
            labels+=("$3")
        fi
        rm -f "$1"
        shift 3
    done
    for ((i = 0; i < 150; i++)); do
        alive=0
        for j in "${!pids[@]}"; do
            [[ -d /proc/${pids[$j]} ]] && alive=1
        done
        ((alive)) || break
        sleep 0.1
    done
    for j in "${!pids[@]}"; do
        if [[ -d /proc/${pids[$j]} ]]; then
            log "${labels[$j]} (pid ${pids[$j]}) ignored SIGTERM for 15 s; sending SIGKILL"
            kill -KILL "${pids[$j]}" 2>/dev/null || true
        fi
        log "stopped ${labels[$j]} (pid ${pids[$j]})"
    done
}

slurmd_pidfile() { echo "$RUN_DIR/slurmd-$1.pid"; }

# --- installation ----------------------------------------------------------------------------

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm munge)
    # Accounting: sacct, sacctmgr and the scheduler's records of ended jobs, as most sites have.
    command -v slurmdbd >/dev/null 2>&1 || missing+=(slurmdbd)
    command -v mariadbd >/dev/null 2>&1 || missing+=(mariadb-server)
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    command -v ps >/dev/null 2>&1 || missing+=(procps)
    [[ -x /usr/sbin/cron ]] || missing+=(cron)
    [[ ${#missing[@]} -eq 0 ]] && return 0
    log "installing ${missing[*]} with apt"
    # On hosts with systemd (CI runners) the packages' postinst would start munge/slurm units
    # that fight with the daemons this script manages; policy-rc.d exit 101 forbids that.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    local rc=0
    {
        export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes
        apt-get update -qq &&
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    } || rc=$?
    [[ $added_policy -eq 1 ]] && rm -f "$policy"
    [[ $rc -eq 0 ]] || die "apt-get install ${missing[*]} failed (rc=$rc)"
}

# --- munge -----------------------------------------------------------------------------------

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    if munge_works; then
        log "munged already running"
        return 0
    fi
    local key=/etc/munge/munge.key i
    if [[ ! -s $key ]]; then
        log "creating munge key"
        mkdir -p /etc/munge
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile="$key" --force
        else
            dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
        fi
    fi
    chown munge:munge /etc/munge "$key"
    chmod 700 /etc/munge
    chmod 600 "$key"
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 755 /run/munge
    runuser -u munge -- /usr/sbin/munged 9>&-
    : >"$MUNGE_OURS"
    for ((i = 0; i < 50; i++)); do
        munge_works && break
        sleep 0.1
    done
    munge_works || die "munged did not come up; see /var/log/munge/munged.log"
    log "started munged (pid $(pid_from_file "$MUNGE_PIDFILE" munged || echo '?'))"
}

# The login node's cron, which `hpcdet daemon supervise --via cron` installs an entry for.
start_cron() {
    pgrep -x cron >/dev/null && return 0
    /usr/sbin/cron 9>&-
    log "started cron"
}

# --- configuration ---------------------------------------------------------------------------

render_conf() {
    local ctl_host max_jobs i
    ctl_host=$(hostname -s)
    # MaxJobCount must stay above MaxArraySize or big arrays are rejected.
    max_jobs=$((MAX_ARRAY_SIZE * 2 > 10000 ? MAX_ARRAY_SIZE * 2 : 10000))
    cat <<EOF
# Generated by hpcdet scripts/slurm-test-cluster.sh; rewritten on every start.
ClusterName=$CLUSTER_NAME
# Clients and the slurmds inside the node namespaces reach slurmctld at the bridge address;
# the host name alone may resolve to 127.0.0.1, which inside a namespace is the node itself.
SlurmctldHost=$ctl_host($HOST_IP)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE_DIR
SlurmdSpoolDir=$SPOOL_BASE/%n
SlurmctldPidFile=$CTLD_PIDFILE
SlurmdPidFile=$RUN_DIR/slurmd-%n.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# Not the cgroup plugins: both slurmds would manage the one cgroup hierarchy of the host.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
MaxArraySize=$MAX_ARRAY_SIZE
MaxJobCount=$max_jobs
SchedulerType=sched/backfill
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SchedulerParameters=enable_user_top
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PriorityType=priority/multifactor
PriorityWeightPartition=1000
PriorityWeightAge=0
PriorityWeightFairshare=0
PriorityWeightJobSize=0
PriorityWeightQOS=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$HOST_IP
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# The nodes advertise more CPUs than the host has; without config_overrides slurmctld would
# drain them for having fewer CPUs than configured.
SlurmdParameters=config_overrides
EOF
    for i in "${!NODES[@]}"; do
        echo "NodeName=${NODES[$i]} NodeAddr=${NODE_IPS[$i]} NodeHostname=${NODES[$i]}" \
            "CPUs=$NODE_CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$NODE_CPUS" \
            "ThreadsPerCore=1 RealMemory=$NODE_MEMORY_MB State=UNKNOWN"
    done
    local nodelist
    nodelist=$(IFS=,; echo "${NODES[*]}")
    # Only jobs in `preemptible` are ever preempted, and only by jobs in `urgent`: the
    # preemption tests (PreemptMode=OFF keeps every other partition's jobs running).
    echo "PartitionName=debug Nodes=$nodelist Default=YES MaxTime=INFINITE State=UP" \
        "PreemptMode=OFF"
    echo "PartitionName=batch Nodes=$nodelist Default=NO MaxTime=INFINITE State=UP" \
        "PreemptMode=OFF"
    echo "PartitionName=preemptible Nodes=$nodelist Default=NO MaxTime=INFINITE State=UP" \
        "PriorityTier=1 PreemptMode=REQUEUE GraceTime=30"
    echo "PartitionName=urgent Nodes=$nodelist Default=NO MaxTime=INFINITE State=UP" \
        "PriorityTier=10 PreemptMode=OFF"
    # Only root's group may use it: the job-queue tests' refused partition change.
    echo "PartitionName=restricted Nodes=$nodelist Default=NO MaxTime=INFINITE State=UP" \
        "AllowGroups=root PreemptMode=OFF"
}

render_dbd_conf() {
    cat <<EOF
# Generated by hpcdet scripts/slurm-test-cluster.sh; rewritten on every start.
AuthType=auth/munge
DbdHost=$(hostname -s)
DbdAddr=$HOST_IP
SlurmUser=root
PidFile=$DBD_PIDFILE
LogFile=$LOG_DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$DB_PASSWORD
EOF
}

# Writes slurm.conf; returns 0 if the file changed.
write_conf() {
    local new
    new=$(render_conf)
    if [[ -f $CONF ]] && [[ $(cat "$CONF") == "$new" ]]; then
        return 1
    fi
    mkdir -p "$CONF_DIR"
    if [[ -f $CONF ]] && ! grep -q '^# Generated by hpcdet' "$CONF" && [[ ! -e $CONF.pre-hpcdet ]]
    then
        cp -p "$CONF" "$CONF.pre-hpcdet"
        log "saved the existing slurm.conf as $CONF.pre-hpcdet"
    fi
    printf '%s\n' "$new" >"$CONF"
    chmod 644 "$CONF"
    return 0
}

# --- network ---------------------------------------------------------------------------------

setup_bridge() {
    ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
    ip -4 addr show dev "$BRIDGE" | grep -q "inet $HOST_IP/" ||
        ip addr add "$HOST_IP/$NET_PREFIX" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    # With br_netfilter loaded (Docker does that) bridged node-to-node traffic passes the
    # iptables FORWARD chain, whose policy Docker sets to DROP.
    if [[ $(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo 0) == 1 ]] &&
        command -v iptables >/dev/null 2>&1; then
        iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null ||
            iptables -I FORWARD 1 -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
    fi
}

setup_node_net() {
    local node=$1 addr=$2 veth="hpcdet-$1"
    [[ -e /run/netns/$node ]] || ip netns add "$node"
    if ip link show "$veth" >/dev/null 2>&1 && ! ip -n "$node" link show eth0 >/dev/null 2>&1
    then
        ip link del "$veth"
    fi
    ip link show "$veth" >/dev/null 2>&1 ||
        ip link add "$veth" type veth peer name eth0 netns "$node"
    ip link set "$veth" master "$BRIDGE" up
    ip -n "$node" link set lo up
    ip -n "$node" link set eth0 up
    ip -n "$node" -4 addr show dev eth0 | grep -q "inet $addr/" ||
        ip -n "$node" addr add "$addr/$NET_PREFIX" dev eth0
    ip -n "$node" route replace default via "$HOST_IP" dev eth0
    # A node cannot reach the host's resolver, so a lookup that /etc/hosts does not answer
    # (torchrun's c10d store looks up every client's address, ::ffff:10.197.0.x) would wait
    # 10 s for it. Each of the host's nameservers becomes an address of the node's loopback,
    # where nothing listens: such a lookup fails at once, as a real node's resolver answers
    # at once.
    local ns
    for ns in $(awk '$1 == "nameserver" && $2 ~ /^[0-9.]+$/ && $2 !~ /^127\./ {print $2}' \
        /etc/resolv.conf); do
        ip -n "$node" -4 addr show dev lo | grep -q "inet $ns/" ||
            ip -n "$node" addr add "$ns/32" dev lo
    done
    # A UTS namespace per node so that `hostname` in a job prints node1/node2 (resolvable through
    # the /etc/hosts block), as on real nodes.
    mkdir -p "$UTS_DIR"
    if ! mountpoint -q "$UTS_DIR/$node"; then
        : >"$UTS_DIR/$node"
        unshare --uts="$UTS_DIR/$node" hostname "$node"
    fi
}

teardown_network() {
    local node removed=0
    for node in "${NODES[@]}" "${LOGINS[@]}"; do
        if [[ -e /run/netns/$node ]]; then
            ip netns del "$node"
            removed=1
        fi
        ip link del "hpcdet-$node" 2>/dev/null || true
        if mountpoint -q "$UTS_DIR/$node" 2>/dev/null; then
            umount "$UTS_DIR/$node"
        fi
        rm -f "$UTS_DIR/$node"
    done
    rmdir "$UTS_DIR" 2>/dev/null || true
    if command -v iptables >/dev/null 2>&1; then
        while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; do :; done
    fi
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link del "$BRIDGE"
        removed=1
    fi
    ((removed == 0)) || log "removed namespaces ${NODES[*]} and bridge $BRIDGE"
}

# /etc/hosts is rewritten in place, not replaced: in containers it is a bind mount and
# `sed -i` (rename) fails on it.
hosts_without_block() {
    awk -v b="$HOSTS_BEGIN" -v e="$HOSTS_END" \
        '$0 == b {skip = 1; next} $0 == e {skip = 0; next} !skip' /etc/hosts
}

write_hosts() {
    local block i current
    block=$HOSTS_BEGIN$'\n'
    # Debian's own /etc/hosts names ::1; some containers' do not.
    grep -qE '^::1[[:space:]]' <(hosts_without_block) || block+="::1 localhost ip6-localhost ip6-loopback"$'\n'
    for i in "${!NODES[@]}"; do
        block+="${NODE_IPS[$i]} ${NODES[$i]}"$'\n'
    done
    for i in "${!LOGINS[@]}"; do
        block+="${LOGIN_IPS[$i]} ${LOGINS[$i]}"$'\n'
    done
    block+=$HOSTS_END
    current=$(hosts_without_block)
    [[ $(cat /etc/hosts) == "$current"$'\n'"$block" ]] && return 0
    printf '%s\n%s\n' "$current" "$block" >/etc/hosts
}

remove_hosts() {
    grep -qxF "$HOSTS_BEGIN" /etc/hosts || return 0
    local current
    current=$(hosts_without_block)
    printf '%s\n' "$current" >/etc/hosts
}

# --- accounting: MariaDB and slurmdbd ---------------------------------------------------------

db_up() { mariadb-admin --socket="$DB_SOCKET" ping >/dev/null 2>&1; }
dbd_up() { sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1; }

start_accounting() {
    local i pid new
    if ! db_up; then
        [[ -d /var/lib/mysql/mysql ]] ||
            mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null ||
            die "mariadb-install-db failed"
        mkdir -p /run/mysqld "$DB_LOG_DIR"
        chown mysql:mysql /run/mysqld "$DB_LOG_DIR"
        setsid mariadbd --user=mysql --datadir=/var/lib/mysql --socket="$DB_SOCKET" \
            --pid-file="$DB_PIDFILE" --skip-networking --log-error="$DB_LOG_DIR/error.log" \
            </dev/null >/dev/null 2>&1 9>&- &
        for ((i = 0; i < 300; i++)); do
            db_up && break
            sleep 0.1
        done
        db_up || fail_with_logs "mariadbd did not answer within 30 s"
        log "started mariadbd (pid $(pid_from_file "$DB_PIDFILE" mariadbd || echo '?'))"
    fi
    mariadb --socket="$DB_SOCKET" -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' \
        IDENTIFIED BY '$DB_PASSWORD'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" ||
        die "could not create the accounting database's user"
    new=$(render_dbd_conf)
    if [[ ! -f $DBD_CONF || $(cat "$DBD_CONF") != "$new" ]]; then
        (umask 077 && printf '%s\n' "$new" >"$DBD_CONF")
        stop_by_pidfiles "$DBD_PIDFILE" slurmdbd slurmdbd
    fi
    chmod 600 "$DBD_CONF"
    if ! pid=$(pid_from_file "$DBD_PIDFILE" slurmdbd); then
        slurmdbd 9>&- || fail_with_logs "slurmdbd exited with status $?"
        for ((i = 0; i < 300; i++)); do
            dbd_up && break
            sleep 0.1
        done
        dbd_up || fail_with_logs "slurmdbd did not answer within 30 s"
        log "started slurmdbd (pid $(pid_from_file "$DBD_PIDFILE" slurmdbd || echo '?'))"
    fi
    # slurmctld registers only a cluster the database knows.
    if [[ -z $(sacctmgr -n -P show cluster "$CLUSTER_NAME" format=cluster 2>/dev/null) ]]; then
        sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null ||
            die "sacctmgr add cluster $CLUSTER_NAME failed"
    fi
}

stop_accounting() {
    stop_by_pidfiles "$DBD_PIDFILE" slurmdbd slurmdbd "$DB_PIDFILE" mariadbd mariadbd
}

# --- slurm daemons ---------------------------------------------------------------------------

start_slurmctld() {
    local pid
    if pid=$(pid_from_file "$CTLD_PIDFILE" slurmctld); then
        log "slurmctld already running (pid $pid)"
        return 0
    fi
    mkdir -p "$STATE_DIR" "$LOG_DIR" "$RUN_DIR"
    # -c: no jobs from the saved state. Their processes died with the nodes (a stopped
    # cluster, a new boot), yet slurmctld would count them running and hold the nodes with
    # them until it noticed, minutes into the next test run.
    slurmctld -c 9>&- || fail_with_logs "slurmctld exited with status $?"
    log "started slurmctld (pid $(pid_from_file "$CTLD_PIDFILE" slurmctld || echo '?'))"
}

start_slurmd() {
    local node=$1 pidfile pid i
    pidfile=$(slurmd_pidfile "$node")
    if pid=$(pid_from_file "$pidfile" slurmd); then
        log "slurmd $node already running (pid $pid)"
        return 0
    fi
    mkdir -p "$SPOOL_BASE/$node" "$LOG_DIR" "$RUN_DIR"
    # nsenter rather than `ip netns exec`: the latter also unshares the mount namespace and
    # remounts /sys, which hides the host's cgroup mounts, and slurmd then fails to start.
    nsenter --net="/run/netns/$node" --uts="$UTS_DIR/$node" slurmd -N "$node" 9>&- ||
        fail_with_logs "slurmd $node exited with status $?"
    # slurmd writes its pid file only after it has daemonised.
    for ((i = 0; i < 30; i++)); do
        pid_from_file "$pidfile" slurmd >/dev/null && break
        sleep 0.1
    done
    log "started slurmd $node (pid $(pid_from_file "$pidfile" slurmd || echo '?'))"
}

ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

# "node state" lines; sinfo state codes with a suffix (*, ~, #, !, %, $, @) are not usable.
node_states() { sinfo -h -N -o '%N %t' 2>/dev/null | sort -u; }

# Up: free, in use, finishing, or held for a pending job by the backfill scheduler (plnd, or
# the "-" suffix sinfo(1) gives a node "planned by the backfill scheduler for a higher
# priority job": "mix-" when a 4-slot trial waits for CPUs a running job holds).
nodes_up() {
    local states node
    states=$(node_states) || return 1
    for node in "${NODES[@]}"; do
        grep -qE "^$node (idle|mix|alloc|comp|plnd|resv)-?$" <<<"$states" || return 1
    done
}

# Nodes left drained or down by an earlier run (ReturnToService only revives nodes that went
# down for not responding) are resumed once they respond again.
resume_stuck_nodes() {
    local node state
    while read -r node state; do
        [[ " ${NODES[*]} " == *" $node "* ]] || continue
        case $state in
            drain | down) scontrol update nodename="$node" state=resume 2>/dev/null || true ;;
        esac
    done < <(node_states)
}

print_log_tails() {
    local f files=("$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmdbd.log" "$DB_LOG_DIR/error.log")
    for f in "${NODES[@]}"; do
        files+=("$LOG_DIR/slurmd-$f.log")
    done
    for f in "${files[@]}"; do
        echo "----- tail $f -----" >&2
        tail -n 25 "$f" >&2 2>/dev/null || echo "(missing)" >&2
    done
}

# Fails, naming the first dead daemon, if a daemon's pid file has no live process.
daemons_alive() {
    local node
    pid_from_file "$CTLD_PIDFILE" slurmctld >/dev/null ||
        { echo "slurmctld is not running"; return 1; }
    for node in "${NODES[@]}"; do
        pid_from_file "$(slurmd_pidfile "$node")" slurmd >/dev/null ||
            { echo "slurmd $node is not running"; return 1; }
    done
}

fail_with_logs() {
    echo "[slurm-test-cluster] ERROR: $*" >&2
    print_log_tails
    exit 1
}

wait_for_nodes() {
    local deadline=$((SECONDS + START_TIMEOUT)) resumed=0 why
    while true; do
        # slurmctld notices a dead slurmd only after SlurmdTimeout, so check the pid files too.
        why=$(daemons_alive) || fail_with_logs "$why"
        ctld_up && nodes_up && break
        if ((SECONDS >= deadline)); then
            fail_with_logs "nodes not up after ${START_TIMEOUT}s: $(node_states | tr '\n' ' ')"
        fi
        if ((resumed == 0)) && ctld_up && node_states | grep -qE ' (drain|down)$'; then
            resume_stuck_nodes
            resumed=1
        fi
        sleep 0.5
    done
}

# Cancel all jobs so that no slurmstepd outlives its node namespace; best effort.
cancel_all_jobs() {
    ctld_up || return 0
    local ids i
    ids=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ -n ${ids// /} ]] || return 0
    # shellcheck disable=SC2086
    scancel $ids 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do
        [[ -z $(squeue -h -o '%A' 2>/dev/null) ]] && break
        sleep 0.5
    done
    log "cancelled jobs: $ids"
}

stop_slurm_daemons() {
    local node args=()
    for node in "${NODES[@]}"; do
        args+=("$(slurmd_pidfile "$node")" slurmd "slurmd $node")
    done
    stop_by_pidfiles "${args[@]}" "$CTLD_PIDFILE" slurmctld slurmctld
}

# A daemon that aborted left a core in its working directory, the log directory: named by the
# time it was found, so that the next crash does not overwrite it, and reported.
keep_cores() {
    local core kept
    for core in "$LOG_DIR"/core "$LOG_DIR"/core.[0-9]*; do
        [[ -f $core ]] || continue
        kept="$LOG_DIR/crash-$(date -u +%Y%m%dT%H%M%S)-${core##*/}"
        mv "$core" "$kept"
        log "a daemon dumped core: $kept ($(file -b "$kept" 2>/dev/null | grep -o "from '[^']*'" ||
            echo 'file(1) missing')); gdb -batch -ex bt /usr/sbin/slurmd $kept"
    done
}

# --- commands --------------------------------------------------------------------------------

cmd_start() {
    need_root start
    take_lock
    local t0=$SECONDS i node
    install_packages
    mkdir -p "$RUN_DIR" "$LOG_DIR" "$STATE_DIR"
    keep_cores
    start_munge
    if write_conf; then
        log "wrote $CONF (MaxArraySize=$MAX_ARRAY_SIZE)"
        # Running daemons must re-read it; node definitions are not changed by reconfigure.
        stop_slurm_daemons
    fi
    setup_bridge
    for i in "${!NODES[@]}"; do
        setup_node_net "${NODES[$i]}" "${NODE_IPS[$i]}"
    done
    for i in "${!LOGINS[@]}"; do
        setup_node_net "${LOGINS[$i]}" "${LOGIN_IPS[$i]}"
    done
    start_cron
    write_hosts
    log "network: $BRIDGE $HOST_IP/$NET_PREFIX, ${NODES[0]} ${NODE_IPS[0]}," \
        "${NODES[1]} ${NODE_IPS[1]}"
    start_accounting
    start_slurmctld
    for node in "${NODES[@]}"; do
        start_slurmd "$node"
    done
    wait_for_nodes
    log "ready after $((SECONDS - t0))s: $(node_states | tr '\n' ' ')"
}

cmd_stop() {
    need_root stop
    take_lock
    cancel_all_jobs
    stop_slurm_daemons
    stop_accounting
    if [[ -e $MUNGE_OURS ]]; then
        stop_by_pidfiles "$MUNGE_PIDFILE" munged munged
        rm -f "$MUNGE_OURS"
    fi
    teardown_network
    remove_hosts
}

cmd_status() {
    local rc=0 node pidfile pid
    if pid=$(pid_from_file "$CTLD_PIDFILE" slurmctld 2>/dev/null); then
        echo "slurmctld: pid $pid"
    else
        echo "slurmctld: not running (no live pid in $CTLD_PIDFILE)"
        rc=1
    fi
    for node in "${NODES[@]}"; do
        pidfile=$(slurmd_pidfile "$node")
        if pid=$(pid_from_file "$pidfile" slurmd 2>/dev/null); then
            echo "slurmd $node: pid $pid"
        else
            echo "slurmd $node: not running"
            rc=1
        fi
    done
    if ! command -v scontrol >/dev/null 2>&1; then
        echo "scontrol: not installed"
        return 1
    fi
    if ctld_up; then
        echo "scontrol ping: UP"
        node_states | sed 's/^/node /'
        nodes_up || rc=1
    else
        echo "scontrol ping: slurmctld does not answer"
        rc=1
    fi
    return "$rc"
}

case ${1:-start} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    logs) print_log_tails 2>&1 ;;
    restart)
        cmd_stop
        cmd_start
        ;;
    *)
        echo "usage: $0 [start|stop|status|restart|logs]" >&2
        exit 2
        ;;
esac
