#!/usr/bin/env bash
# The real container runtimes of the test suite: Podman, Docker and Apptainer from Debian's
# archive, configured for these machines, and one small base image with Python for each.
#
#   scripts/container-runtimes.sh [start|stop|status|uninstall]
#
# start      installs what is missing, starts dockerd (by pid file) and makes the base image:
#            debootstrap'ed once per machine (cached under $CACHE by the recipe's digest), then
#            imported into Podman and Docker and built into a SIF for Apptainer when missing.
# stop       stops the dockerd this script started and unmounts what it mounted.
# status     what is installed, running and built; exit 1 when anything is missing.
# uninstall  stop, then remove the Apptainer files this script unpacked.
#
# Facts of these machines the configuration answers (../shared/reference/container-runtimes.md):
# - Root lacks CAP_SYS_RESOURCE and the hard nofile limit is low (20000), so Podman's default
#   rlimits (1048576) fail with `setrlimit RLIMIT_NOFILE: Operation not permitted`; Podman
#   lowers its own RLIMIT_NPROC to 32768 before it starts conmon, so nproc must not pass that.
# - cgroups are hybrid (v1 + v2), which crun 1.8 refuses: Podman runs runc.
# - dockerd by default sets the FORWARD policy to DROP and makes a bridge, which would cut the
#   Slurm test cluster's nodes off: it runs with no iptables rules, no bridge, no forwarding.
# - No registry has Apptainer for bookworm; Debian unstable packages it against glibc 2.38,
#   and its two ELF files need only two symbols newer than bookworm's 2.36: they get sid's
#   glibc unpacked privately (interpreter and rpath), nothing of the system's changes.
# - Apptainer's `root default capabilities = full` asks for CAP_SYS_RESOURCE too: `file`.
# - Rootless Podman needs /dev/mqueue mounted.
# Nothing here touches a firewall rule, a bridge or a route.
set -euo pipefail

STATE=/run/hpcdet-containers
DOCKERD_PIDFILE=$STATE/dockerd.pid
MQUEUE_OURS=$STATE/mqueue.mounted-by-us
DOCKER_ROOT=/var/lib/hpcdet-docker
DOCKER_EXEC=/run/hpcdet-docker
DOCKER_SOCK=/var/run/docker.sock
CACHE=/var/cache/hpcdet-test-images
APPTAINER_FILES=/var/lib/hpcdet-containers/apptainer.files
APPTAINER_GLIBC=/opt/hpcdet-apptainer-glibc
# The Debian unstable version these machines were measured with; another one is tried, and
# start says which when it does not run.
APPTAINER_TESTED=1.4.5-2
CONTAINERS_CONF=/etc/containers/containers.conf
CONF_MARK="# written by hpcdet's scripts/container-runtimes.sh"
LOCK_FILE=/run/hpcdet-container-runtimes.lock
# The base image: Debian bookworm minbase with Python 3.11 (the trial side's interpreter).
IMAGE=localhost/hpcdet-test-base:py3
SIF=$CACHE/hpcdet-test-base.sif
TARBALL=$CACHE/hpcdet-test-base.tar
RECIPE="bookworm minbase python3 v1"

log() { echo "[container-runtimes] $*"; }
die() { echo "[container-runtimes] ERROR: $*" >&2; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "'$1' needs root"; }

take_lock() {
    mkdir -p "$(dirname "$LOCK_FILE")"
    exec 9>"$LOCK_FILE"
    flock -w 600 9 || die "could not lock $LOCK_FILE"
}

mirror() { awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
    true; }

apt_install() {
    local policy=/usr/sbin/policy-rc.d added_policy=0 rc=0
    # Packages' postinst must not start docker or containerd units of their own.
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    {
        export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes
        apt-get update -qq &&
            apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    } || rc=$?
    ((added_policy)) && rm -f "$policy"
    ((rc == 0)) || die "apt-get install $* failed (rc=$rc)"
}

install_packages() {
    local missing=() p
    for p in podman catatonit runc uidmap slirp4netns fuse-overlayfs containernetworking-plugins \
        iptables docker.io debootstrap patchelf squashfuse squashfs-tools fuse3 e2fsprogs \
        libseccomp2 libsqlite3-0 ca-certificates binutils; do
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    log "installing ${missing[*]} with apt"
    apt_install "${missing[@]}"
}

# --- Apptainer from Debian unstable ----------------------------------------------------------

apptainer_runs() { apptainer version >/dev/null 2>&1; }

