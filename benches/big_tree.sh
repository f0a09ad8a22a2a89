# Sourced by the whole-process benchmarks: the tree they all measure.
#
# big_tree NS CLASSES: namespace NS with veth v0/v1 up, and on v0 an HTB root with CLASSES
# classes under 1:1, each with a pfifo leaf (the issues' "10,000 HTB classes each with a leaf").
big_tree() {
  local ns=$1 classes=$2 batch
  ip netns add "$ns"
  ip -n "$ns" link add v0 type veth peer name v1
  ip -n "$ns" link set v0 up
  ip -n "$ns" link set v1 up
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
  ip netns add "$ns"
  ip -n "$ns" link add v0 type veth peer name v1
  ip -n "$ns" link set v0 up
  ip -n "$ns" link set v1 up
  batch=$(mktemp)
  {
    echo "qdisc add dev v0 root handle 1: htb default 2 r2q 100"
    echo "class add dev v0 parent 1: classid 1:1 htb rate 10gbit"
    for ((i = 2; i <= classes + 1; i++)); do
      printf 'class add dev v0 parent 1:1 classid 1:%x htb rate 1mbit ceil 10mbit\n' "$i"
      printf 'qdisc add dev v0 parent 1:%x handle %x: pfifo limit 1000\n' "$i" "$i"
    done
  } >"$batch"
  tc -n "$ns" -batch "$batch" 2>/dev/null
  rm -f "$batch"
}
