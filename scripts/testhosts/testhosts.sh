#!/usr/bin/env bash
# Real systemd test hosts without Docker: systemd-nspawn containers booted from a cached
# Debian root filesystem (bookworm unless TESTHOSTS_RELEASE says otherwise), each in its own network namespace on a private bridge,
# reached over SSH. One script for molecule and pytest; interface in README.md next to it.
#
#   testhosts.sh rootfs                 build (or reuse) the cached root filesystem
#   testhosts.sh up N [--bind-ro SRC[:DST]]...   boot N hosts, write DIR/inventory.yml
#   testhosts.sh status                 one line per host; exit 1 if any host is down
#   testhosts.sh down                   stop every host of DIR and remove all it made
#   testhosts.sh info                   the release, the rootfs path and its cache stamp
#
# Environment: TESTHOSTS_DIR (state, default <repo>/build/testhosts), TESTHOSTS_RELEASE
# (Debian release, default bookworm), TESTHOSTS_ROOTFS (default <repo>/build/testhosts/rootfs
# for bookworm, rootfs-<release> for another), TESTHOSTS_MIRROR (Debian mirror).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${TESTHOSTS_DIR:-$REPO/build/testhosts}
SUITE=${TESTHOSTS_RELEASE:-bookworm}
# One cached rootfs per release (bookworm keeps the path it always had).
ROOTFS=${TESTHOSTS_ROOTFS:-$REPO/build/testhosts/rootfs$([ "$SUITE" = bookworm ] || printf -- '-%s' "$SUITE")}
MIRROR=${TESTHOSTS_MIRROR:-http://deb.debian.org/debian}
# What every host has. g++/make/git let a host build (fleet builds); the CUDA toolkit is
# bind-mounted from the controller when a test needs it (--bind-ro). python3-packaging:
# Ansible's pip module needs it on the node. rsync: the checkpoint role's mirror fan-out.
PACKAGES=python3,python3-venv,python3-packaging,openssh-server,iproute2,systemd,systemd-sysv,dbus,sudo,ca-certificates,g++,make,git,rsync
# Bump when the configuration written into the rootfs changes: the cache is rebuilt.
ROOTFS_VERSION=4
SLOTS=/run/bwtune-testhosts        # one /24 per running set of hosts (several test runs at once)
BOOT_TIMEOUT=${TESTHOSTS_BOOT_TIMEOUT:-90}
STOP_GRACE=${TESTHOSTS_STOP_GRACE:-10}

log() { printf 'testhosts: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 1
}

case $SUITE in
    *[!a-z]* | "") printf 'testhosts: TESTHOSTS_RELEASE=%q is not a Debian release name (bookworm, trixie, ...)\n' "$SUITE" >&2 && exit 2 ;;
esac

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (network namespaces, overlay mounts, nspawn)"; }

ensure_tools() {
    local missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
    command -v ssh-keygen >/dev/null || missing+=(openssh-client)
    command -v ssh >/dev/null || missing+=(openssh-client)
    command -v ip >/dev/null || missing+=(iproute2)
    # The controller serves the hosts files (a checkpoint mirror) with an rsync daemon.
    command -v rsync >/dev/null || missing+=(rsync)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    (
        flock 9
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
            { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; }
    ) 9>/run/lock/bwtune-testhosts-apt.lock
}

# Mounts left inside a root filesystem (debootstrap's /proc, /sys, /dev/pts when it is
# interrupted or a chroot step leaks one): unmounted deepest first, so the cache holds
# files only and `rm -rf` of an old copy never walks into /proc.
unmount_inside() {
    local dir mnt
    dir=$(realpath -m "$1")
    awk -v d="$dir/" 'index($2 "/", d) == 1 && $2 != d { print $2 }' /proc/self/mounts | sort -r |
        while read -r mnt; do
            umount "$mnt" 2>/dev/null || umount -l "$mnt" || log "could not unmount $mnt"
        done
}

rootfs_stamp() { printf 'version=%s suite=%s packages=%s\n' "$ROOTFS_VERSION" "$SUITE" "$PACKAGES"; }