install_apptainer() {
    apptainer_runs && return 0
    log "installing Apptainer from Debian unstable (its glibc unpacked to $APPTAINER_GLIBC)"
    local tmp src version
    tmp=$(mktemp -d)
    mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs" "$tmp/glibc"
    src=$(mirror)
    printf 'Types: deb\nURIs: %s\nSuites: sid\nComponents: main\nSigned-By: %s\n' \
        "${src:-http://deb.debian.org/debian}" /usr/share/keyrings/debian-archive-keyring.gpg \
        >"$tmp/sid.sources"
    # Private lists: the system's apt never sees sid.
    local opts=(-o "Dir::Etc::SourceList=$tmp/sid.sources" -o Dir::Etc::SourceParts=-
        -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o Debug::NoLocking=1
        -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" update -qq || die "apt-get update for Debian unstable failed"
    version=$(apt-cache "${opts[@]}" policy apptainer | awk '/Candidate:/{print $2}')
    [[ -n $version && $version != "(none)" ]] || die "Debian unstable has no apptainer package"
    [[ $version == "$APPTAINER_TESTED" ]] ||
        log "note: Debian unstable's apptainer is $version; these machines were measured with $APPTAINER_TESTED"
    local libc
    libc=$(apt-cache "${opts[@]}" show libc6 | awk '/^Version:/{print $2; exit}')
    (cd "$tmp/debs" && apt-get "${opts[@]}" download "apptainer=$version" "libc6=$libc" >/dev/null) ||
        die "could not download apptainer $version and libc6 $libc from Debian unstable"
    mkdir -p "$(dirname "$APPTAINER_FILES")"
    dpkg-deb -c "$tmp"/debs/apptainer_*.deb | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' \
        >"$APPTAINER_FILES"
    dpkg-deb -x "$tmp"/debs/apptainer_*.deb /
    dpkg-deb -x "$tmp"/debs/libc6_*.deb "$tmp/glibc"
    rm -rf "$APPTAINER_GLIBC"
    mkdir -p "$APPTAINER_GLIBC"
    cp -a "$tmp"/glibc/usr/lib/x86_64-linux-gnu/. "$APPTAINER_GLIBC"/
    [[ -e $APPTAINER_GLIBC/ld-linux-x86-64.so.2 ]] ||
        cp -a "$tmp"/glibc/usr/lib64/ld-linux-x86-64.so.2 "$APPTAINER_GLIBC"/ 2>/dev/null || true
    [[ -e $APPTAINER_GLIBC/ld-linux-x86-64.so.2 ]] || die "sid's libc6 $libc has no ld-linux-x86-64.so.2"
    local elf
    for elf in /usr/bin/apptainer /usr/lib/x86_64-linux-gnu/apptainer/bin/starter; do
        patchelf --set-interpreter "$APPTAINER_GLIBC/ld-linux-x86-64.so.2" --force-rpath \
            --set-rpath "$APPTAINER_GLIBC" "$elf"
    done
    sed -i 's/^root default capabilities = .*/root default capabilities = file/' \
        /etc/apptainer/apptainer.conf
    rm -rf "$tmp"
    apptainer_runs || die "apptainer $version from Debian unstable does not run here" \
        "(tested: $APPTAINER_TESTED): $(apptainer version 2>&1 | tail -1)"
    log "apptainer $(apptainer version) installed"
}

uninstall_apptainer() {
    [[ -s $APPTAINER_FILES ]] || return 0
    local f
    while IFS= read -r f; do
        [[ -n $f && ( -f $f || -L $f ) ]] && rm -f "$f"
    done <"$APPTAINER_FILES"
    rm -rf "$APPTAINER_GLIBC" "$APPTAINER_FILES"
    log "removed Apptainer's files"
}

# --- Podman ----------------------------------------------------------------------------------

write_containers_conf() {
    local hard nofile
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] && nofile=1048576 || nofile=$hard
    if [[ -e $CONTAINERS_CONF ]] && ! grep -qF "$CONF_MARK" "$CONTAINERS_CONF"; then
        grep -q '^runtime *= *"runc"' "$CONTAINERS_CONF" ||
            die "$CONTAINERS_CONF exists and is not ours; Podman here needs runtime = \"runc\"" \
                "and default_ulimits within the hard limits (see this script's header)"
        return 0
    fi
    mkdir -p "$(dirname "$CONTAINERS_CONF")"
    cat >"$CONTAINERS_CONF.new" <<EOF
$CONF_MARK
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOF
    mv "$CONTAINERS_CONF.new" "$CONTAINERS_CONF"
}

mount_mqueue() {
    grep -q ' /dev/mqueue mqueue ' /proc/mounts && return 0
    mkdir -p /dev/mqueue
    mount -t mqueue none /dev/mqueue
    : >"$MQUEUE_OURS"
}

# --- Docker ----------------------------------------------------------------------------------

pid_from_file() {
    local pid
    [[ -r $1 ]] || return 1
    pid=$(tr -dc '0-9' <"$1")
    [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]] || return 1
    echo "$pid"
}

