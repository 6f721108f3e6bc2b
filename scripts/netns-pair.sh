#!/usr/bin/env bash
# Two network namespaces joined by a veth pair, so that processes in them
# talk over a real network device (tc netem can slow it down), on addresses
# that exist only between them:
#
#   scripts/netns-pair.sh up NAME [DELAY [RATE]]  # NAME-a 10.233.X.1, NAME-b 10.233.X.2
#   scripts/netns-pair.sh run NAME a|b COMMAND...
#   scripts/netns-pair.sh down NAME
#   scripts/netns-pair.sh test SERVER CLIENT  # up, SERVER in a, CLIENT in b, down
#
# X is derived from NAME (1 to 250). DELAY (e.g. 1ms; "" or 0 for none)
# adds that much delay each way with netem, where the kernel has it. RATE
# (e.g. 10gbit) caps each direction: with netem where the kernel has it,
# else with a token bucket (tbf); up fails when neither can shape it. Needs root (CAP_NET_ADMIN)
# and iproute2; `test` exits 77 (skipped) where the namespaces cannot be
# made. In `test`, the commands see COLL_NETNS_A and COLL_NETNS_B (the two
# addresses) and COLL_NETNS_DEV (their own end's device); SERVER runs in
# the background and must end by itself; both are bounded by a 120 s
# timeout.
set -euo pipefail

subnet() {
  local sum
  sum=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
  echo $((sum % 250 + 1))
}

# The bytes a rate such as 10gbit or 500mbit sends in 1 ms, at least 64 KiB.
burst() {
  local r=${1,,} n unit
  n=${r%%[a-z]*}
  unit=${r#"$n"}
  case $unit in
  gbit) n=$((n * 1000000000)) ;;
  mbit) n=$((n * 1000000)) ;;
  kbit) n=$((n * 1000)) ;;
  *) n=$((n * 8)) ;;
  esac
  local b=$((n / 8 / 1000))
  echo $((b > 65536 ? b : 65536))
}

up() {
  local name=$1 delay=${2:-} rate=${3:-} x
  [[ $delay == 0 ]] && delay=""
  x=$(subnet "$name")
  ip netns add "$name-a"
  ip netns add "$name-b"
  ip link add "$name-va" type veth peer name "$name-vb"
  ip link set "$name-va" netns "$name-a"
  ip link set "$name-vb" netns "$name-b"
  ip -n "$name-a" addr add "10.233.$x.1/24" dev "$name-va"
  ip -n "$name-b" addr add "10.233.$x.2/24" dev "$name-vb"
  for side in a b; do
    ip -n "$name-$side" link set lo up
    ip -n "$name-$side" link set "$name-v$side" up
    local dev="$name-v$side"
    if [[ -n "$delay" || -n "$rate" ]]; then
      if ! ip netns exec "$name-$side" tc qdisc add dev "$dev" root netem \
        ${delay:+delay "$delay"} ${rate:+rate "$rate"} 2>/dev/null; then
        [[ -n "$delay" ]] && echo "netns-pair: no netem here; no delay added" >&2
        if [[ -n "$rate" ]]; then
          # A token bucket of 1 ms at the rate (at least 64 KiB), queueing
          # up to 50 ms.
          ip netns exec "$name-$side" tc qdisc add dev "$dev" root tbf rate "$rate" \
            burst "$(burst "$rate")" latency 50ms || return 1
        fi
      fi
    fi
  done
}

down() {
  local name=$1
  ip netns del "$name-a" 2>/dev/null || true
  ip netns del "$name-b" 2>/dev/null || true
}

run() {
  local name=$1 side=$2 x
  shift 2
  x=$(subnet "$name")
  ip netns exec "$name-$side" env COLL_NETNS_A="10.233.$x.1" COLL_NETNS_B="10.233.$x.2" \
    COLL_NETNS_DEV="$name-v$side" "$@"
}

case "${1:-}" in
up) up "$2" "${3:-}" "${4:-}" ;;
down) down "$2" ;;
run) run "${@:2}" ;;
test)
  # Names are at most 15 characters for the devices: a short unique one.
  name="cn$$"
  name=${name:0:10}
  if ! command -v ip >/dev/null || ! up "$name" 2>/dev/null; then
    down "$name"
    echo "netns-pair: cannot create network namespaces here (root and iproute2 needed); skipped"
    exit 77
  fi
  trap 'down "$name"' EXIT
  run "$name" a timeout 120 bash -c "$2" &
  server=$!
  status=0
  run "$name" b timeout 120 bash -c "$3" || status=$?
  wait "$server" || status=$?
  exit "$status"
  ;;
*)
  sed -n '2,19p' "$0" >&2
  exit 2
  ;;
esac