# Configuration baked into the cached rootfs (files only; nothing runs inside it).
configure_rootfs() {
    local r=$1
    mkdir -p "$r/etc/systemd/system.conf.d" "$r/etc/ssh/sshd_config.d" "$r/root/.ssh"
    chmod 700 "$r/root/.ssh"
    # A user@ unit or a stuck service must not hold shutdown for 90 s.
    printf '[Manager]\nDefaultTimeoutStopSec=3s\nDefaultTimeoutStartSec=30s\n' \
        >"$r/etc/systemd/system.conf.d/10-bwtune-testhost.conf"
    printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' \
        >"$r/etc/ssh/sshd_config.d/10-bwtune-testhost.conf"
    # Units that have no job in a container and would leave the system "degraded"
    # (systemd-remount-fs once failed on an overlay root and failed a whole host test;
    # systemd-tmpfiles-setup-dev-early, trixie's systemd 257, once failed a trixie host's
    # boot: it makes /dev's static nodes before sysusers for an empty /etc, and
    # systemd-tmpfiles-setup-dev.service still makes them after it).
    local unit
    for unit in console-getty.service getty@.service systemd-networkd-wait-online.service \
        apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
        systemd-remount-fs.service systemd-tmpfiles-setup-dev-early.service; do
        ln -sf /dev/null "$r/etc/systemd/system/$unit"
    done
    : >"$r/etc/machine-id" # empty: systemd makes one per boot (each overlay its own)
}

cmd_rootfs() {
    need_root
    mkdir -p "$(dirname "$ROOTFS")"
    (
        flock 9
        unmount_inside "$ROOTFS"
        if [ -f "$ROOTFS/.bwtune-rootfs" ] && [ "$(cat "$ROOTFS/.bwtune-rootfs")" = "$(rootfs_stamp)" ]; then
            # An outdated copy moved aside while hosts used it goes once none does.
            if compgen -G "$ROOTFS.old.*" >/dev/null && ! grep -q "lowerdir=$ROOTFS" /proc/mounts; then
                rm -rf "$ROOTFS".old.*
            fi
            exit 0
        fi
        ensure_tools
        log "building $SUITE rootfs at $ROOTFS (about two minutes; cached afterwards)"
        unmount_inside "$ROOTFS.tmp"
        rm -rf "$ROOTFS.tmp"
        debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS.tmp" "$MIRROR" >"$ROOTFS.log" 2>&1 ||
            { unmount_inside "$ROOTFS.tmp"; tail -n 20 "$ROOTFS.log" >&2; die "debootstrap failed (log: $ROOTFS.log)"; }
        unmount_inside "$ROOTFS.tmp"
        configure_rootfs "$ROOTFS.tmp"
        rm -rf "$ROOTFS.tmp/var/cache/apt/archives/"*.deb
        rootfs_stamp >"$ROOTFS.tmp/.bwtune-rootfs"
        # An outdated rootfs may be the lower layer of hosts that are up: move it aside
        # (renaming keeps their mounts working) and delete it once no overlay is left.
        [ ! -d "$ROOTFS" ] || mv "$ROOTFS" "$ROOTFS.old.$(date +%s)"
        mv "$ROOTFS.tmp" "$ROOTFS"
        grep -q "lowerdir=$ROOTFS" /proc/mounts || rm -rf "$ROOTFS".old.*
    ) 9>"$ROOTFS.lock"
}

# Claim the lowest free slot k: subnet 10.213.k.0/24, bridge bwth<k>, namespaces bwth<k>-<i>.
claim_slot() {
    mkdir -p "$SLOTS"
    local k
    for k in $(seq 0 250); do
        if mkdir "$SLOTS/$k" 2>/dev/null; then
            echo "$DIR" >"$SLOTS/$k/owner"
            echo "$k"
            return 0
        fi
    done
    die "no free test-host slot under $SLOTS"
}

