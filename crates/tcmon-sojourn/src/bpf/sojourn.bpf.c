// SPDX-License-Identifier: GPL-2.0 OR MIT
// How long each packet stays in a tc tree: timestamped when the qdisc attached to a TX queue
// (the root, or each child of mq) takes it, measured when that qdisc hands it to the driver.
// Samples are kept per flow (what classification can look at); user space maps flows to
// classes with tcmon's offline classifier, so no hook inside the tree is needed (fentry and
// kprobes on a leaf's enqueue are not available on every kernel).
//
// Built with clang -target bpf -g: CO-RE relocations make the kernel structures below, which
// name only the fields read, match the running kernel's layout (no vmlinux.h needed).

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define CORE __attribute__((preserve_access_index))

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
                                   __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u32 (*bpf_get_prandom_u32)(void) = (void *)7;
static long (*bpf_loop)(__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags) = (void *)181;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;

#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_LRU_HASH 9

struct net {
	__u64 net_cookie;
} CORE;
typedef struct {
	struct net *net;
} possible_net_t;
struct net_device {
	int ifindex;
	possible_net_t nd_net;
} CORE;
struct netdev_queue {
	struct net_device *dev;
} CORE;
struct Qdisc {
	unsigned int flags;
	__u32 handle;
} CORE;

// A lockless qdisc (pfifo_fast) is enqueued without the root lock, and the enqueue tracepoint
// fires after the enqueue: another CPU may have sent the packet by then, and its timestamp
// would stay behind. Such qdiscs are not measured.
#define TCQ_F_NOLOCK 0x100
struct sk_buff {
	struct sk_buff *next;
	__u32 priority;
	__u32 mark;
	__u16 protocol;
	__u16 network_header;
	unsigned char *head;
} CORE;

// Set before loading. The bucket bounds come from tcmon-core (BOUNDS_NS), so there is one table.
#define NBOUNDS 43
volatile const __u64 bounds_ns[NBOUNDS];
volatile const __u32 sample_every;

// Written by user space: the namespace measured (its devices' net cookie), and the read epoch,
// bumped after each read (it resets each flow's maximum).
struct config {
	__u64 netns_cookie;
	__u32 epoch;
	__u32 pad;
};

struct flow_key {
	__u32 ifindex;
	__u32 qdisc;    // handle of the qdisc attached to the TX queue
	__u32 priority; // skb->priority and mark as that qdisc saw them
	__u32 mark;
	__u8 family; // 4, 6, or 0 (not IP: only the above are known)
	__u8 proto;
	__u8 tos;
	__u8 ports; // 1 when sport/dport were read
	__u16 sport; // host order
	__u16 dport;
	__u8 src[16];
	__u8 dst[16];
};

struct flow_val {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u32 max_epoch; // the read epoch max_ns belongs to
	__u32 pad;
	__u32 buckets[NBOUNDS + 1];
};

// Packets between the two hooks, by skb address. LRU: a packet dropped inside the tree (or a
// qdisc reset) leaves an entry that the oldest-first eviction reclaims; enqueue failures never
// make one (the tracepoint fires only for packets taken).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 131072);
	__type(key, __u64);
	__type(value, __u64);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct flow_val);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

static struct config *config_of(const struct netdev_queue *txq)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	if (!c || !txq)
		return 0;
	struct net_device *dev = txq->dev;
	if (!dev)
		return 0;
	struct net *net = dev->nd_net.net;
	return net && net->net_cookie == c->netns_cookie ? c : 0;
}

