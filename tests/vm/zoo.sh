#!/usr/bin/env bash
# A tree of every qdisc, class, filter and action kind that the host's kernel lacks, one kind
# per veth, in namespace NS (peers in NS-peer, addressed so that ping reaches each one through
# its qdisc). Sourced by the VM tests and by tests/vm/capture-kinds; needs a full kernel.
#   tests/vm/zoo.sh NS
set -euo pipefail
ns=$1
peer=$ns-peer
ip netns add "$ns"
ip netns add "$peer"
# no IPv6: its router solicitations and DAD would send packets of their own between two reads
for n in "$ns" "$peer"; do
  ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
n=0
dev() { # dev NAME: a veth NAME in $ns, its peer in $peer, 10.N.0.1 <-> 10.N.0.2
  n=$((n + 1))
  ip -n "$ns" link add "$1" type veth peer name "p$n" netns "$peer"
  ip -n "$ns" addr add "10.$n.0.1/24" dev "$1"
  ip -n "$peer" addr add "10.$n.0.2/24" dev "p$n"
  ip -n "$ns" link set "$1" up
  ip -n "$peer" link set "p$n" up
  # permanent neighbours: no ARP probe leaves seconds later, between two reads of counters
  local mac_a mac_b
  mac_a=$(ip -n "$ns" -o link show "$1" | grep -o 'link/ether [^ ]*' | cut -d' ' -f2)
  mac_b=$(ip -n "$peer" -o link show "p$n" | grep -o 'link/ether [^ ]*' | cut -d' ' -f2)
  ip -n "$ns" neigh replace "10.$n.0.2" lladdr "$mac_b" dev "$1" nud permanent
  ip -n "$peer" neigh replace "10.$n.0.1" lladdr "$mac_a" dev "p$n" nud permanent
}
t() { tc -n "$ns" "$@"; }

dev fqc;   t qdisc replace dev fqc root handle 1: fq_codel limit 2000 flows 512 quantum 1514 target 4ms interval 90ms ecn ce_threshold 2ms drop_batch 32 memory_limit 16Mb
dev cake;  t qdisc replace dev cake root handle 1: cake bandwidth 10mbit diffserv4 nat wash rtt 50ms overhead 18 mpu 64 ack-filter
dev sfq;   t qdisc replace dev sfq root handle 1: sfq perturb 10 quantum 1514 limit 100 depth 50 divisor 1024 headdrop
dev fq;    t qdisc replace dev fq root handle 1: fq limit 5000 flow_limit 50 quantum 3028 initial_quantum 15140 maxrate 100mbit buckets 2048 low_rate_threshold 1mbit
dev codel; t qdisc replace dev codel root handle 1: codel limit 500 target 3ms interval 50ms ecn ce_threshold 1ms
dev pie;   t qdisc replace dev pie root handle 1: pie limit 500 target 15ms tupdate 30ms alpha 2 beta 20 ecn bytemode dq_rate_estimator
dev red;   t qdisc replace dev red root handle 1: red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 probability 0.02 bandwidth 10mbit ecn adaptive
dev netem; t qdisc replace dev netem root handle 1: netem limit 500 delay 20ms 5ms 25% loss 1% duplicate 0.5% reorder 10% 50% corrupt 0.1% rate 100mbit slot 1ms 2ms
dev hfsc
t qdisc replace dev hfsc root handle 1: hfsc default 10
t class add dev hfsc parent 1: classid 1:1 hfsc sc rate 10mbit ul rate 10mbit
t class add dev hfsc parent 1:1 classid 1:10 hfsc rt m1 2mbit d 10ms m2 1mbit ls rate 5mbit
t class add dev hfsc parent 1:1 classid 1:20 hfsc ls m1 0 d 20ms m2 3mbit ul rate 8mbit
dev prio
t qdisc replace dev prio root handle 1: prio bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
t qdisc add dev prio parent 1:1 handle 10: pfifo limit 50
t filter add dev prio parent 1: protocol ip prio 1 flower ip_proto udp dst_port 5001 src_ip 10.10.0.0/16 action skbedit priority 1:2 action gact pass
t filter add dev prio parent 1: protocol ip prio 2 matchall action police rate 1mbit burst 10k conform-exceed drop/pipe action vlan push id 100
t filter add dev prio parent 1: protocol ip prio 3 handle 7 fw classid 1:3
t filter add dev prio parent 1: protocol ip prio 4 basic match 'cmp(u16 at 2 layer transport eq 53)' classid 1:1 action gact drop
t filter add dev prio parent 1: protocol ip prio 5 route to 10 classid 1:2 action gact pass
t filter add dev prio parent 1: protocol ip prio 6 route from 3 to 5 classid 1:1
t filter add dev prio parent 1: protocol ip prio 7 route fromif prio to 7 classid 1:3
t filter add dev prio parent 1: protocol 802_3 prio 8 matchall classid 1:1
dev drr
t qdisc replace dev drr root handle 1: drr
t class add dev drr parent 1: classid 1:1 drr quantum 1514
t class add dev drr parent 1: classid 1:2 drr quantum 3000
t filter add dev drr parent 1: protocol all prio 1 matchall classid 1:1
dev qfq
t qdisc replace dev qfq root handle 1: qfq
t class add dev qfq parent 1: classid 1:1 qfq weight 10 maxpkt 1514
t class add dev qfq parent 1: classid 1:2 qfq weight 30 maxpkt 9000
t filter add dev qfq parent 1: protocol all prio 1 matchall classid 1:2

# some traffic through each, so that counters and xstats are not all zero
for ((i = 1; i <= n; i++)); do
  ip netns exec "$ns" ping -q -c 3 -i 0.01 -W 1 "10.$i.0.2" >/dev/null 2>&1 || true
done