cmd_up() {
    need_root
    local n=${1:-}
    shift || true
    [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up: host count must be 1..99, got '${n}'"
    local binds=()
    while [ $# -gt 0 ]; do
        case $1 in
            --bind-ro)
                [ $# -ge 2 ] || die "up: --bind-ro needs SRC[:DST]"
                [ -e "${2%%:*}" ] || die "up: --bind-ro source ${2%%:*} does not exist"
                binds+=("--bind-ro=$2")
                shift 2
                ;;
            *) die "up: unknown argument '$1'" ;;
        esac
    done
    [ ! -f "$DIR/hosts.env" ] || die "hosts of $DIR are up already (testhosts.sh down first)"
    cmd_rootfs
    mkdir -p "$DIR/hosts"
    local k
    k=$(claim_slot)
    local net="10.213.$k" bridge="bwth$k"
    # ROOTFS too: `down` cleans the rootfs these hosts used, whatever TESTHOSTS_RELEASE says then.
    printf 'SLOT=%s\nBRIDGE=%s\nCOUNT=%s\nROOTFS=%q\n' "$k" "$bridge" "$n" "$ROOTFS" >"$DIR/hosts.env"
    UP_OK=0
    trap '[ "$UP_OK" = 1 ] || { log "up failed; tearing down"; cmd_down >/dev/null 2>&1 || true; }' EXIT
    [ -f "$DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C bwtune-testhosts -f "$DIR/id_ed25519"
    rm -rf "$DIR/cp" && mkdir -p "$DIR/cp" # fresh ControlPersist sockets for every set of hosts

    ip link add "$bridge" type bridge
    ip addr add "$net.1/24" dev "$bridge"
    ip link set "$bridge" up

    local i name h addr
    for i in $(seq 1 "$n"); do
        name="bwth$k-$i"
        h="$DIR/hosts/$name"
        addr="$net.$((10 + i))"
        mkdir -p "$h/upper" "$h/work" "$h/merged"
        echo "$addr" >"$h/address"
        ip netns add "$name"
        ip link add "v$name" type veth peer name host0 netns "$name"
        ip link set "v$name" master "$bridge" up
        ip -n "$name" link set lo up
        ip -n "$name" addr add "$addr/24" dev host0
        ip -n "$name" link set host0 up
        ip -n "$name" route add default via "$net.1"
        mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$h/upper,workdir=$h/work" "$h/merged"
        install -m 600 "$DIR/id_ed25519.pub" "$h/merged/root/.ssh/authorized_keys"
        echo "$name" >"$h/merged/etc/hostname"
        printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$name" >"$h/merged/etc/hosts"
        # setsid: the container survives this script; `down` ends it by the recorded pid.
        setsid systemd-nspawn -q -D "$h/merged" -M "$name" --register=no --keep-unit \
            --network-namespace-path="/run/netns/$name" --console=read-only "${binds[@]}" -b \
            </dev/null >"$h/console.log" 2>&1 &
        echo $! >"$h/pid"
    done
    write_inventory "$n" "$k"
    for i in $(seq 1 "$n"); do
        wait_running "bwth$k-$i"
    done
    UP_OK=1
    log "$n host(s) up; inventory: $DIR/inventory.yml"
}

ssh_argv() { # host address -> ssh argv (printed NUL-free, one per line)
    printf '%s\n' ssh -i "$DIR/id_ed25519" -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=3 "root@$1"
}

wait_running() {
    local name=$1 h="$DIR/hosts/$1" addr state deadline
    addr=$(cat "$h/address")
    deadline=$((SECONDS + BOOT_TIMEOUT))
    local ssh_cmd retried=0 failed
    mapfile -t ssh_cmd < <(ssh_argv "$addr")
    while :; do
        kill -0 "$(cat "$h/pid")" 2>/dev/null || { tail -n 20 "$h/console.log" >&2; die "$name: systemd-nspawn exited"; }
        state=$("${ssh_cmd[@]}" systemctl is-system-running --wait 2>/dev/null || true)
        case $state in
            running) return 0 ;;
            degraded)
                # A unit can fail at boot for a passing cause on a loaded machine (CI once
                # saw systemd-update-utmp-runlevel exit 219/CGROUP while other hosts booted):
                # each failed unit gets one restart; a unit that fails twice fails the host.
                if ((retried == 0)); then
                    retried=1
                    failed=$("${ssh_cmd[@]}" systemctl --failed --plain --no-legend 2>/dev/null | cut -d" " -f1 | tr '\n' ' ' || true)
                    echo "testhosts: $name: restarting the units that failed at boot once: ${failed}" >&2
                    # shellcheck disable=SC2086 # one word per unit
                    "${ssh_cmd[@]}" "systemctl reset-failed; systemctl restart ${failed}" >&2 || true
                    continue
                fi
                # Each failed unit's status (its exit status, e.g. 243/CREDENTIALS) and log lines.
                "${ssh_cmd[@]}" 'systemctl --failed --no-legend; for u in $(systemctl --failed --plain --no-legend | cut -d" " -f1); do systemctl status --no-pager -n 10 "$u"; done' >&2 || true
                die "$name: systemd is degraded (failed units above)"
                ;;
        esac
        [ $SECONDS -lt $deadline ] || { tail -n 20 "$h/console.log" >&2; die "$name: not running after ${BOOT_TIMEOUT}s (state '${state}')"; }
        sleep 1
    done
}

