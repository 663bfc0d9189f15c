// Issue 26 item 2: can an AF_XDP socket on a veth receive the kernel's
// GSO superpackets, and what does it cost per byte against an AF_PACKET
// TPACKET_V2 ring on the same veth? A throwaway measuring tool, not part of
// the product (docs/benchmarks.md, "AF_XDP on a veth"); driven by
// scripts/afxdp-veth/run.sh, which makes and deletes its own namespaces.
//
//   xsk_probe send DST_IP SECONDS SEGMENTS   unpaced UDP: 1400-byte datagrams,
//                                           or UDP_SEGMENT sends of SEGMENTS x 1400
//   xsk_probe xsk IFNAME SECONDS FRAGS       AF_XDP copy mode on queue 0 (native XDP
//                                           program redirecting to an XSKMAP;
//                                           FRAGS=1: frags-aware program, XDP_USE_SG)
//   xsk_probe ring IFNAME SECONDS            AF_PACKET TPACKET_V2 RX ring (PACKET_VNET_HDR)
//
// A receiver prints packets, bytes, the largest packet, multi-buffer
// packets, its thread's CPU seconds and what its socket counted as dropped.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
// Userspace headers older than the running kernel (6.18) lack these (linux/if_xdp.h, 6.6).
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif
#define NUM_FRAMES 4096
#define FRAME_SIZE 4096
#define RING_SIZE 2048

static void die(const char *what) {
	perror(what);
	exit(1);
}

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static double thread_cpu(void) {
	struct rusage u;
	getrusage(RUSAGE_THREAD, &u);
	return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static long sys_bpf(int cmd, union bpf_attr *attr) {
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static int send_udp(const char *dst, double secs, int segments) {
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) die("socket");
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(5999)};
	inet_pton(AF_INET, dst, &to.sin_addr);
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) die("connect");
	int gso = 1400;
	if (segments > 1 && setsockopt(fd, SOL_UDP, UDP_SEGMENT, &gso, sizeof(gso)) < 0) die("UDP_SEGMENT");
	static char buf[65000];
	memset(buf, 0xab, sizeof(buf));
	size_t len = (size_t)1400 * segments;
	unsigned long sent = 0, errors = 0;
	double end = now() + secs;
	while (now() < end) {
		for (int i = 0; i < 64; i++) {
			if (send(fd, buf, len, 0) < 0) errors++;
			else sent++;
		}
	}
	printf("sent %lu sends of %zu bytes (%lu failed)\n", sent, len, errors);
	return 0;
}

struct ring {
	uint32_t *producer, *consumer;
	void *desc;
};

static void map_ring(int fd, struct xdp_ring_offset *o, uint64_t pgoff, size_t desc_size, struct ring *r) {
	size_t len = o->desc + RING_SIZE * desc_size;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff);
	if (p == MAP_FAILED) die("mmap ring");
	r->producer = (uint32_t *)(p + o->producer);
	r->consumer = (uint32_t *)(p + o->consumer);
	r->desc = p + o->desc;
}

static void report(const char *kind, unsigned long pkts, unsigned long bytes, unsigned long maxlen,
		   unsigned long multi, double secs, double cpu) {
	printf("%s: %lu packets, %.3f Gbit/s, %.0f kpps, largest %lu bytes, %lu multi-buffer, "
	       "receiver CPU %.3f s (%.3f s/GB)\n",
	       kind, pkts, bytes * 8 / secs / 1e9, pkts / secs / 1e3, maxlen, multi, cpu,
	       bytes ? cpu / (bytes / 1e9) : 0.0);
}

