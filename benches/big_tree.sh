# Sourced by the whole-process benchmarks: the tree they all measure.
#
# big_tree NS CLASSES: namespace NS with veth v0/v1 up, and on v0 an HTB root with CLASSES
# classes under 1:1, each with a pfifo leaf (the issues' "10,000 HTB classes each with a leaf").
# veth_ns NS [QUEUES]: namespace NS with veth v0/v1 up (QUEUES TX and RX queues each)
veth_ns() {
  local ns=$1 queues=${2:-1}
  ip netns add "$ns"
  ip -n "$ns" link add v0 numtxqueues "$queues" numrxqueues "$queues" type veth peer name v1 \
    numtxqueues "$queues" numrxqueues "$queues"
  ip -n "$ns" link set v0 up
  ip -n "$ns" link set v1 up
}

big_tree() {
  local ns=$1 classes=$2 batch
  veth_ns "$ns"
  batch=$(mktemp)
  {
    echo "qdisc add dev v0 root handle 1: htb default 1"
    echo "class add dev v0 parent 1: classid 1:1 htb rate 10gbit"
    for ((i = 2; i <= classes + 1; i++)); do
      printf 'class add dev v0 parent 1:1 classid 1:%x htb rate 1mbit ceil 10mbit\n' "$i"
      printf 'qdisc add dev v0 parent 1:%x handle %x: pfifo limit 100\n' "$i" "$i"
    done
  } >"$batch"
  tc -n "$ns" -batch "$batch"
  rm -f "$batch"
}

# flagged_tree NS CLASSES: the same shape with the mistakes a script repeats on every class:
# r2q 100 (each leaf's quantum 1250 B, below the MTU) and a 1000-packet pfifo on each leaf
# (1.2 s at its 10 Mbit ceil), so every leaf is flagged by two rules.
flagged_tree() {
  local ns=$1 classes=$2 batch
  veth_ns "$ns"
  batch=$(mktemp)
  {
    echo "qdisc add dev v0 root handle 1: htb default 2 r2q 100"
    # room for 65,000 leaves' rates: no oversubscription at any size
    echo "class add dev v0 parent 1: classid 1:1 htb rate 100gbit"
    for ((i = 2; i <= classes + 1; i++)); do
      printf 'class add dev v0 parent 1:1 classid 1:%x htb rate 1mbit ceil 10mbit\n' "$i"
      printf 'qdisc add dev v0 parent 1:%x handle %x: pfifo limit 1000\n' "$i" "$i"
    done
  } >"$batch"
  tc -n "$ns" -batch "$batch" 2>/dev/null
  rm -f "$batch"
}

# libreqos_tree NS CIRCUITS [QUEUES] [u32]: the layout LibreQoS builds on a multiqueue NIC, from its
# command shapes: an mq root (7fff:) on a veth with QUEUES TX queues (default 4), an HTB under
# each queue (handle Q:, default Q:2) with a top class Q:1 and a default class Q:2, then sites
# > access points > circuits spread over the queues (10 APs a site, 20 circuits an AP), each
# circuit with a guaranteed rate far below its ceil, as subscriber plans are. The circuits'
# leaf queues are the kernel's default FIFO (LibreQoS puts cake or fq_codel there; this
# kernel has neither). With `u32`, its older classifier too: one u32 filter per circuit on the
# queue's HTB, matching the circuit's address (10.Q.x.y), all at one prio.
libreqos_tree() {
  local ns=$1 circuits=$2 queues=${3:-4} filters=${4:-} batch q minor site ap c per_q
  veth_ns "$ns" "$queues"
  batch=$(mktemp)
  per_q=$(((circuits + queues - 1) / queues))
  {
    echo "qdisc replace dev v0 root handle 7fff: mq"
    for ((q = 1; q <= queues; q++)); do
      printf 'qdisc add dev v0 parent 7fff:%x handle %x: htb default 2\n' "$q" "$q"
      printf 'class add dev v0 parent %x: classid %x:1 htb rate 10gbit ceil 10gbit\n' "$q" "$q"
      printf 'class add dev v0 parent %x:1 classid %x:2 htb rate 100mbit ceil 10gbit prio 5\n' "$q" "$q"
      minor=3
      for ((c = 0; c < per_q; c++)); do
        if ((c % 200 == 0)); then
          site=$minor; minor=$((minor + 1))
          printf 'class add dev v0 parent %x:1 classid %x:%x htb rate 2gbit ceil 10gbit prio 3\n' "$q" "$q" "$site"
        fi
        if ((c % 20 == 0)); then
          ap=$minor; minor=$((minor + 1))
          printf 'class add dev v0 parent %x:%x classid %x:%x htb rate 200mbit ceil 1gbit prio 3\n' "$q" "$site" "$q" "$ap"
        fi
        printf 'class add dev v0 parent %x:%x classid %x:%x htb rate 5mbit ceil 100mbit prio 3\n' "$q" "$ap" "$q" "$minor"
        if [ "$filters" = u32 ]; then
          printf 'filter add dev v0 parent %x: protocol ip prio 1 u32 match ip dst 10.%d.%d.%d/32 flowid %x:%x\n' \
            "$q" "$q" $((c / 250)) $((c % 250 + 1)) "$q" "$minor"
        fi
        minor=$((minor + 1))
      done
    done
  } >"$batch"
  tc -n "$ns" -batch "$batch" 2>/dev/null
  rm -f "$batch"
}

# named_tree NS CLASSES TREE: big_tree, or libreqos_tree over 4 TX queues (TREE libreqos), with
# a u32 filter per circuit (libreqos-u32); exits on another name.
named_tree() {
  case $3 in
    big) big_tree "$1" "$2" 2>/dev/null ;;
    libreqos) libreqos_tree "$1" "$2" 4 ;;
    libreqos-u32) libreqos_tree "$1" "$2" 4 u32 ;;
    *) echo "TREE: big, libreqos or libreqos-u32" >&2; exit 2 ;;
  esac
}

# busy_tree NS CLASSES: sends one 100-byte UDP packet through each of big_tree's CLASSES leaf
# classes every second (socket priority = the class id, which HTB takes as the class), so every
# class's counters and tokens change between two polls: the worst case for anything that skips
# unchanged objects. Runs in the background as BUSY_PID (the caller kills it); needs python3.
busy_tree() {
  local ns=$1 classes=$2 mac
  ip -n "$ns" addr add 10.10.0.1/24 dev v0
  mac=$(ip -n "$ns" -o link show v1 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
  ip -n "$ns" neigh replace 10.10.0.2 lladdr "$mac" dev v0 nud permanent
  ip netns exec "$ns" python3 -c '
import socket, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
while True:
    t = time.monotonic()
    for minor in range(2, n + 2):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 0x10000 | minor)
        s.sendto(b"x" * 100, ("10.10.0.2", 9))
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
' "$classes" >/dev/null 2>&1 &
  BUSY_PID=$!
}