write_inventory() {
    local n=$1 k=$2 i name
    {
        echo "# Written by scripts/testhosts/testhosts.sh up; removed by down."
        echo "all:"
        echo "  children:"
        echo "    testhosts:"
        echo "      hosts:"
        for i in $(seq 1 "$n"); do
            name="bwth$k-$i"
            echo "        $name:"
            echo "          ansible_host: $(cat "$DIR/hosts/$name/address")"
        done
        echo "      vars:"
        echo "        ansible_user: root"
        echo "        ansible_ssh_private_key_file: $DIR/id_ed25519"
        echo "        ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
        echo "        ansible_control_path_dir: $DIR/cp"
        echo "        ansible_python_interpreter: /usr/bin/python3"
        echo "        testhosts_controller_address: 10.213.$k.1"
    } >"$DIR/inventory.yml"
}

cmd_status() {
    [ -f "$DIR/hosts.env" ] || { echo "no hosts up in $DIR"; return 1; }
    local bad=0 h name addr state ssh_cmd
    for h in "$DIR"/hosts/*/; do
        name=$(basename "$h")
        addr=$(cat "$h/address")
        if ! kill -0 "$(cat "$h/pid" 2>/dev/null || echo 0)" 2>/dev/null; then
            echo "$name $addr stopped"
            bad=1
            continue
        fi
        mapfile -t ssh_cmd < <(ssh_argv "$addr")
        state=$("${ssh_cmd[@]}" systemctl is-system-running 2>/dev/null || true)
        echo "$name $addr ${state:-unreachable}"
        [ "$state" = running ] || bad=1
    done
    return $bad
}

cmd_down() {
    need_root
    [ -f "$DIR/hosts.env" ] || { log "no hosts up in $DIR"; return 0; }
    local SLOT BRIDGE COUNT
    # shellcheck disable=SC1091
    . "$DIR/hosts.env"
    local h name pid t sock
    # Ansible's ControlPersist masters would outlive the hosts by a minute: end them first.
    for sock in "$DIR"/cp/*; do
        [ -S "$sock" ] && ssh -o ControlPath="$sock" -O exit testhost >/dev/null 2>&1 || true
    done
    for h in "$DIR"/hosts/*/; do
        [ -d "$h" ] || continue
        pid=$(cat "$h/pid" 2>/dev/null || echo "")
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
    done
    for h in "$DIR"/hosts/*/; do
        [ -d "$h" ] || continue
        pid=$(cat "$h/pid" 2>/dev/null || echo "")
        if [ -n "$pid" ]; then
            for t in $(seq 1 $((STOP_GRACE * 5))); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            if kill -0 "$pid" 2>/dev/null; then
                log "$(basename "$h"): still up after ${STOP_GRACE}s, SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
                # nspawn's children (the container's PID 1 and below) die with its namespace.
                for t in $(seq 1 25); do
                    kill -0 "$pid" 2>/dev/null || break
                    sleep 0.2
                done
            fi
        fi
    done
    for h in "$DIR"/hosts/*/; do
        [ -d "$h" ] || continue
        name=$(basename "$h")
        mountpoint -q "$h/merged" && { umount "$h/merged" 2>/dev/null || umount -l "$h/merged"; }
        ip netns del "$name" 2>/dev/null || true
        ip link del "v$name" 2>/dev/null || true
        rm -rf "$h"
    done
    ip link del "$BRIDGE" 2>/dev/null || true
    # Nothing may stay mounted inside the shared rootfs (it is the hosts' lower layer only).
    unmount_inside "$ROOTFS"
    rm -rf "${SLOTS:?}/$SLOT" "$DIR/cp" "$DIR/hosts" "$DIR/inventory.yml" "$DIR/hosts.env"
    log "down"
}

case ${1:-} in
    rootfs) cmd_rootfs ;;
    up)
        shift
        cmd_up "$@"
        ;;
    status) cmd_status ;;
    down) cmd_down ;;
    info) printf 'release=%s rootfs=%s stamp=%s' "$SUITE" "$ROOTFS" "$(rootfs_stamp)" ;;
    *)
        sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