static int recv_xsk(const char *ifname, double secs, int frags) {
	unsigned ifindex = if_nametoindex(ifname);
	if (!ifindex) die("if_nametoindex");
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_XSKMAP;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	int map = sys_bpf(BPF_MAP_CREATE, &a);
	if (map < 0) die("BPF_MAP_CREATE");
	// return bpf_redirect_map(&xsks, 0, XDP_PASS);
	struct bpf_insn prog[] = {
		{.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = map},
		{0},
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 2, .imm = 0},
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 3, .imm = XDP_PASS},
		{.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_redirect_map},
		{.code = BPF_JMP | BPF_EXIT},
	};
	static char log[65536];
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_XDP;
	a.insns = (uint64_t)(uintptr_t)prog;
	a.insn_cnt = sizeof(prog) / sizeof(prog[0]);
	a.license = (uint64_t)(uintptr_t) "GPL";
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	a.prog_flags = frags ? BPF_F_XDP_HAS_FRAGS : 0;
	int pfd = sys_bpf(BPF_PROG_LOAD, &a);
	if (pfd < 0) {
		fprintf(stderr, "%s\n", log);
		die("BPF_PROG_LOAD");
	}

	int fd = socket(AF_XDP, SOCK_RAW, 0);
	if (fd < 0) die("socket(AF_XDP)");
	void *umem = mmap(NULL, (size_t)NUM_FRAMES * FRAME_SIZE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (umem == MAP_FAILED) die("mmap umem");
	struct xdp_umem_reg reg = {.addr = (uint64_t)(uintptr_t)umem,
				   .len = (uint64_t)NUM_FRAMES * FRAME_SIZE,
				   .chunk_size = FRAME_SIZE};
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) < 0) die("XDP_UMEM_REG");
	int n = RING_SIZE;
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof(n)) < 0) die("FILL_RING");
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof(n)) < 0) die("COMPLETION_RING");
	if (setsockopt(fd, SOL_XDP, XDP_RX_RING, &n, sizeof(n)) < 0) die("RX_RING");
	struct xdp_mmap_offsets off;
	socklen_t ol = sizeof(off);
	if (getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol) < 0) die("XDP_MMAP_OFFSETS");
	struct ring fill, rx;
	map_ring(fd, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t), &fill);
	map_ring(fd, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc), &rx);
	struct sockaddr_xdp sx = {.sxdp_family = AF_XDP,
				  .sxdp_flags = XDP_COPY | (frags ? XDP_USE_SG : 0),
				  .sxdp_ifindex = ifindex,
				  .sxdp_queue_id = 0};
	if (bind(fd, (struct sockaddr *)&sx, sizeof(sx)) < 0) die("bind(AF_XDP)");
	uint32_t key = 0, val = fd;
	memset(&a, 0, sizeof(a));
	a.map_fd = map;
	a.key = (uint64_t)(uintptr_t)&key;
	a.value = (uint64_t)(uintptr_t)&val;
	if (sys_bpf(BPF_MAP_UPDATE_ELEM, &a) < 0) die("BPF_MAP_UPDATE_ELEM");
	// Fill ring: every frame but the ring size's worth kept for recycling order.
	uint64_t *fdesc = fill.desc;
	for (uint32_t i = 0; i < RING_SIZE; i++) fdesc[i] = (uint64_t)i * FRAME_SIZE;
	__atomic_store_n(fill.producer, RING_SIZE, __ATOMIC_RELEASE);
	memset(&a, 0, sizeof(a));
	a.link_create.prog_fd = pfd;
	a.link_create.target_ifindex = ifindex;
	a.link_create.attach_type = BPF_XDP;
	a.link_create.flags = XDP_FLAGS_DRV_MODE;
	int link = sys_bpf(BPF_LINK_CREATE, &a);
	if (link < 0) die("BPF_LINK_CREATE (native XDP)");
	printf("xsk on %s ready (frags %d)\n", ifname, frags);
	fflush(stdout);

	struct xdp_desc *rdesc = rx.desc;
	uint32_t rcons = 0, fprod = RING_SIZE;
	unsigned long pkts = 0, bytes = 0, maxlen = 0, multi = 0, cur = 0, descs = 0;
	double t0 = 0, t1 = 0, c0 = 0, end = now() + secs + 30;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (now() < end) {
		uint32_t prod = __atomic_load_n(rx.producer, __ATOMIC_ACQUIRE);
		if (prod == rcons) {
			if (t0 && now() - t1 > 1.0) break; // a second without traffic: the sender is done
			poll(&p, 1, 100);
			continue;
		}
		if (!t0) {
			t0 = now();
			c0 = thread_cpu();
		}
		for (; rcons != prod; rcons++) {
			struct xdp_desc *d = &rdesc[rcons & (RING_SIZE - 1)];
			cur += d->len;
			descs++;
			if (d->options & XDP_PKT_CONTD) {
				if (cur == d->len) multi++;
			} else {
				pkts++;
				bytes += cur;
				if (cur > maxlen) maxlen = cur;
				cur = 0;
			}
			fdesc[fprod++ & (RING_SIZE - 1)] = d->addr & ~((uint64_t)FRAME_SIZE - 1);
		}
		__atomic_store_n(rx.consumer, rcons, __ATOMIC_RELEASE);
		__atomic_store_n(fill.producer, fprod, __ATOMIC_RELEASE);
		t1 = now();
	}
	double cpu = thread_cpu() - c0;
	struct xdp_statistics st;
	socklen_t sl = sizeof(st);
	memset(&st, 0, sizeof(st));
	getsockopt(fd, SOL_XDP, XDP_STATISTICS, &st, &sl);
	report("xsk", pkts, bytes, maxlen, multi, t1 - t0, cpu);
	printf("xsk: %lu descriptors, dropped %llu, rx ring full %llu, fill ring empty %llu\n", descs,
	       (unsigned long long)st.rx_dropped, (unsigned long long)st.rx_ring_full,
	       (unsigned long long)st.rx_fill_ring_empty_descs);
	return 0;
}

