# shellcheck shell=bash
# The kernel-rxe lab, as a library: QEMU guests running the kernel's rdma_rxe
# (rxe0 on eth0) with unmodified rdma-core and perftest, on a bridge inside a
# network namespace made for the run, with a veth for uroce. Source it from a
# bash script run as root (set -euo pipefail is fine), from the main shell:
#
#   . tests/rxe-lab/lib.sh
#   lab_init                      # traps EXIT/INT/TERM: lab_teardown
#   lab_net_up                    # namespace, bridge br0, veth uroce0
#   lab_boot_guests 2             # guests 1 and 2, each ready (rxe0 ACTIVE)
#   lab_capture_start all         # tcpdump on br0 -> $LAB_RUN/all.pcap
#   lab_guest_start 1 srv 'ibv_rc_pingpong -d rxe0 -g 1'
#   lab_guest_wait_listen 1 18515
#   lab_guest_run 2 60 'ibv_rc_pingpong -d rxe0 -g 1 198.18.0.11'
#   lab_guest_wait 1 srv 60
#   lab_capture_stop all          # $(lab_capture_path all) is complete
#   lab_ns_exec uroce ...         # uroce inside the namespace
#
# Addresses (all inside the namespace; nothing touches the host's interfaces):
#   guest K          eth0 198.18.0.(10+K)/24 and fd00:198:18::(10+K)/64, MAC
#                    52:54:00:00:00:(10+K); rxe0 GID 0 = its fe80:: link-local
#                    (lab_guest_ll6 K), 1 = ::ffff:198.18.0.(10+K), 2 = the
#                    fd00:198:18:: address (lab_guest_ip6 K)
#   $LAB_UROCE_IF    uroce0, the free end of a veth pair whose other end is a
#                    port of br0; the kernel holds $LAB_KERNEL_IP (198.18.0.2,
#                    MAC $LAB_KERNEL_MAC) on it: the out-of-band TCP exchange
#                    with the guests' tools, and uroce's `udp` link.
#                    uroce's `packet` link uses the same interface with its own
#                    MAC and IP: $LAB_UROCE_MAC, $LAB_UROCE_IP (198.18.0.3),
#                    configured nowhere in the kernel.
#   IPv6             the ULA prefix fd00:198:18::/64 on the same bridge: the
#                    kernel holds $LAB_KERNEL_IP6 (::2) on uroce0 (uroce's udp
#                    link binds it for IPv6 GIDs), uroce's packet link may
#                    take $LAB_UROCE_IP6 (::3), guest K has ::(10+K).
#
# Every wait is bounded; the teardown (from the trap, also after a failure, a
# timeout, Ctrl-C or SIGTERM) ends only the processes the lab started, by PID,
# and deletes the namespace with everything in it. Processes are started with
# a parent-death signal, so even a SIGKILLed lab leaves no QEMU running; its
# namespace is removed by lab_cleanup_stale (lab_init calls it).

case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # for the scripts that source this file
LAB_REPO=$(cd "$LAB_DIR/../.." && pwd)

LAB_NET=198.18.0
LAB_PREFIX=24
LAB_BRIDGE=br0
LAB_UROCE_IF=uroce0
LAB_UROCE_PEER=uroce0-br
LAB_KERNEL_IP=$LAB_NET.2
LAB_KERNEL_MAC=02:00:00:00:00:02
LAB_UROCE_IP=$LAB_NET.3
LAB_UROCE_MAC=02:00:00:00:00:03
# IPv6 (GIDs 0 and 2 of rxe0, uroce's IPv6 GIDs): a ULA prefix, inside the
# namespace only; the guests' addresses are added without DAD.
LAB_NET6=fd00:198:18:
LAB_PREFIX6=64
LAB_KERNEL_IP6=$LAB_NET6:2
LAB_UROCE_IP6=$LAB_NET6:3

LAB_BOOT_TIMEOUT=${UROCE_LAB_BOOT_TIMEOUT:-120}
LAB_GUEST_MEM=${UROCE_LAB_GUEST_MEM:-1024}
LAB_MAX_GUESTS=${UROCE_LAB_MAX_GUESTS:-2} # this machine: 2 cores shared
# Extra QEMU arguments for every guest (bench/guests profiles with -perfmap).
[ -n "${LAB_QEMU_EXTRA+x}" ] || LAB_QEMU_EXTRA=()

LAB_NS=${LAB_NS:-}     # set by lab_init; inherited by commands `lab exec` runs
LAB_RUN=${LAB_RUN:-}
LAB_GUEST_DIR=
LAB_PIDS=()        # every process the lab started, by PID (children of this shell)
LAB_PID_NAMES=()   # what each is, for messages
LAB_GUESTS=()      # guest numbers booted
LAB_FAILED=0
LAB_T0=${LAB_T0:-0}
LAB_EXIT_HOOK=${LAB_EXIT_HOOK:-}