static __u32 bucket(__u64 ns)
{
	__u32 lo = 0, hi = NBOUNDS;
	for (int i = 0; i < 6; i++) {
		if (lo >= hi)
			break;
		__u32 mid = (lo + hi) / 2;
		if (mid >= NBOUNDS)
			break;
		if (ns <= bounds_ns[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo > NBOUNDS ? NBOUNDS : lo;
}

static void flow_of(struct sk_buff *skb, struct flow_key *k)
{
	k->priority = skb->priority;
	k->mark = skb->mark;
	__u16 proto = skb->protocol;
	unsigned char *nh = skb->head + skb->network_header;
	__u8 h[40];
	__u32 l4 = 0;
	if (proto == 0x0008) { // ETH_P_IP, big endian
		if (bpf_probe_read_kernel(h, 20, nh))
			return;
		k->family = 4;
		k->tos = h[1];
		k->proto = h[9];
		__builtin_memcpy(k->src, h + 12, 4);
		__builtin_memcpy(k->dst, h + 16, 4);
		// the first fragment only carries the ports
		if ((h[6] & 0x1f) == 0 && h[7] == 0)
			l4 = (h[0] & 0xf) * 4;
	} else if (proto == 0xdd86) { // ETH_P_IPV6
		if (bpf_probe_read_kernel(h, 40, nh))
			return;
		k->family = 6;
		k->tos = (__u8)((h[0] << 4) | (h[1] >> 4));
		k->proto = h[6];
		__builtin_memcpy(k->src, h + 8, 16);
		__builtin_memcpy(k->dst, h + 24, 16);
		l4 = 40;
	} else {
		return;
	}
	// TCP, UDP, UDP-Lite, SCTP, DCCP: ports first
	if (l4 && (k->proto == 6 || k->proto == 17 || k->proto == 136 || k->proto == 132 ||
		   k->proto == 33)) {
		__u8 p[4];
		if (bpf_probe_read_kernel(p, 4, nh + l4) == 0) {
			k->sport = (__u16)(p[0] << 8 | p[1]);
			k->dport = (__u16)(p[2] << 8 | p[3]);
			k->ports = 1;
		}
	}
}

static void measured(struct Qdisc *q, const struct netdev_queue *txq, struct sk_buff *skb,
		     __u64 now, __u32 e)
{
	__u64 addr = (__u64)skb;
	__u64 *t = bpf_map_lookup_elem(&inflight, &addr);
	if (!t)
		return;
	__u64 ns = now > *t ? now - *t : 0;
	bpf_map_delete_elem(&inflight, &addr);

	struct flow_key k = {};
	struct net_device *dev = txq->dev;
	k.ifindex = dev ? dev->ifindex : 0;
	k.qdisc = q->handle;
	flow_of(skb, &k);

	struct flow_val *v = bpf_map_lookup_elem(&flows, &k);
	if (!v) {
		struct flow_val zero = {};
		bpf_map_update_elem(&flows, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&flows, &k);
		if (!v)
			return; // no entry could be made: this sample is lost
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->sum_ns, ns);
	__u32 b = bucket(ns);
	if (b <= NBOUNDS)
		__sync_fetch_and_add(&v->buckets[b], 1);
	// racy between CPUs, which may lose a maximum that two packets set at once
	if (v->max_epoch != e) {
		v->max_epoch = e;
		v->max_ns = ns;
	} else if (ns > v->max_ns) {
		v->max_ns = ns;
	}
}

// dev_qdisc_enqueue, after a successful enqueue into the qdisc of a TX queue.
SEC("tp_btf/qdisc_enqueue")
int on_enqueue(__u64 *ctx)
{
	struct Qdisc *q = (void *)ctx[0];
	const struct netdev_queue *txq = (void *)ctx[1];
	struct sk_buff *skb = (void *)ctx[2];
	if (!skb || !q || (q->flags & TCQ_F_NOLOCK) || !config_of(txq))
		return 0;
	__u64 addr = (__u64)skb;
	if (sample_every > 1 && bpf_get_prandom_u32() % sample_every) {
		// an earlier packet at this address that never left (dropped inside the tree) must
		// not lend this one its timestamp
		bpf_map_delete_elem(&inflight, &addr);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	bpf_map_update_elem(&inflight, &addr, &now, BPF_ANY);
	return 0;
}

struct bulk {
	struct Qdisc *q;
	const struct netdev_queue *txq;
	struct sk_buff *skb;
	__u64 now;
	__u32 epoch;
};

static long one_of_bulk(__u32 i, struct bulk *b)
{
	struct sk_buff *skb = b->skb;
	if (!skb)
		return 1;
	measured(b->q, b->txq, skb, b->now, b->epoch);
	b->skb = skb->next;
	return 0;
}

// dequeue_skb: `packets` skbs linked by ->next, the first one given (none when empty). A
// bulk is at most 9 (try_bulk_dequeue_skb_slow) or what BQL allows; up to 1024 are followed.
SEC("tp_btf/qdisc_dequeue")
int on_dequeue(__u64 *ctx)
{
	struct Qdisc *q = (void *)ctx[0];
	const struct netdev_queue *txq = (void *)ctx[1];
	int packets = (int)ctx[2];
	struct sk_buff *skb = (void *)ctx[3];
	// most dequeues of a shaper find nothing to send: leave before any lookup
	if (!skb || !q)
		return 0;
	struct config *c = config_of(txq);
	if (!c)
		return 0;
	__u32 e = c->epoch;
	__u64 now = bpf_ktime_get_ns();
	struct bulk b = {q, txq, skb, now, e};
	// bpf_loop: the verifier checks the body once, not once per packet of the bulk
	bpf_loop(packets < 1 ? 1 : packets > 1024 ? 1024 : packets, one_of_bulk, &b, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