static int recv_ring(const char *ifname, double secs) {
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0) die("socket(AF_PACKET)");
	int one = 1, v2 = TPACKET_V2;
	if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) < 0) die("PACKET_VNET_HDR");
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof(v2)) < 0) die("PACKET_VERSION");
	// The engine's ring geometry: 68 KiB frames (a 64 KiB superpacket), 1024 of them.
	struct tpacket_req req = {.tp_block_size = 17 * 4096, .tp_frame_size = 17 * 4096, .tp_block_nr = 1024,
				  .tp_frame_nr = 1024};
	if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0) die("PACKET_RX_RING");
	size_t len = (size_t)req.tp_block_size * req.tp_block_nr;
	char *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED) die("mmap");
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = if_nametoindex(ifname)};
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) die("bind");
	printf("ring on %s ready\n", ifname);
	fflush(stdout);
	unsigned long pkts = 0, bytes = 0, maxlen = 0, gso = 0, i = 0;
	double t0 = 0, t1 = 0, c0 = 0, end = now() + secs + 30;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (now() < end) {
		struct tpacket2_hdr *h = (void *)(ring + (i % req.tp_frame_nr) * req.tp_frame_size);
		if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) {
			if (t0 && now() - t1 > 1.0) break;
			poll(&p, 1, 100);
			continue;
		}
		if (!t0) {
			t0 = now();
			c0 = thread_cpu();
		}
		struct virtio_net_hdr *vh = (void *)((char *)h + h->tp_mac - sizeof(*vh));
		if (vh->gso_type != VIRTIO_NET_HDR_GSO_NONE) gso++;
		pkts++;
		bytes += h->tp_len;
		if (h->tp_len > maxlen) maxlen = h->tp_len;
		__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		i++;
		t1 = now();
	}
	double cpu = thread_cpu() - c0;
	struct tpacket_stats st;
	socklen_t sl = sizeof(st);
	getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl);
	report("ring", pkts, bytes, maxlen, 0, t1 - t0, cpu);
	printf("ring: %lu with a GSO header, kernel drops %u\n", gso, st.tp_drops);
	return 0;
}

int main(int argc, char **argv) {
	if (argc >= 5 && !strcmp(argv[1], "send")) return send_udp(argv[2], atof(argv[3]), atoi(argv[4]));
	if (argc >= 5 && !strcmp(argv[1], "xsk")) return recv_xsk(argv[2], atof(argv[3]), atoi(argv[4]));
	if (argc >= 4 && !strcmp(argv[1], "ring")) return recv_ring(argv[2], atof(argv[3]));
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