# ---------------------------------------------------------------- messages

lab_now_ms() { # milliseconds since boot (CLOCK_BOOTTIME; the wall clock may jump)
  local up
  read -r up _ </proc/uptime
  echo $((${up%.*} * 1000 + 10#${up#*.} * 10))
}

lab_log() { # MESSAGE...
  local t=$(($(lab_now_ms) - LAB_T0))
  printf '[lab %4d.%d] %s\n' $((t / 1000)) $((t % 1000 / 100)) "$*" >&2
}

lab_die() { # MESSAGE...: logs, marks the run failed and exits (the trap tears down)
  lab_log "FAILED: $*"
  LAB_FAILED=1
  exit 1
}

# ---------------------------------------------------------------- setup

lab_require_root() {
  [ "$(id -u)" = 0 ] || lab_die "the lab needs root (network namespaces, TAP devices)"
}

lab_require_cmds() {
  local c missing=()
  for c in qemu-system-x86_64 ip tcpdump setpriv flock timeout base64 mkfifo ping; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  [ ${#missing[@]} -eq 0 ] \
    || lab_die "missing ${missing[*]}: run tests/rxe-lab/install-host-deps (as root)"
}

# Sets up the run: names (namespace uroce-lab-<PID>), run directory, traps.
# Call once, from the main shell of the script.
lab_init() {
  LAB_T0=$(lab_now_ms)
  lab_require_root
  lab_require_cmds
  LAB_NS=uroce-lab-$$
  LAB_RUN=${UROCE_LAB_RUN:-${TMPDIR:-/tmp}/uroce-lab-$$}
  mkdir -p "$LAB_RUN" "$LAB_STATE_DIR"
  : >"$LAB_STATE_DIR/$LAB_NS.pids"
  trap lab_teardown EXIT
  trap 'lab_on_signal INT 130' INT
  trap 'lab_on_signal TERM 143' TERM
  trap 'lab_on_signal HUP 129' HUP
  lab_cleanup_stale
  lab_start_watchdog
  lab_log "run $LAB_NS, files in $LAB_RUN"
}

# Exports the run's names and addresses, for a command started inside the lab
# (`lab exec`): it can use lab_guest_run & co. after lab_attach.
lab_export_env() {
  local k
  export LAB_NS LAB_RUN LAB_DIR LAB_BRIDGE LAB_UROCE_IF LAB_KERNEL_IP LAB_KERNEL_MAC \
    LAB_UROCE_IP LAB_UROCE_MAC LAB_PREFIX LAB_KERNEL_IP6 LAB_UROCE_IP6 LAB_PREFIX6 LAB_T0
  export LAB_GUEST_LIST="${LAB_GUESTS[*]}"
  for k in "${LAB_GUESTS[@]}"; do
    export "LAB_G${k}_IP=$(lab_guest_ip "$k")" "LAB_G${k}_MAC=$(lab_guest_mac "$k")" \
      "LAB_G${k}_IP6=$(lab_guest_ip6 "$k")" "LAB_G${k}_LL6=$(lab_guest_ll6 "$k")"
  done
}

# In a process started inside a running lab (by `lab exec` / `lab shell`):
# makes lab_guest_run, lab_guest_start, lab_guest_wait, lab_guest_fetch, ...
# work on that lab's guests. Installs no trap: the lab that started the
# process tears down.
lab_attach() {
  [ -n "${LAB_NS:-}" ] && [ -n "${LAB_RUN:-}" ] && [ -d "$LAB_RUN" ] \
    || lab_die "not inside a lab: run this under tests/rxe-lab/lab exec (or lab shell)"
  LAB_T0=${LAB_T0:-0}
  read -r -a LAB_GUESTS <<<"${LAB_GUEST_LIST:-}"
}

lab_on_signal() { # NAME STATUS
  trap '' INT TERM HUP
  lab_log "got SIG$1: tearing down"
  LAB_FAILED=1
  exit "$2"
}

# Builds the guest if the cache does not hold it yet; sets LAB_GUEST_DIR.
lab_guest_image() {
  [ -n "$LAB_GUEST_DIR" ] && return 0
  LAB_GUEST_DIR=$("$LAB_DIR/build-guest" --print-dir) || lab_die "build-guest failed"
}

# What a killed lab left behind (its watchdog killed too): namespaces
# uroce-lab-<PID> whose PID is gone. Ends the processes that lab recorded
# starting (same PID and start time), then deletes the namespace.
lab_cleanup_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    case "$ns" in uroce-lab-[0-9]*) ;; *) continue ;; esac
    pid=${ns#uroce-lab-}
    [ "$pid" = $$ ] && continue
    kill -0 "$pid" 2>/dev/null && continue
    lab_log "stale namespace $ns (its lab, PID $pid, is gone): cleaning up"
    lab_kill_recorded "$LAB_STATE_DIR/$ns.pids" | sed 's/^/  /' >&2
    if [ -n "$(ip netns pids "$ns" 2>/dev/null)" ]; then
      lab_log "  $ns still has processes the lab did not record ($(ip netns pids "$ns" | tr '\n' ' ')): leaving it"
      continue
    fi
    ip netns del "$ns" 2>/dev/null || true
    rm -f "$LAB_STATE_DIR/$ns.pids"
  done
}

# ---------------------------------------------------------------- processes

# Starts COMMAND in the background, tracked by PID; it gets SIGKILL if this
# shell dies. Sets LAB_LAST_PID. Must run in the main shell (not in $(...)).
lab_start_bg() { # NAME LOGFILE COMMAND...
  local name=$1 logfile=$2
  shift 2
  setpriv --pdeathsig KILL -- "$@" </dev/null >>"$logfile" 2>&1 &
  LAB_LAST_PID=$!
  LAB_PIDS+=("$LAB_LAST_PID")
  LAB_PID_NAMES+=("$name")
  lab_record_pid "$LAB_LAST_PID" "$name"
}

# The state of a run that outlives its shell: /run/uroce-lab/<namespace>.pids
# holds "PID START-TIME NAME" for every process the lab started, so that the
# watchdog (or a later lab_cleanup_stale) ends exactly those, and no process
# that merely reused a PID.
LAB_STATE_DIR=/run/uroce-lab

lab_pid_start_time() { # PID: field 22 of /proc/PID/stat (clock ticks since boot)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086 # split into fields
  set -- $stat
  echo "${20}"
}

lab_record_pid() { # PID NAME
  local start
  start=$(lab_pid_start_time "$1") || start=0
  echo "$1 $start $2" >>"$LAB_STATE_DIR/$LAB_NS.pids"
}

# Ends the processes of a pids file that are still the ones recorded
# (TERM, then KILL after 5 s), except SKIP_PID.
lab_kill_recorded() { # PIDS_FILE [SKIP_PID]
  local file=$1 skip=${2:-} pid start name live=() i
  [ -f "$file" ] || return 0
  while read -r pid start name; do
    [ "$pid" = "$skip" ] && continue
    [ "$(lab_pid_start_time "$pid" 2>/dev/null)" = "$start" ] || continue
    kill -s TERM "$pid" 2>/dev/null && live+=("$pid $start")
    echo "ended $name (PID $pid)"
  done <"$file"
  for ((i = 0; i < 50 && ${#live[@]} > 0; i++)); do
    sleep 0.1
    local still=() p
    for p in "${live[@]}"; do
      [ "$(lab_pid_start_time "${p% *}" 2>/dev/null)" = "${p#* }" ] && still+=("$p")
    done
    live=("${still[@]}")
  done
  for p in "${live[@]}"; do kill -s KILL "${p% *}" 2>/dev/null; done
  return 0
}

# A dead man's switch: if the lab's shell dies without its teardown (SIGKILL),
# the watchdog ends the processes the lab started and deletes the namespace.
lab_start_watchdog() {
  local me=$$ start
  start=$(lab_pid_start_time $$)
  setsid bash -c '
    . "$1"
    LAB_NS=$4
    while [ "$(lab_pid_start_time "$2")" = "$3" ]; do sleep 1; done
    lab_kill_recorded "$LAB_STATE_DIR/$LAB_NS.pids" $$
    ip netns del "$LAB_NS" 2>/dev/null && echo "deleted $LAB_NS"
    rm -f "$LAB_STATE_DIR/$LAB_NS.pids"
  ' _ "$LAB_DIR/lib.sh" "$me" "$start" "$LAB_NS" </dev/null >>"$LAB_RUN/watchdog.log" 2>&1 &
  LAB_PIDS+=("$!")
  LAB_PID_NAMES+=("watchdog")
  lab_record_pid "$!" watchdog
}

# Like lab_start_bg, inside the namespace.
lab_ns_start_bg() { # NAME LOGFILE COMMAND...
  local name=$1 logfile=$2
  shift 2
  lab_start_bg "$name" "$logfile" ip netns exec "$LAB_NS" "$@"
}

lab_ns_exec() { # COMMAND...: runs COMMAND inside the namespace
  ip netns exec "$LAB_NS" "$@"
}

lab_pid_alive() { # PID: true while it runs (a zombie child counts as ended)
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# Ends one process the lab started: SIGNAL (default TERM), then SIGKILL after
# GRACE seconds; reaps it.
lab_stop_pid() { # PID [SIGNAL] [GRACE]
  local pid=$1 sig=${2:-TERM} grace=${3:-5} i
  if lab_pid_alive "$pid"; then
    kill -s "$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      lab_pid_alive "$pid" || break
      sleep 0.1
    done
    if lab_pid_alive "$pid"; then
      kill -s KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
  lab_forget_pid "$pid"
}

# Drops a reaped PID from the teardown's list: the kernel may give the number
# to another process, which the teardown must then leave alone.
lab_forget_pid() { # PID
  local i pids=() names=()
  for i in "${!LAB_PIDS[@]}"; do
    [ "${LAB_PIDS[$i]}" = "$1" ] && continue
    pids+=("${LAB_PIDS[$i]}")
    names+=("${LAB_PID_NAMES[$i]}")
  done
  LAB_PIDS=("${pids[@]}")
  LAB_PID_NAMES=("${names[@]}")
}

# Waits up to TIMEOUT seconds for a process the lab started (lab_start_bg,
# lab_ns_start_bg) to end and returns its exit status; at the limit it ends it
# (TERM, then KILL after 2 s) and returns 124. Either way the PID is reaped
# and forgotten. Call from the main shell.
lab_wait_pid() { # PID TIMEOUT
  local pid=$1 deadline rc=0
  deadline=$(($(lab_now_ms) + $2 * 1000))
  while lab_pid_alive "$pid"; do
    if [ "$(lab_now_ms)" -ge "$deadline" ]; then
      lab_stop_pid "$pid" TERM 2
      return 124
    fi
    sleep 0.05
  done
  wait "$pid" || rc=$?
  lab_forget_pid "$pid"
  return $rc
}

# Waits until something in the namespace listens on TCP PORT; returns 1 if
# nothing does within TIMEOUT seconds, or at once when PID (if given) ends.
lab_ns_wait_listen() { # PORT [TIMEOUT] [PID]
  local port=$1 to=${2:-30} pid=${3:-} deadline
  deadline=$(($(lab_now_ms) + to * 1000))
  until [ -n "$(lab_ns_exec ss -Hltn "sport = :$port" 2>/dev/null)" ]; do
    if [ -n "$pid" ] && ! lab_pid_alive "$pid"; then return 1; fi
    [ "$(lab_now_ms)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

# ---------------------------------------------------------------- network

# The namespace, bridge br0 (no address, no STP) and the veth pair for uroce.
lab_net_up() {
  [ -n "$LAB_NS" ] || lab_die "lab_init first"
  ip netns add "$LAB_NS" || lab_die "ip netns add $LAB_NS"
  lab_ns_exec sysctl -qw net.ipv6.conf.default.disable_ipv6=1 >/dev/null
  # ARP answers only on the interface that holds the address: otherwise the
  # kernel answers for uroce0's address on br0 too (with br0's MAC), and the
  # guests' traffic to it skips the veth.
  lab_ns_exec sysctl -qw net.ipv4.conf.all.arp_ignore=1 >/dev/null
  ip -n "$LAB_NS" link set lo up
  ip -n "$LAB_NS" link add "$LAB_BRIDGE" type bridge stp_state 0 forward_delay 0 mcast_snooping 0 \
    || lab_die "bridge $LAB_BRIDGE"
  ip -n "$LAB_NS" link set "$LAB_BRIDGE" up
  ip -n "$LAB_NS" link add "$LAB_UROCE_IF" address "$LAB_KERNEL_MAC" type veth peer name "$LAB_UROCE_PEER" \
    || lab_die "veth $LAB_UROCE_IF"
  ip -n "$LAB_NS" link set "$LAB_UROCE_PEER" master "$LAB_BRIDGE" up
  # IPv6 on uroce0 only: uroce's udp link binds $LAB_KERNEL_IP6 for its IPv6
  # GIDs (no DAD: a tentative address cannot be bound).
  lab_ns_exec sysctl -qw "net.ipv6.conf.$LAB_UROCE_IF.disable_ipv6=0" >/dev/null
  ip -n "$LAB_NS" addr add "$LAB_KERNEL_IP/$LAB_PREFIX" dev "$LAB_UROCE_IF"
  ip -n "$LAB_NS" addr add "$LAB_KERNEL_IP6/$LAB_PREFIX6" dev "$LAB_UROCE_IF" nodad
  ip -n "$LAB_NS" link set "$LAB_UROCE_IF" up
  lab_log "namespace $LAB_NS: bridge $LAB_BRIDGE, $LAB_UROCE_IF $LAB_KERNEL_IP $LAB_KERNEL_IP6 ($LAB_KERNEL_MAC);" \
    "uroce's packet link: $LAB_UROCE_IP $LAB_UROCE_IP6 $LAB_UROCE_MAC"
}

lab_guest_ip() { echo "$LAB_NET.$((10 + $1))"; }
lab_guest_ip6() { echo "$LAB_NET6:$((10 + $1))"; }
# fe80:: with the EUI-64 of the guest's MAC (52:54:00:00:00:xx), compressed
# as inet_ntop and Rust print it: rxe0's GID 0.
lab_guest_ll6() { printf 'fe80::5054:ff:fe00:%x\n' $((10 + $1)); }
lab_guest_mac() { printf '52:54:00:00:00:%02x\n' $((10 + $1)); }
lab_guest_tap() { echo "tap$1"; }

lab_add_tap() { # K
  local tap
  tap=$(lab_guest_tap "$1")
  ip -n "$LAB_NS" tuntap add dev "$tap" mode tap || lab_die "TAP $tap"
  ip -n "$LAB_NS" link set "$tap" master "$LAB_BRIDGE" up
}

# ---------------------------------------------------------------- guests

# Starts guest K (1..2): TAP, control channel, QEMU (TCG). Does not wait.
lab_boot_guest() { # K
  local k=$1 d
  [ "$k" -ge 1 ] && [ "$k" -le $LAB_MAX_GUESTS ] || lab_die "guest number $k: 1..$LAB_MAX_GUESTS"
  lab_guest_image
  d=$LAB_RUN/g$k
  mkdir -p "$d"
  : >"$d/ctl.log"
  echo 0 >"$d/ctl.seq"
  mkfifo "$d/ctl.in" "$d/ctl.out"
  lab_add_tap "$k"
  # Reads everything the guest's agent writes; QEMU holds both FIFOs open
  # read-write, so neither side blocks on open.
  lab_start_bg "g$k serial reader" "$d/ctl.log" cat "$d/ctl.out"
  lab_ns_start_bg "g$k qemu" "$d/qemu.log" \
    qemu-system-x86_64 -name "uroce-lab-g$k" \
    -machine pc,accel=tcg -cpu max -smp 1 -m "$LAB_GUEST_MEM" \
    -nodefaults -display none -no-reboot \
    -kernel "$LAB_GUEST_DIR/vmlinuz" -initrd "$LAB_GUEST_DIR/initramfs.cpio.zst" \
    -append "console=ttyS0 panic=-1 loglevel=4 uroce_lab.ip=$(lab_guest_ip "$k")/$LAB_PREFIX uroce_lab.ip6=$(lab_guest_ip6 "$k")/$LAB_PREFIX6 uroce_lab.name=g$k" \
    "${LAB_QEMU_EXTRA[@]}" \
    -serial "file:$d/console.log" \
    -chardev "pipe,id=ctl,path=$d/ctl" -serial chardev:ctl \
    -netdev "tap,id=n0,ifname=$(lab_guest_tap "$k"),script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=$(lab_guest_mac "$k"),romfile="
  echo "$LAB_LAST_PID" >"$d/qemu.pid"
  LAB_GUESTS+=("$k")
  lab_log "g$k: QEMU PID $LAB_LAST_PID, $(lab_guest_ip "$k"), console $d/console.log"
}

lab_guest_alive() { # K
  lab_pid_alive "$(cat "$LAB_RUN/g$1/qemu.pid")"
}

lab_guest_failure_context() { # K: the end of the console, for messages
  local d=$LAB_RUN/g$1
  echo "--- g$1 console (last 15 lines of $d/console.log) ---" >&2
  tail -n 15 "$d/console.log" >&2 2>/dev/null || true
  if [ -s "$d/qemu.log" ]; then
    echo "--- g$1 qemu.log ---" >&2
    tail -n 5 "$d/qemu.log" >&2
  fi
}

# Waits until guest K's agent says it is ready (rxe0 is ACTIVE by then).
lab_wait_guest() { # K [TIMEOUT]
  local k=$1 to=${2:-$LAB_BOOT_TIMEOUT} d=$LAB_RUN/g$1 t0 deadline
  t0=$(lab_now_ms)
  deadline=$((t0 + to * 1000))
  while ! grep -q '^@@READY' "$d/ctl.log"; do
    if grep -q '^@@INIT-FAILED' "$d/ctl.log"; then
      lab_guest_failure_context "$k"
      lab_die "g$k: $(grep -m1 '^@@INIT-FAILED' "$d/ctl.log")"
    fi
    if ! lab_guest_alive "$k"; then
      lab_guest_failure_context "$k"
      lab_die "g$k: QEMU ended during boot"
    fi
    if [ "$(lab_now_ms)" -ge "$deadline" ]; then
      lab_guest_failure_context "$k"
      lab_die "g$k: not ready after $to s"
    fi
    sleep 0.2
  done
  lab_log "g$k: ready in $((($(lab_now_ms) - t0) / 1000)) s"
}

# Boots guests 1..N, one after the other (the machine's cores are shared);
# UROCE_LAB_PARALLEL_BOOT=1 boots them together.
lab_boot_guests() { # N
  local n=$1 k
  if [ "${UROCE_LAB_PARALLEL_BOOT:-0}" = 1 ]; then
    for ((k = 1; k <= n; k++)); do lab_boot_guest "$k"; done
    for ((k = 1; k <= n; k++)); do lab_wait_guest "$k"; done
  else
    for ((k = 1; k <= n; k++)); do
      lab_boot_guest "$k"
      lab_wait_guest "$k"
    done
  fi
}

# Runs SCRIPT (sh, joined from the arguments) in guest K through the serial
# control channel. Prints its stdout+stderr; returns its exit status (137 if
# the guest killed it after TIMEOUT seconds; 124 if no answer came in time).
# Commands to one guest run one at a time (a lock per guest).
lab_guest_run() { # K TIMEOUT SCRIPT...
  local k=$1 to=$2
  shift 2
  local script="$*" d=$LAB_RUN/g$k fd id line end rc deadline
  [ -p "$d/ctl.in" ] || { lab_log "g$k: no such guest"; return 125; }
  exec {fd}>"$d/ctl.lock"
  if ! flock -w "$to" "$fd"; then
    exec {fd}>&-
    lab_log "g$k: the control channel stayed busy for $to s"
    return 124
  fi
  id=$(($(cat "$d/ctl.seq") + 1))
  echo "$id" >"$d/ctl.seq"
  line="RUN $id $to $(printf '%s' "$script" | base64 -w0)"
  if ! lab_guest_alive "$k" ||
    ! timeout 10 bash -c 'printf "%s\n" "$1" >"$2"' _ "$line" "$d/ctl.in"; then
    exec {fd}>&-
    lab_log "g$k: cannot send to the guest (QEMU gone?)"
    return 125
  fi
  deadline=$(($(lab_now_ms) + (to + 10) * 1000))
  # Complete lines only: the serial console may have written "@@END ID "
  # and not yet the status after it.
  while ! end=$(lab_complete_lines "$d/ctl.log" | grep -m1 -E "^@@END $id [0-9]+"$'\r'"?$"); do
    if ! lab_guest_alive "$k" || [ "$(lab_now_ms)" -ge "$deadline" ]; then
      exec {fd}>&-
      lab_log "g$k: no answer to request $id within $((to + 10)) s"
      return 124
    fi
    sleep 0.05
  done
  exec {fd}>&-
  awk -v id="$id" '$0 == "@@OUT " id { on = 1; next } $1 == "@@END" && $2 == id { exit } on' "$d/ctl.log" \
    | base64 -d || lab_log "g$k: the answer to request $id does not decode"
  rc=${end##* }
  return "${rc%$'\r'}"
}

# The lines of FILE, without a last one that no newline has ended yet.
lab_complete_lines() { # FILE
  if [ -n "$(tail -c1 "$1")" ]; then
    sed '$d' "$1"
  else
    cat "$1"
  fi
}

# Like lab_guest_run, but fails the lab (with the output) when the command fails.
lab_guest_must() { # K TIMEOUT SCRIPT...
  local k=$1 out rc=0
  out=$(lab_guest_run "$@") || rc=$?
  if [ $rc != 0 ]; then
    printf '%s\n' "$out" | sed "s/^/  g$k| /" >&2
    lab_die "g$k: '${*:3}' exited with $rc"
  fi
  printf '%s\n' "$out"
}

lab_shell_quote() { # STRING: single-quoted for sh
  printf "'%s'" "${1//\'/\'\\\'\'}"
}

# Starts SCRIPT in the background in guest K under NAME ([A-Za-z0-9_.-]), in a
# session of its own so that it outlives the request that started it (the
# request returns once the new session exists). lab_guest_wait collects it.
lab_guest_start() { # K NAME SCRIPT...
  local k=$1 name=$2
  shift 2
  local b64 p=/tmp/bg/$name
  case "$name" in *[!A-Za-z0-9_.-]* | '') lab_die "lab_guest_start: bad name '$name'" ;; esac
  b64=$(printf '%s' "$*" | base64 -w0)
  lab_guest_run "$k" 20 "mkdir -p /tmp/bg; rm -f $p.rc $p.out $p.pid
echo $b64 | base64 -d >$p.sh
cat >$p.wrap <<'EOF'
echo \$\$ >$p.pid
sh $p.sh >$p.out 2>&1 </dev/null
echo \$? >$p.rc
EOF
setsid sh $p.wrap </dev/null >/dev/null 2>&1 &
i=0
until [ -s $p.pid ]; do
  [ \$i -lt 150 ] || exit 1
  sleep 0.1; i=\$((i + 1))
done" >/dev/null || lab_die "g$k: cannot start $name"
}

# Waits up to TIMEOUT seconds for NAME (from lab_guest_start) in guest K to end;
# prints its output, returns its status (124 and kills it if it is still running).
lab_guest_wait() { # K NAME TIMEOUT
  local k=$1 name=$2 to=$3 p=/tmp/bg/$2
  lab_guest_run "$k" $((to + 5)) "i=0
while [ ! -e $p.rc ]; do
  if [ \$i -ge $((to * 10)) ]; then
    /bb/kill -s KILL -\$(cat $p.pid) 2>/dev/null; cat $p.out; echo '$name: still running after $to s, killed'; exit 124
  fi
  sleep 0.1; i=\$((i + 1))
done
cat $p.out; exit \$(cat $p.rc)"
}

# Ends NAME (from lab_guest_start) in guest K if it still runs.
lab_guest_kill() { # K NAME
  lab_guest_run "$1" 10 "[ -e /tmp/bg/$2.pid ] && /bb/kill -s KILL -\$(cat /tmp/bg/$2.pid) 2>/dev/null; true" >/dev/null
}

# Waits until guest K listens on TCP PORT (perftest and ibv_*_pingpong: 18515);
# returns 1 if it does not within TIMEOUT seconds.
lab_guest_wait_listen() { # K PORT [TIMEOUT]
  local k=$1 port=$2 to=${3:-30}
  lab_guest_run "$k" $((to + 5)) "i=0
until netstat -ltn | grep -q ':$port '; do
  [ \$i -lt $((to * 10)) ] || exit 1
  sleep 0.1; i=\$((i + 1))
done" >/dev/null || { lab_log "g$k: nothing listens on TCP $port after $to s"; return 1; }
}

# Waits until guest K has an rdma_cm ID listening (rping -s, ib_*_bw -R);
# returns 1 if it has none within TIMEOUT seconds.
lab_guest_wait_cm_listen() { # K [TIMEOUT]
  local k=$1 to=${2:-30}
  lab_guest_run "$k" $((to + 5)) "i=0
until rdma resource show cm_id 2>/dev/null | grep -q 'state LISTEN'; do
  [ \$i -lt $((to * 10)) ] || exit 1
  sleep 0.1; i=\$((i + 1))
done" >/dev/null || { lab_log "g$k: no rdma_cm listener after $to s"; return 1; }
}

# Copies a small file out of guest K (base64 over the control channel).
lab_guest_fetch() { # K REMOTE LOCAL
  local out
  out=$(lab_guest_run "$1" 60 "base64 $(lab_shell_quote "$2")") || lab_die "g$1: cannot read $2"
  printf '%s\n' "$out" | base64 -d >"$3"
}

# Copies a small local file into guest K, in chunks of 3 KiB.
lab_guest_push() { # K LOCAL REMOTE
  local k=$1 remote chunk first=1
  remote=$(lab_shell_quote "$3")
  while IFS= read -r chunk || [ -n "$chunk" ]; do
    if [ $first = 1 ]; then
      lab_guest_run "$k" 20 "echo $chunk | base64 -d >$remote" >/dev/null || lab_die "g$k: cannot write $3"
      first=0
    else
      lab_guest_run "$k" 20 "echo $chunk | base64 -d >>$remote" >/dev/null || lab_die "g$k: cannot write $3"
    fi
  done < <(base64 -w 3072 "$2")
  [ $first = 0 ] || lab_guest_run "$k" 20 ": >$remote" >/dev/null
}

# ---------------------------------------------------------------- captures

# tcpdump on the bridge (every frame between guests and uroce0) into
# $LAB_RUN/NAME.pcap; returns once tcpdump listens. FILTER is optional.
# Its kernel buffer holds bursts of several MB (a 64 KiB ib_write_bw): with
# tcpdump's default of 2 MB it dropped frames. The snapshot length is the
# bridge's frames (MTU 1500 + headers), not -s 0: with -s 0 libpcap sizes each
# ring slot for 64 KiB offloaded frames, and 64 MB held only about 1000
# frames. lab_capture_dropped tells whether the kernel dropped any.
lab_capture_start() { # NAME [FILTER...]
  local name=$1 log=$LAB_RUN/$1.tcpdump.log i
  shift
  : >"$log"
  lab_ns_start_bg "tcpdump $name" "$log" \
    tcpdump -i "$LAB_BRIDGE" -s "$LAB_CAPTURE_SNAPLEN" -B "$LAB_CAPTURE_BUFFER_KB" -U --immediate-mode -n -Z root \
    -w "$LAB_RUN/$name.pcap" "$@"
  eval "LAB_CAPTURE_PID_${name//[^A-Za-z0-9_]/_}=$LAB_LAST_PID"
  for ((i = 0; i < 100; i++)); do
    grep -q 'listening on' "$log" && return 0
    lab_pid_alive "$LAB_LAST_PID" || break
    sleep 0.1
  done
  cat "$log" >&2
  lab_die "tcpdump on $LAB_BRIDGE did not start"
}

LAB_CAPTURE_BUFFER_KB=${UROCE_LAB_CAPTURE_BUFFER_KB:-65536}
LAB_CAPTURE_SNAPLEN=${UROCE_LAB_CAPTURE_SNAPLEN:-2048}

# After lab_capture_stop: how many frames the kernel dropped before tcpdump
# read them (0: the capture is complete).
lab_capture_dropped() { # NAME
  awk '/packets dropped by kernel/ { print $1; found = 1 } END { if (!found) print "unknown" }' \
    "$LAB_RUN/$1.tcpdump.log"
}

lab_capture_path() { # NAME
  echo "$LAB_RUN/$1.pcap"
}

# Stops the capture NAME (tcpdump flushes and closes $LAB_RUN/NAME.pcap).
# Call from the main shell.
lab_capture_stop() { # NAME
  local var=LAB_CAPTURE_PID_${1//[^A-Za-z0-9_]/_}
  [ -n "${!var:-}" ] || lab_die "no capture named $1"
  sleep 0.5 # the last frames through the bridge
  lab_stop_pid "${!var}" TERM 10
  grep -E 'packets (captured|received|dropped)' "$LAB_RUN/$1.tcpdump.log" | tr '\n' ' ' | sed 's/^/tcpdump: /' >&2
  echo >&2
}

# ---------------------------------------------------------------- teardown

# Ends every process the lab started (by PID), deletes the TAPs and the
# namespace. Runs from the EXIT trap; safe to call twice.
lab_teardown() {
  local rc=$? i pid left
  trap '' INT TERM HUP
  set +e
  [ $rc = 0 ] || LAB_FAILED=1
  # A script's own last words (a summary table, ...): LAB_EXIT_HOOK=FUNCTION,
  # called with the exit status before anything is torn down.
  if [ -n "${LAB_EXIT_HOOK:-}" ]; then
    "$LAB_EXIT_HOOK" "$rc"
  fi
  if [ ${#LAB_PIDS[@]} -gt 0 ]; then
    lab_log "teardown: ending ${#LAB_PIDS[@]} processes the lab started"
    for ((i = ${#LAB_PIDS[@]} - 1; i >= 0; i--)); do
      pid=${LAB_PIDS[$i]}
      lab_pid_alive "$pid" && lab_log "teardown: ${LAB_PID_NAMES[$i]} (PID $pid)"
      lab_stop_pid "$pid" TERM 5
    done
  fi
  LAB_PIDS=()
  LAB_PID_NAMES=()
  if [ -n "$LAB_NS" ] && ip netns list | awk '{print $1}' | grep -qxF "$LAB_NS"; then
    for i in "${LAB_GUESTS[@]}"; do
      ip -n "$LAB_NS" link del "$(lab_guest_tap "$i")" 2>/dev/null
    done
    left=$(ip netns pids "$LAB_NS" 2>/dev/null | tr '\n' ' ')
    [ -z "$left" ] || lab_log "teardown: processes the lab did not start are in $LAB_NS: $left(left alone)"
    ip netns del "$LAB_NS" && lab_log "teardown: namespace $LAB_NS deleted"
  fi
  [ -z "$LAB_NS" ] || rm -f "$LAB_STATE_DIR/$LAB_NS.pids"
  LAB_GUESTS=()
  if [ -n "$LAB_RUN" ] && [ -d "$LAB_RUN" ]; then
    if [ "$LAB_FAILED" = 0 ] && [ "${UROCE_LAB_KEEP:-0}" != 1 ]; then
      rm -rf "$LAB_RUN"
    else
      lab_log "files of this run (consoles, control logs, captures): $LAB_RUN"
    fi
  fi
  return $rc
}