docker_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start_dockerd() {
    if docker_up; then
        pid_from_file "$DOCKERD_PIDFILE" dockerd >/dev/null ||
            log "a dockerd this script did not start answers on $DOCKER_SOCK: using it"
        return 0
    fi
    [[ -S $DOCKER_SOCK ]] && rm -f "$DOCKER_SOCK"  # a dead daemon's socket
    mkdir -p "$DOCKER_ROOT" "$DOCKER_EXEC"
    /usr/sbin/dockerd --iptables=false --ip-masq=false --ip-forward=false --bridge=none \
        --data-root "$DOCKER_ROOT" --exec-root "$DOCKER_EXEC" --pidfile "$DOCKERD_PIDFILE" \
        -H "unix://$DOCKER_SOCK" >"$STATE/dockerd.log" 2>&1 9>&- </dev/null &
    disown
    local i
    for ((i = 0; i < 300; i++)); do
        docker_up && break
        sleep 0.1
    done
    docker_up || { tail -20 "$STATE/dockerd.log" >&2; die "dockerd did not come up in 30 s"; }
    log "started dockerd (pid $(pid_from_file "$DOCKERD_PIDFILE" dockerd || echo '?'))"
}

stop_dockerd() {
    local pid i
    pid=$(pid_from_file "$DOCKERD_PIDFILE" dockerd) || return 0
    kill -TERM "$pid"
    for ((i = 0; i < 200; i++)); do
        [[ -d /proc/$pid ]] || break
        sleep 0.1
    done
    [[ -d /proc/$pid ]] && kill -KILL "$pid"
    log "stopped dockerd (pid $pid)"
}

# --- the base image --------------------------------------------------------------------------

digest() { printf '%s %s' "$RECIPE" "$(mirror)" | sha256sum | cut -c1-16; }

build_rootfs() {
    local key rootfs
    key=$(digest)
    if [[ -s $TARBALL && $(cat "$CACHE/recipe" 2>/dev/null) == "$key" ]]; then
        return 0
    fi
    log "building the base image with debootstrap (recipe $key; about a minute)"
    mkdir -p "$CACHE"
    chmod 755 "$CACHE"
    rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    debootstrap --variant=minbase --include=python3 bookworm "$rootfs" \
        "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 ||
        die "debootstrap failed; see $CACHE/debootstrap.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*_Packages
    tar -C "$rootfs" -cf "$TARBALL.new" --numeric-owner .
    chmod 644 "$TARBALL.new"
    mv "$TARBALL.new" "$TARBALL"
    rm -rf "$CACHE/rootfs"
    mv "$rootfs" "$CACHE/rootfs"
    chmod 755 "$CACHE/rootfs"
    rm -f "$SIF"
    echo "$key" >"$CACHE/recipe"
    # The runtimes' copies of an older recipe are made again.
    podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
    docker rmi -f "$IMAGE" >/dev/null 2>&1 || true
}

image_label() { "$1" image inspect --format '{{index .Config.Labels "hpcdet.recipe"}}' "$IMAGE" 2>/dev/null; }

import_images() {
    local key rt
    key=$(cat "$CACHE/recipe")
    for rt in podman docker; do
        [[ $(image_label "$rt") == "$key" ]] && continue
        log "importing the base image into $rt"
        "$rt" import --change 'CMD ["/bin/bash"]' --change "LABEL hpcdet.recipe=$key" \
            "$TARBALL" "$IMAGE" >/dev/null
    done
    if [[ ! -s $SIF ]]; then
        log "building $SIF from the base image's files"
        apptainer build --force "$SIF.new" "$CACHE/rootfs" >"$CACHE/sif-build.log" 2>&1 ||
            die "apptainer build failed; see $CACHE/sif-build.log"
        chmod 644 "$SIF.new"
        mv "$SIF.new" "$SIF"
    fi
}

# --- commands --------------------------------------------------------------------------------

cmd_start() {
    need_root start
    take_lock
    local t0=$SECONDS
    mkdir -p "$STATE"
    install_packages
    install_apptainer
    write_containers_conf
    mount_mqueue
    start_dockerd
    build_rootfs
    import_images
    log "ready after $((SECONDS - t0))s: $(versions | tr '\n' ' ')"
}

versions() {
    echo "podman $(podman version --format '{{.Client.Version}}' 2>/dev/null || echo missing)"
    echo "docker $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo 'not answering')"
    echo "apptainer $(apptainer version 2>/dev/null || echo missing)"
}

cmd_stop() {
    need_root stop
    take_lock
    stop_dockerd
    if [[ -e $MQUEUE_OURS ]]; then
        umount /dev/mqueue 2>/dev/null || true
        rm -f "$MQUEUE_OURS"
    fi
}

cmd_status() {
    local rc=0 pid
    versions
    apptainer_runs || rc=1
    command -v podman >/dev/null || rc=1
    if pid=$(pid_from_file "$DOCKERD_PIDFILE" dockerd 2>/dev/null); then
        echo "dockerd: pid $pid"
    else
        echo "dockerd: not started by this script"
        docker_up || rc=1
    fi
    echo "base image: $IMAGE (recipe $(cat "$CACHE/recipe" 2>/dev/null || echo none)), SIF $SIF"
    [[ -s $SIF && -s $TARBALL ]] || rc=1
    return "$rc"
}

case ${1:-start} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    uninstall)
        cmd_stop
        uninstall_apptainer
        ;;
    *)
        echo "usage: $0 [start|stop|status|uninstall]" >&2
        exit 2
        ;;
esac
