/* SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * dpdk_peer: DPDK 22.11 as a peer of `superpacket bench peers` (issue 11).
 *
 * Usage:
 *   dpdk_peer --mode gro|gso|gro-vxlan|gso-vxlan --pcap FILE --batch N --samples S [--mss M]
 *             [--ptype parse|given]
 *
 * Reads Ethernet frames (TCP/IPv4) from a classic pcap file, starts the EAL
 * without hugepages and without PCI, preloads the frames into mbufs and times
 * DPDK's own software offloads on them:
 *
 *   gro  The frames, in file order, cut into bursts of N; each burst goes
 *        through rte_gro_reassemble_burst() (lightweight mode, TCP/IPv4).
 *        Per sample: fresh mbufs are filled from the file (untimed: GRO chains
 *        and edits the mbufs it merges), GRO over all bursts is timed, then the
 *        outputs are counted and freed (untimed). The mbufs are taken from the
 *        pool in one bulk and filled in address order, frame after frame, as
 *        superpacket's harness fills its reused buffers (a pool's free order
 *        scrambles them over many passes; in address order the headers GRO
 *        reads stay as close together as the other engines' are).
 *        rte_gro does not touch checksums (the IPv4 header checksum of a
 *        merged packet is stale).
 *        With --ptype parse (the default) the timed region also does what
 *        the other engines do with the same raw frames: each frame is parsed
 *        (rte_net_get_ptype: packet type and header lengths, which
 *        rte_gro needs and which superpacket and tun-rs find out by
 *        themselves), and each merged packet's IPv4 header checksum is
 *        refreshed (rte_ipv4_cksum), so that the output is a valid packet
 *        as superpacket's is. --ptype given sets the packet type and header
 *        lengths untimed, as a NIC with packet-type offload would, and
 *        leaves the merged headers stale.
 *
 *   gso  Each frame is a TCP/IPv4 superpacket (up to 64 KB). rte_gso_segment()
 *        cuts it into segments of at most M payload bytes (gso_size =
 *        l2 + l3 + l4 + M). rte_gso leaves checksums to the NIC, so for
 *        wire-ready output like the other engines' the IPv4 header checksum
 *        and TCP checksum of every segment are computed in software
 *        (rte_ipv4_cksum, rte_ipv4_udptcp_cksum_mbuf over the header mbuf +
 *        indirect payload mbuf) inside the timed region. Freeing the segments
 *        is untimed. N superpackets are segmented per burst; the batch does
 *        not change the work (rte_gso_segment takes one packet at a time).
 *
 *   gro-vxlan, gso-vxlan  The same over VXLAN: each frame is TCP/IPv4 inside
 *        VXLAN (UDP port 4789) over IPv4 (outer UDP checksum 0).
 *        gro-vxlan uses RTE_GRO_IPV4_VXLAN_TCP_IPV4 (DPDK's only tunnel GRO);
 *        with --ptype parse the timed region reads the outer and inner
 *        headers of each frame for the tunnel packet type and the lengths
 *        (outer_l2_len, outer_l3_len, l2_len = UDP + VXLAN + inner
 *        Ethernet, l3_len, l4_len; rte_net_get_ptype does not recognise
 *        VXLAN) and refreshes both IPv4 header checksums of every merged
 *        packet. gso-vxlan uses RTE_ETH_TX_OFFLOAD_VXLAN_TNL_TSO (ol_flags
 *        TUNNEL_VXLAN | TCP_SEG | IPV4 | OUTER_IPV4) and computes, timed,
 *        the outer and inner IPv4 header checksums and the inner TCP
 *        checksum of every segment (the outer UDP checksum stays 0).
 *
 * One untimed, unreported warm-up pass runs first; its output is verified
 * (gro: lengths and payload bytes conserved; gso: every segment's checksums,
 * sequence numbers, and the concatenated payload equal to the input's). Then
 * S timed passes over the whole file; the output counts of every pass must
 * equal the warm-up's.
 *
 * Output: one JSON line on stdout,
 *   {"peer":"dpdk","version":"DPDK 22.11.x","mode":"gro","batch":N,
 *    "packets_in":..,"packets_out":..,"bytes_in":..,"bytes_out":..,
 *    "samples_ns":[..], ...}
 * where packets/bytes are per pass (one pass = the whole file) and bytes are
 * Ethernet frame bytes. Diagnostics go to stderr.
 *
 * Exit status: 0 success; 1 run-time failure (bad pcap, unsupported frame,
 * mempool exhausted, verification failed; message on stderr); 2 usage error;
 * 3 the EAL did not start: stdout then holds {"peer":"dpdk","error":"..."}
 * with rte_strerror(rte_errno), the EAL arguments tried and the EAL's log.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_net.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_gro.h>
#include <rte_gso.h>
#include <rte_ip.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_tcp.h>
#include <rte_version.h>

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define EXIT_EAL 3

/* Largest frame accepted from the pcap file (the crate's default snaplen). */
#define MAX_FRAME_LEN 262144u
/* Largest data room of one mbuf: buf_len is a uint16_t. */
#define MAX_DATA_ROOM UINT16_MAX
#define ETH_HLEN 14u
#define ETHERTYPE_IPV4 0x0800u
#define IPPROTO_TCP_NUM 6u
#define IPPROTO_UDP_NUM 17u
#define VXLAN_PORT 4789u
/* Outer UDP + VXLAN + inner Ethernet: DPDK's l2_len of a VXLAN packet. */
#define VXLAN_L2_LEN (8u + 8u + ETH_HLEN)

/* --mode gro-vxlan / gso-vxlan: the frames are TCP/IPv4 in VXLAN over IPv4. */
static bool vxlan;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Prints "dpdk_peer: <message>" on stderr and exits with EXIT_RUNTIME. */
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("dpdk_peer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_RUNTIME);
}

static void usage(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Prints the problem and the usage line on stderr and exits with EXIT_USAGE. */
static void usage(const char *fmt, ...)
{
	va_list ap;

	fputs("dpdk_peer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nusage: dpdk_peer --mode gro|gso|gro-vxlan|gso-vxlan --pcap FILE --batch N --samples S [--mss M] [--ptype parse|given]\n", stderr);
	exit(EXIT_USAGE);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writes s as a JSON string (with quotes) to out. */
static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		default:
			if (*p < 0x20)
				fprintf(out, "\\u%04x", *p);
			else
				fputc(*p, out);
		}
	}
	fputc('"', out);
}

static uint16_t rd16be(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32be(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* Parses a positive decimal integer option; usage error otherwise. */
static unsigned long parse_count(const char *opt, const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || *s == '-' || v == 0 || v > max)
		usage("%s: expected an integer from 1 to %lu, got '%s'", opt, max, s);
	return v;
}

/* ------------------------------------------------------------------------ */
/* Classic pcap reader (linktype 1, Ethernet)                               */
/* ------------------------------------------------------------------------ */

/* One Ethernet frame of the file, with its TCP/IPv4 header lengths. */
struct frame {
	const uint8_t *data;
	uint32_t len;
	uint8_t l3_len; /* IPv4 header, with options */
	uint8_t l4_len; /* TCP header, with options */
	uint8_t ol3_len; /* VXLAN: the outer IPv4 header (else 0) */
	uint8_t base;	 /* offset of the (inner) IPv4 header of the TCP segment */
};

struct capture {
	uint8_t *buf; /* the whole file */
	struct frame *frames;
	uint32_t count;
	uint64_t bytes;
	uint32_t max_len;
};

/* Reads the whole pcap file; fails with a clear message on anything that is
 * not a classic pcap of whole Ethernet frames. */
static void read_pcap(const char *path, struct capture *cap)
{
	FILE *f = fopen(path, "rb");
	long size;
	size_t cap_frames = 1024;
	bool swap;
	uint32_t magic, linktype;
	size_t off;

	memset(cap, 0, sizeof(*cap));
	if (f == NULL)
		die("cannot open pcap '%s': %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		die("cannot size pcap '%s': %s", path, strerror(errno));
	cap->buf = malloc((size_t)size + 1);
	if (cap->buf == NULL || fread(cap->buf, 1, (size_t)size, f) != (size_t)size)
		die("cannot read pcap '%s' (%ld bytes)", path, size);
	fclose(f);

	if (size < 24)
		die("%s: %ld bytes is too short for a pcap file header (24 bytes)", path, size);
	memcpy(&magic, cap->buf, 4);
	if (magic == 0xa1b2c3d4u || magic == 0xa1b23c4du)
		swap = false;
	else if (magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u)
		swap = true;
	else if (magic == 0x0a0d0d0au)
		die("%s: pcapng is not supported; write a classic pcap", path);
	else
		die("%s: not a classic pcap file (magic 0x%08" PRIx32 ")", path, magic);

#define FIELD32(p) (swap ? __builtin_bswap32(*(const uint32_t *)(p)) : *(const uint32_t *)(p))
#define FIELD16(p) (swap ? __builtin_bswap16(*(const uint16_t *)(p)) : *(const uint16_t *)(p))
	if (FIELD16(cap->buf + 4) != 2)
		die("%s: unsupported pcap version %u.%u (expected 2.4)", path, FIELD16(cap->buf + 4),
		    FIELD16(cap->buf + 6));
	linktype = FIELD32(cap->buf + 20) & 0xffff; /* upper bits: FCS information */
	if (linktype != 1)
		die("%s: link type %" PRIu32 ", expected 1 (Ethernet)", path, linktype);

	cap->frames = malloc(cap_frames * sizeof(*cap->frames));
	if (cap->frames == NULL)
		die("out of memory");
	for (off = 24; off < (size_t)size;) {
		uint32_t incl, orig;
		struct frame *fr;

		if ((size_t)size - off < 16)
			die("%s: truncated record header at offset %zu (frame %" PRIu32 ")", path, off, cap->count);
		incl = FIELD32(cap->buf + off + 8);
		orig = FIELD32(cap->buf + off + 12);
		off += 16;
		if (incl > MAX_FRAME_LEN)
			die("%s: frame %" PRIu32 " is %" PRIu32 " bytes, more than %u", path, cap->count, incl,
			    MAX_FRAME_LEN);
		if (incl != orig)
			die("%s: frame %" PRIu32 " is snapped (%" PRIu32 " of %" PRIu32 " bytes captured)", path,
			    cap->count, incl, orig);
		if ((size_t)size - off < incl)
			die("%s: frame %" PRIu32 " is truncated (%" PRIu32 " bytes announced, %zu left)", path,
			    cap->count, incl, (size_t)size - off);
		if (cap->count == cap_frames) {
			cap_frames *= 2;
			cap->frames = realloc(cap->frames, cap_frames * sizeof(*cap->frames));
			if (cap->frames == NULL)
				die("out of memory");
		}
		fr = &cap->frames[cap->count++];
		fr->data = cap->buf + off;
		fr->len = incl;
		cap->bytes += incl;
		if (incl > cap->max_len)
			cap->max_len = incl;
		off += incl;
	}
#undef FIELD32
#undef FIELD16
	if (cap->count == 0)
		die("%s: no frames", path);
}

/* Checks that frame i is TCP/IPv4 over untagged Ethernet with no padding and
 * fills in its header lengths. */
static void classify(const char *path, uint32_t i, struct frame *fr)
{
	const uint8_t *ip = fr->data + ETH_HLEN;
	uint32_t ihl, total, doff, base = ETH_HLEN;

	fr->ol3_len = 0;
	if (fr->len < ETH_HLEN + 20 + 20)
		die("%s: frame %" PRIu32 ": %" PRIu32 " bytes is too short for TCP/IPv4", path, i, fr->len);
	if (rd16be(fr->data + 12) != ETHERTYPE_IPV4)
		die("%s: frame %" PRIu32 ": ethertype 0x%04x, expected IPv4 (0x0800, untagged)", path, i,
		    rd16be(fr->data + 12));
	if (vxlan) {
		/* Outer IPv4 + UDP to 4789 + VXLAN + inner Ethernet (IPv4). */
		if ((ip[0] >> 4) != 4 || (ihl = (ip[0] & 0xfu) * 4u) < 20)
			die("%s: frame %" PRIu32 ": bad outer IPv4 version/IHL byte 0x%02x", path, i, ip[0]);
		if (ip[9] != IPPROTO_UDP_NUM || (rd16be(ip + 6) & 0x3fffu) != 0)
			die("%s: frame %" PRIu32 ": outer IPv4 is not an unfragmented UDP packet", path, i);
		if (ETH_HLEN + rd16be(ip + 2) != fr->len)
			die("%s: frame %" PRIu32 ": outer IPv4 total length does not match the frame", path, i);
		if (fr->len < ETH_HLEN + ihl + VXLAN_L2_LEN + 20 + 20 || rd16be(ip + ihl + 2) != VXLAN_PORT)
			die("%s: frame %" PRIu32 ": not VXLAN (UDP port %u) over IPv4", path, i, VXLAN_PORT);
		if (rd16be(ip + ihl + 6) != 0)
			die("%s: frame %" PRIu32 ": outer UDP checksum set (the VXLAN rows use 0)", path, i);
		if (rd16be(ip + ihl + VXLAN_L2_LEN - 2) != ETHERTYPE_IPV4)
			die("%s: frame %" PRIu32 ": inner ethertype is not IPv4", path, i);
		fr->ol3_len = (uint8_t)ihl;
		base = ETH_HLEN + ihl + VXLAN_L2_LEN;
		ip = fr->data + base;
	}
	if ((ip[0] >> 4) != 4 || (ihl = (ip[0] & 0xfu) * 4u) < 20)
		die("%s: frame %" PRIu32 ": bad IPv4 version/IHL byte 0x%02x", path, i, ip[0]);
	if (ip[9] != IPPROTO_TCP_NUM)
		die("%s: frame %" PRIu32 ": IP protocol %u, expected TCP (6)", path, i, ip[9]);
	if ((rd16be(ip + 6) & 0x3fffu) != 0)
		die("%s: frame %" PRIu32 ": is an IPv4 fragment", path, i);
	total = rd16be(ip + 2);
	if (base + total != fr->len)
		die("%s: frame %" PRIu32 ": IPv4 total length %" PRIu32 " does not match the frame (%" PRIu32
		    " bytes; Ethernet padding is not supported)",
		    path, i, total, fr->len);
	if (fr->len < base + ihl + 20)
		die("%s: frame %" PRIu32 ": truncated TCP header", path, i);
	doff = (ip[ihl + 12] >> 4) * 4u;
	if (doff < 20 || base + ihl + doff > fr->len)
		die("%s: frame %" PRIu32 ": bad TCP data offset %" PRIu32, path, i, doff);
	fr->l3_len = (uint8_t)ihl;
	fr->l4_len = (uint8_t)doff;
	fr->base = (uint8_t)base;
}

/* ------------------------------------------------------------------------ */
/* Software checksum used only to verify the output (independent of DPDK)    */
/* ------------------------------------------------------------------------ */

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t acc)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		acc += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		acc += (uint32_t)(p[n - 1] << 8);
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return acc;
}

/* True if the IPv4 header and TCP checksums of the linear frame are valid
 * (the TCP/IPv4 packet at `base`; for VXLAN also the outer IPv4 header's). */
static bool frame_checksums_ok(const uint8_t *f, uint32_t len, uint32_t base, uint32_t l3_len)
{
	const uint8_t *ip = f + base;
	uint32_t tcp_len = len - base - l3_len;
	uint32_t acc;

	if (base != ETH_HLEN && sum16(f + ETH_HLEN, (f[ETH_HLEN] & 0xfu) * 4u, 0) != 0xffff)
		return false;
	if (sum16(ip, l3_len, 0) != 0xffff)
		return false;
	acc = sum16(ip + 12, 8, 0); /* source and destination address */
	acc += IPPROTO_TCP_NUM + tcp_len;
	return sum16(ip + l3_len, tcp_len, acc) == 0xffff;
}

/* ------------------------------------------------------------------------ */
/* EAL and mbufs                                                            */
/* ------------------------------------------------------------------------ */

/* Starts the EAL with no hugepages, no PCI, no shared files and no telemetry.
 * The EAL's log is captured in memory during the start so that a failure can
 * be reported with it; afterwards it goes to stderr. mem_mb is the memory to
 * reserve (anonymous memory, since there are no hugepages).
 *
 * --in-memory is not used: with --no-huge (which implies --legacy-mem) the
 * EAL refuses it ("Option --legacy-mem is not compatible with --in-memory");
 * --no-shconf keeps the run from creating shared config files instead.
 * --iova-mode=va lets it start without root (physical addresses need root).
 * The EAL prints its usage text on stdout on bad arguments, so stdout is
 * pointed at stderr during rte_eal_init. */
static void start_eal(const char *prog, unsigned int mem_mb, char *args_out, size_t args_len)
{
	char mem[32];
	char *logtext = NULL;
	size_t loglen = 0;
	FILE *log = open_memstream(&logtext, &loglen);
	char *argv[] = {
		(char *)prog, "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry",
		"--iova-mode=va", "-l", "0", "-m", mem, "--log-level=*:notice", NULL,
	};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
	size_t pos = 0;
	int ret, err, saved_stdout;

	snprintf(mem, sizeof(mem), "%u", mem_mb);
	args_out[0] = '\0';
	for (int i = 1; i < argc; i++)
		pos += (size_t)snprintf(args_out + pos, pos < args_len ? args_len - pos : 0, "%s%s",
					i > 1 ? " " : "", argv[i]);
	if (log != NULL)
		rte_openlog_stream(log);
	/* The EAL prints its usage text on stdout: keep stdout for the JSON. */
	fflush(stdout);
	saved_stdout = dup(STDOUT_FILENO);
	if (saved_stdout >= 0)
		dup2(STDERR_FILENO, STDOUT_FILENO);
	ret = rte_eal_init(argc, argv);
	err = rte_errno;
	fflush(stdout);
	if (saved_stdout >= 0) {
		dup2(saved_stdout, STDOUT_FILENO);
		close(saved_stdout);
	}
	if (log != NULL) {
		fflush(log);
		rte_openlog_stream(stderr);
	}
	if (ret < 0) {
		char reason[8192];
		/* Keep the log on one line for the JSON reason. */
		for (size_t i = 0; logtext != NULL && i < loglen; i++)
			if (logtext[i] == '\n')
				logtext[i] = (i + 1 < loglen) ? '|' : ' ';
		snprintf(reason, sizeof(reason), "rte_eal_init failed: %s (rte_errno %d); EAL arguments tried: %s; EAL log: %s",
			 rte_strerror(err), err, args_out, logtext && loglen ? logtext : "(empty)");
		fputs("{\"peer\":\"dpdk\",\"error\":", stdout);
		json_string(stdout, reason);
		fputs("}\n", stdout);
		fflush(stdout);
		fprintf(stderr, "dpdk_peer: %s\n", reason);
		exit(EXIT_EAL);
	}
	if (log != NULL)
		fclose(log);
	free(logtext);
}

/* An mbuf pool of n mbufs with data_room bytes of data each (0: indirect). */
static struct rte_mempool *make_pool(const char *name, unsigned int n, uint16_t data_room)
{
	unsigned int cache = n / 4 < RTE_MEMPOOL_CACHE_MAX_SIZE ? n / 4 : RTE_MEMPOOL_CACHE_MAX_SIZE;
	struct rte_mempool *mp = rte_pktmbuf_pool_create(name, n, cache, 0, data_room, (int)rte_socket_id());

	if (mp == NULL)
		die("rte_pktmbuf_pool_create(%s, %u mbufs of %u bytes) failed: %s", name, n, data_room,
		    rte_strerror(rte_errno));
	return mp;
}

/* The data room for frames of up to max_len bytes (chained beyond 64 KB). */
static uint16_t frame_data_room(uint32_t max_len)
{
	uint32_t room = max_len + RTE_PKTMBUF_HEADROOM;

	if (room < RTE_MBUF_DEFAULT_BUF_SIZE)
		room = RTE_MBUF_DEFAULT_BUF_SIZE;
	return room > MAX_DATA_ROOM ? MAX_DATA_ROOM : (uint16_t)room;
}

/* Mbufs needed for one frame of len bytes in a pool of data_room. */
static unsigned int mbufs_per_frame(uint32_t len, uint16_t data_room)
{
	uint32_t per = data_room - RTE_PKTMBUF_HEADROOM;

	return (len + per - 1) / per;
}

/* --ptype given (and always for gso, whose metadata every engine is given):
 * load_frame sets the packet type and header lengths, untimed. Otherwise the
 * timed GRO loop parses each frame for them (see the top of this file). */
static bool given_ptype = true;

/* Copies frame fr into a fresh (chained if needed) mbuf from mp and, when
 * given_ptype, sets the header lengths and packet type that rte_gro and
 * rte_gso read. */
/* The mbufs of one GRO pass, taken from the pool in one bulk and handed out
 * in address order (see the top of this file). */
struct ordered_mbufs {
	struct rte_mbuf **m;
	uint32_t n, next;
};

static int cmp_mbuf_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(struct rte_mbuf *const *)a, y = (uintptr_t)*(struct rte_mbuf *const *)b;

	return x < y ? -1 : x > y;
}

/* Takes o->n mbufs from mp and sorts them by address. */
static void ordered_refill(struct ordered_mbufs *o, struct rte_mempool *mp)
{
	if (rte_pktmbuf_alloc_bulk(mp, o->m, o->n) != 0)
		die("mbuf pool '%s' exhausted while loading frames (%" PRIu32 " mbufs)", mp->name, o->n);
	qsort(o->m, o->n, sizeof(o->m[0]), cmp_mbuf_address);
	o->next = 0;
}

/* The next mbuf: from `order` if given, else straight from the pool. */
static struct rte_mbuf *next_mbuf(struct rte_mempool *mp, struct ordered_mbufs *order)
{
	if (order == NULL)
		return rte_pktmbuf_alloc(mp);
	return order->next < order->n ? order->m[order->next++] : NULL;
}

static struct rte_mbuf *load_frame(struct rte_mempool *mp, struct ordered_mbufs *order, const struct frame *fr)
{
	struct rte_mbuf *head = NULL, *last = NULL;
	uint32_t off = 0;

	while (off < fr->len) {
		struct rte_mbuf *m = next_mbuf(mp, order);
		uint32_t n;

		if (m == NULL)
			die("mbuf pool '%s' exhausted while loading frames", mp->name);
		n = rte_pktmbuf_tailroom(m);
		if (n > fr->len - off)
			n = fr->len - off;
		memcpy(rte_pktmbuf_append(m, (uint16_t)n), fr->data + off, n);
		off += n;
		if (head == NULL) {
			head = m;
		} else {
			last->next = m;
			head->nb_segs++;
			head->pkt_len += n;
		}
		last = m;
	}
	if (given_ptype) {
		head->l2_len = ETH_HLEN;
		head->l3_len = fr->l3_len;
		head->l4_len = fr->l4_len;
		head->packet_type = RTE_PTYPE_L2_ETHER |
				    (fr->l3_len == 20 ? RTE_PTYPE_L3_IPV4 : RTE_PTYPE_L3_IPV4_EXT) | RTE_PTYPE_L4_TCP;
		if (vxlan) {
			head->outer_l2_len = ETH_HLEN;
			head->outer_l3_len = fr->ol3_len;
			head->l2_len = VXLAN_L2_LEN;
			head->packet_type = RTE_PTYPE_L2_ETHER |
					    (fr->ol3_len == 20 ? RTE_PTYPE_L3_IPV4 : RTE_PTYPE_L3_IPV4_EXT) |
					    RTE_PTYPE_L4_UDP | RTE_PTYPE_TUNNEL_VXLAN | RTE_PTYPE_INNER_L2_ETHER |
					    (fr->l3_len == 20 ? RTE_PTYPE_INNER_L3_IPV4 : RTE_PTYPE_INNER_L3_IPV4_EXT) |
					    RTE_PTYPE_INNER_L4_TCP;
		}
	}
	return head;
}

/* Copies the whole packet m into buf (of at least m->pkt_len bytes). */
static const uint8_t *linear(const struct rte_mbuf *m, uint8_t *buf)
{
	const void *p = rte_pktmbuf_read(m, 0, m->pkt_len, buf);

	if (p == NULL)
		die("rte_pktmbuf_read failed on a %" PRIu32 "-byte packet", m->pkt_len);
	return p;
}

/* ------------------------------------------------------------------------ */
/* Results                                                                  */
/* ------------------------------------------------------------------------ */

struct result {
	uint64_t packets_out;
	uint64_t bytes_out;
};

struct options {
	const char *mode;
	const char *pcap;
	unsigned long batch;
	unsigned long samples;
	unsigned long mss; /* 0: derive */
	bool ptype_given;  /* gro: --ptype given */
	bool ptype_set;	   /* --ptype was named */
};

/* ------------------------------------------------------------------------ */
/* GRO                                                                      */
/* ------------------------------------------------------------------------ */

/* --ptype parse for VXLAN: what rte_net_get_ptype does for plain frames,
 * for a frame that classify() accepted (outer IPv4, UDP to 4789, VXLAN,
 * inner Ethernet, IPv4, TCP): packet type and header lengths from its
 * bytes. A frame that is not VXLAN to 4789 keeps plain L2/L3/L4 types and
 * passes through GRO untouched. */
static inline void vxlan_parse(struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t ol3 = (f[ETH_HLEN] & 0xfu) * 4u;
	const uint8_t *udp = f + ETH_HLEN + ol3;
	const uint8_t *ip = udp + VXLAN_L2_LEN;
	uint32_t l3 = (ip[0] & 0xfu) * 4u;

	m->outer_l2_len = ETH_HLEN;
	m->outer_l3_len = ol3;
	if (f[ETH_HLEN + 9] != IPPROTO_UDP_NUM || rd16be(udp + 2) != VXLAN_PORT || ip[9] != IPPROTO_TCP_NUM) {
		m->packet_type = RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4;
		return;
	}
	m->l2_len = VXLAN_L2_LEN;
	m->l3_len = l3;
	m->l4_len = (ip[l3 + 12] >> 4) * 4u;
	m->packet_type = RTE_PTYPE_L2_ETHER | (ol3 == 20 ? RTE_PTYPE_L3_IPV4 : RTE_PTYPE_L3_IPV4_EXT) |
			 RTE_PTYPE_L4_UDP | RTE_PTYPE_TUNNEL_VXLAN | RTE_PTYPE_INNER_L2_ETHER |
			 (l3 == 20 ? RTE_PTYPE_INNER_L3_IPV4 : RTE_PTYPE_INNER_L3_IPV4_EXT) | RTE_PTYPE_INNER_L4_TCP;
}

/* One pass of GRO over the whole file in bursts of `batch`: loads fresh mbufs
 * (untimed), times rte_gro_reassemble_burst over all bursts, then counts,
 * optionally verifies and frees the outputs (untimed). Returns the time. */
static uint64_t gro_pass(const struct capture *cap, struct rte_mempool *mp, struct ordered_mbufs *order,
			 struct rte_mbuf **pkts, uint16_t *nb_out, unsigned long batch,
			 const struct rte_gro_param *param, bool verify, struct result *res, uint8_t *scratch)
{
	uint32_t nb_bursts = (uint32_t)((cap->count + batch - 1) / batch);
	uint64_t t0, t1, payload_in = 0, payload_out = 0;

	ordered_refill(order, mp);
	for (uint32_t i = 0; i < cap->count; i++) {
		pkts[i] = load_frame(mp, order, &cap->frames[i]);
		payload_in += cap->frames[i].len - cap->frames[i].base - cap->frames[i].l3_len - cap->frames[i].l4_len;
	}

	t0 = now_ns();
	for (uint32_t b = 0; b < nb_bursts; b++) {
		uint32_t first = b * (uint32_t)batch;
		uint32_t n = cap->count - first < batch ? cap->count - first : (uint32_t)batch;
		struct rte_mbuf **burst = &pkts[first];

		if (!given_ptype && vxlan) {
			for (uint32_t k = 0; k < n; k++)
				vxlan_parse(burst[k]);
		} else if (!given_ptype) {
			for (uint32_t k = 0; k < n; k++) {
				struct rte_net_hdr_lens hl;

				burst[k]->packet_type = rte_net_get_ptype(burst[k], &hl, RTE_PTYPE_ALL_MASK);
				burst[k]->l2_len = hl.l2_len;
				burst[k]->l3_len = hl.l3_len;
				burst[k]->l4_len = hl.l4_len;
			}
		}
		nb_out[b] = rte_gro_reassemble_burst(burst, (uint16_t)n, param);
		if (!given_ptype) {
			for (uint16_t k = 0; k < nb_out[b]; k++) {
				struct rte_mbuf *m = burst[k];

				if (m->nb_segs > 1 && vxlan) {
					struct rte_ipv4_hdr *oip =
						rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, m->outer_l2_len);
					struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(
						m, struct rte_ipv4_hdr *, m->outer_l2_len + m->outer_l3_len + m->l2_len);

					oip->hdr_checksum = 0;
					oip->hdr_checksum = rte_ipv4_cksum(oip);
					ip->hdr_checksum = 0;
					ip->hdr_checksum = rte_ipv4_cksum(ip);
				} else if (m->nb_segs > 1) {
					struct rte_ipv4_hdr *ip =
						rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, m->l2_len);

					ip->hdr_checksum = 0;
					ip->hdr_checksum = rte_ipv4_cksum(ip);
				}
			}
		}
	}
	t1 = now_ns();

	res->packets_out = 0;
	res->bytes_out = 0;
	for (uint32_t b = 0; b < nb_bursts; b++) {
		struct rte_mbuf **out = &pkts[b * (uint32_t)batch];

		for (uint16_t k = 0; k < nb_out[b]; k++) {
			struct rte_mbuf *m = out[k];

			res->packets_out++;
			res->bytes_out += m->pkt_len;
			if (verify) {
				const uint8_t *f = linear(m, scratch);
				uint32_t base = vxlan ? ETH_HLEN + (f[ETH_HLEN] & 0xfu) * 4u + VXLAN_L2_LEN : ETH_HLEN;
				const uint8_t *ip = f + base;
				uint32_t ihl = (ip[0] & 0xfu) * 4u;
				uint32_t doff = (ip[ihl + 12] >> 4) * 4u;

				if (base + rd16be(ip + 2) != m->pkt_len)
					die("gro verification: output of %" PRIu32 " bytes has IPv4 total length %u",
					    m->pkt_len, rd16be(ip + 2));
				if (vxlan && (ETH_HLEN + rd16be(f + ETH_HLEN + 2) != m->pkt_len ||
					      ETH_HLEN + (f[ETH_HLEN] & 0xfu) * 4u + rd16be(f + base - VXLAN_L2_LEN + 4) !=
						      m->pkt_len))
					die("gro verification: output of %" PRIu32 " bytes has wrong outer IPv4 or UDP lengths",
					    m->pkt_len);
				payload_out += m->pkt_len - base - ihl - doff;
			}
			rte_pktmbuf_free(m);
		}
	}
	if (verify && payload_out != payload_in)
		die("gro verification: %" PRIu64 " TCP payload bytes in, %" PRIu64 " out", payload_in, payload_out);
	return t1 - t0;
}

/* ------------------------------------------------------------------------ */
/* GSO                                                                      */
/* ------------------------------------------------------------------------ */

/* Completes the IPv4 header checksum and the TCP checksum of segment m (the
 * header mbuf followed by indirect payload mbufs), as a NIC would. */
static inline void gso_fill_checksums(struct rte_mbuf *m, uint16_t l2_len, uint16_t l3_len)
{
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, l2_len);
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)((char *)ip + l3_len);

	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	tcp->cksum = 0;
	tcp->cksum = rte_ipv4_udptcp_cksum_mbuf(m, ip, (uint16_t)(l2_len + l3_len));
}

/* The same for a VXLAN segment: the outer IPv4 header checksum, then the
 * inner IPv4 header and TCP checksums (the outer UDP checksum stays 0). */
static inline void gso_fill_vxlan_checksums(struct rte_mbuf *m, const struct rte_mbuf *pkt)
{
	struct rte_ipv4_hdr *oip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, pkt->outer_l2_len);

	oip->hdr_checksum = 0;
	oip->hdr_checksum = rte_ipv4_cksum(oip);
	gso_fill_checksums(m, (uint16_t)(pkt->outer_l2_len + pkt->outer_l3_len + pkt->l2_len), pkt->l3_len);
}

/* Checks the segments of superpacket fr: count, lengths, checksums, sequence
 * numbers and that their payloads concatenate to the superpacket's. */
static void gso_verify(const struct frame *fr, uint32_t index, struct rte_mbuf **segs, int n, uint32_t mss,
		       uint8_t *scratch)
{
	uint32_t hdr = fr->base + fr->l3_len + fr->l4_len;
	uint32_t payload = fr->len - hdr;
	uint32_t want = (payload + mss - 1) / mss;
	uint32_t seq0 = rd32be(fr->data + fr->base + fr->l3_len + 4);
	uint32_t off = 0;

	if ((uint32_t)n != want)
		die("gso verification: superpacket %" PRIu32 " (%" PRIu32 " payload bytes, MSS %" PRIu32
		    ") gave %d segments, expected %" PRIu32,
		    index, payload, mss, n, want);
	for (int k = 0; k < n; k++) {
		const uint8_t *f = linear(segs[k], scratch);
		uint32_t len = segs[k]->pkt_len;
		uint32_t seg_payload = len - hdr;
		const uint8_t *tcp = f + fr->base + fr->l3_len;

		if (len < hdr || seg_payload > mss || seg_payload == 0)
			die("gso verification: superpacket %" PRIu32 " segment %d has %" PRIu32 " bytes", index, k, len);
		if (ETH_HLEN + rd16be(f + ETH_HLEN + 2) != len || fr->base + rd16be(f + fr->base + 2) != len)
			die("gso verification: superpacket %" PRIu32 " segment %d: IPv4 total length %u for %" PRIu32
			    " bytes",
			    index, k, rd16be(f + ETH_HLEN + 2), len);
		if (vxlan && (ETH_HLEN + fr->ol3_len + rd16be(f + ETH_HLEN + fr->ol3_len + 4) != len ||
			      rd16be(f + ETH_HLEN + fr->ol3_len + 6) != 0))
			die("gso verification: superpacket %" PRIu32 " segment %d: bad outer UDP length or checksum", index,
			    k);
		if (!frame_checksums_ok(f, len, fr->base, fr->l3_len))
			die("gso verification: superpacket %" PRIu32 " segment %d: bad IPv4 or TCP checksum", index, k);
		if (rd32be(tcp + 4) != seq0 + off)
			die("gso verification: superpacket %" PRIu32 " segment %d: sequence %" PRIu32 ", expected %" PRIu32,
			    index, k, rd32be(tcp + 4), seq0 + off);
		if (memcmp(f + hdr, fr->data + hdr + off, seg_payload) != 0)
			die("gso verification: superpacket %" PRIu32 " segment %d: payload differs from the input at "
			    "offset %" PRIu32,
			    index, k, off);
		off += seg_payload;
	}
	if (off != payload)
		die("gso verification: superpacket %" PRIu32 ": %" PRIu32 " payload bytes out of %" PRIu32, index, off,
		    payload);
}

/* One pass of GSO over all superpackets in bursts of `batch`: times
 * rte_gso_segment plus the software checksums of every segment, then counts,
 * optionally verifies and frees the segments (untimed). Returns the time. */
static uint64_t gso_pass(const struct capture *cap, struct rte_mbuf **in, struct rte_mbuf **out,
			 uint32_t out_cap, int *nb_segs, const uint32_t *mss, unsigned long batch,
			 struct rte_gso_ctx *ctxs, bool verify, struct result *res, uint8_t *scratch)
{
	uint32_t used = 0;
	uint64_t t0, t1;

	/* rte_gso_segment clears RTE_MBUF_F_TX_TCP_SEG on its input: set it again. */
	for (uint32_t i = 0; i < cap->count; i++)
		in[i]->ol_flags = vxlan ? RTE_MBUF_F_TX_TUNNEL_VXLAN | RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_IPV4 |
						  RTE_MBUF_F_TX_OUTER_IPV4 | RTE_MBUF_F_TX_OUTER_IP_CKSUM |
						  RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM
					: RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM |
						  RTE_MBUF_F_TX_TCP_CKSUM;

	t0 = now_ns();
	for (uint32_t first = 0; first < cap->count; first += (uint32_t)batch) {
		uint32_t end = cap->count - first < batch ? cap->count : first + (uint32_t)batch;

		for (uint32_t i = first; i < end; i++) {
			struct rte_mbuf *pkt = in[i];
			uint32_t room = out_cap - used;
			int n = rte_gso_segment(pkt, &ctxs[i], &out[used], (uint16_t)(room > UINT16_MAX ? UINT16_MAX : room));

			if (unlikely(n < 0))
				die("rte_gso_segment failed on superpacket %" PRIu32 ": %s", i, rte_strerror(-n));
			if (n == 0) {
				/* Not segmented (fits in one segment): the packet itself goes out. */
				out[used] = pkt;
				n = 1;
			}
			if (vxlan)
				for (int k = 0; k < n; k++)
					gso_fill_vxlan_checksums(out[used + k], pkt);
			else
				for (int k = 0; k < n; k++)
					gso_fill_checksums(out[used + k], pkt->l2_len, pkt->l3_len);
			nb_segs[i] = n;
			used += (uint32_t)n;
		}
	}
	t1 = now_ns();

	res->packets_out = used;
	res->bytes_out = 0;
	used = 0;
	for (uint32_t i = 0; i < cap->count; i++) {
		struct rte_mbuf **segs = &out[used];
		bool passthrough = segs[0] == in[i];

		if (verify)
			gso_verify(&cap->frames[i], i, segs, nb_segs[i], mss[i], scratch);
		for (int k = 0; k < nb_segs[i]; k++) {
			res->bytes_out += segs[k]->pkt_len;
			if (!passthrough)
				rte_pktmbuf_free(segs[k]);
		}
		used += (uint32_t)nb_segs[i];
	}
	return t1 - t0;
}

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

static void parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"mode", required_argument, NULL, 'm'},	   {"pcap", required_argument, NULL, 'p'},
		{"batch", required_argument, NULL, 'b'},   {"samples", required_argument, NULL, 's'},
		{"mss", required_argument, NULL, 'M'},	   {"help", no_argument, NULL, 'h'},
		{"ptype", required_argument, NULL, 't'},   {NULL, 0, NULL, 0},
	};
	int c;

	memset(o, 0, sizeof(*o));
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': o->mode = optarg; break;
		case 'p': o->pcap = optarg; break;
		case 'b': o->batch = parse_count("--batch", optarg, UINT16_MAX); break;
		case 's': o->samples = parse_count("--samples", optarg, 1000000); break;
		case 'M': o->mss = parse_count("--mss", optarg, 65000); break;
		case 't':
			if (strcmp(optarg, "parse") == 0)
				o->ptype_given = false;
			else if (strcmp(optarg, "given") == 0)
				o->ptype_given = true;
			else
				usage("--ptype must be parse or given, got '%s'", optarg);
			o->ptype_set = true;
			break;
		case 'h': usage("help");
		default: usage("unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage("unexpected argument '%s'", argv[optind]);
	if (o->mode == NULL || (strcmp(o->mode, "gro") != 0 && strcmp(o->mode, "gso") != 0 &&
				strcmp(o->mode, "gro-vxlan") != 0 && strcmp(o->mode, "gso-vxlan") != 0))
		usage("--mode must be gro, gso, gro-vxlan or gso-vxlan");
	if (o->pcap == NULL)
		usage("--pcap FILE is required");
	if (o->batch == 0)
		usage("--batch N is required");
	if (o->samples == 0)
		usage("--samples S is required");
	if (o->ptype_set && strncmp(o->mode, "gro", 3) != 0)
		usage("--ptype applies to --mode gro and gro-vxlan only");
	if (o->mss != 0 && strncmp(o->mode, "gso", 3) != 0)
		usage("--mss applies to --mode gso and gso-vxlan only");
}

static void print_result(const struct options *o, const struct capture *cap, const struct result *res,
			 const uint64_t *samples, const char *eal_args, const char *extra)
{
	printf("{\"peer\":\"dpdk\",\"version\":");
	json_string(stdout, rte_version());
	printf(",\"mode\":\"%s\",\"batch\":%lu,\"packets_in\":%" PRIu32 ",\"packets_out\":%" PRIu64
	       ",\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64 ",\"samples_ns\":[",
	       o->mode, o->batch, cap->count, res->packets_out, cap->bytes, res->bytes_out);
	for (unsigned long s = 0; s < o->samples; s++)
		printf("%s%" PRIu64, s ? "," : "", samples[s]);
	printf("],\"ptype\":\"%s\",\"eal_args\":", given_ptype ? "given" : "parse");
	json_string(stdout, eal_args);
	printf("%s}\n", extra);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct options o;
	struct capture cap;
	struct result warm, res;
	char eal_args[512], extra[1024] = "";
	uint64_t *samples;
	uint8_t *scratch;
	uint64_t mem_bytes;
	unsigned int mem_mb;
	bool gro;

	parse_options(argc, argv, &o);
	gro = strncmp(o.mode, "gro", 3) == 0;
	vxlan = strstr(o.mode, "vxlan") != NULL;
	given_ptype = !gro || o.ptype_given;

	/* The file is read and checked before the EAL starts: bad input is
	 * reported without EAL noise and sizes the memory to reserve. */
	read_pcap(o.pcap, &cap);
	for (uint32_t i = 0; i < cap.count; i++)
		classify(o.pcap, i, &cap.frames[i]);

	samples = calloc(o.samples, sizeof(*samples));
	scratch = malloc(cap.max_len > 65536 ? cap.max_len : 65536);
	if (samples == NULL || scratch == NULL)
		die("out of memory");

	/* Memory: the frames' mbufs (about 2x their data with mbuf overhead),
	 * GSO's header and indirect mbufs, plus the EAL's own needs. */
	mem_bytes = (uint64_t)cap.count * (frame_data_room(cap.max_len) + 512u) * 2u;
	if (!gro)
		mem_bytes += (cap.bytes / 64 + cap.count) * (RTE_MBUF_DEFAULT_BUF_SIZE + 512u) * 2u;
	mem_mb = (unsigned int)(mem_bytes >> 20) + 256u;
	start_eal(argv[0], mem_mb, eal_args, sizeof(eal_args));

	if (gro) {
		uint16_t room = frame_data_room(cap.max_len);
		unsigned int n = 0;
		struct rte_mempool *mp;
		struct rte_mbuf **pkts = calloc(cap.count, sizeof(*pkts));
		uint16_t *nb_out = calloc((cap.count + o.batch - 1) / o.batch, sizeof(*nb_out));
		/* Tables sized so that a whole burst is processed: the library
		 * clamps them to RTE_GRO_MAX_BURST_ITEM_NUM items per call. */
		struct rte_gro_param param = {
			.gro_types = vxlan ? RTE_GRO_IPV4_VXLAN_TCP_IPV4 : RTE_GRO_TCP_IPV4,
			.max_flow_num = RTE_GRO_MAX_BURST_ITEM_NUM,
			.max_item_per_flow = RTE_GRO_MAX_BURST_ITEM_NUM,
		};

		if (pkts == NULL || nb_out == NULL)
			die("out of memory");
		for (uint32_t i = 0; i < cap.count; i++)
			n += mbufs_per_frame(cap.frames[i].len, room);
		mp = make_pool("gro_frames", n + 64, room);
		struct ordered_mbufs order = { .m = calloc(n, sizeof(struct rte_mbuf *)), .n = n, .next = 0 };
		if (order.m == NULL)
			die("out of memory");
		if (o.batch > RTE_GRO_MAX_BURST_ITEM_NUM)
			fprintf(stderr,
				"dpdk_peer: warning: batch %lu exceeds RTE_GRO_MAX_BURST_ITEM_NUM (%u): "
				"rte_gro_reassemble_burst keeps at most %u packets (flows and out-of-order "
				"segments) per call and passes the rest through unmerged\n",
				o.batch, RTE_GRO_MAX_BURST_ITEM_NUM, RTE_GRO_MAX_BURST_ITEM_NUM);
		gro_pass(&cap, mp, &order, pkts, nb_out, o.batch, &param, true, &warm, scratch);
		for (unsigned long s = 0; s < o.samples; s++) {
			samples[s] = gro_pass(&cap, mp, &order, pkts, nb_out, o.batch, &param, false, &res, scratch);
			if (res.packets_out != warm.packets_out || res.bytes_out != warm.bytes_out)
				die("gro: sample %lu gave %" PRIu64 " packets, the warm-up %" PRIu64, s, res.packets_out,
				    warm.packets_out);
		}
		snprintf(extra, sizeof(extra),
			 ",\"gro_max_burst_items\":%u,\"batch_exceeds_gro_max\":%s,"
			 "\"timed\":\"rte_gro_reassemble_burst over all bursts (IPv4 checksums not updated)\"",
			 RTE_GRO_MAX_BURST_ITEM_NUM, o.batch > RTE_GRO_MAX_BURST_ITEM_NUM ? "true" : "false");
	} else {
		uint16_t room = frame_data_room(cap.max_len);
		unsigned int n_in = 0, out_cap = 0;
		uint32_t mss_min = UINT32_MAX;
		struct rte_mempool *in_pool, *direct, *indirect;
		struct rte_mbuf **in = calloc(cap.count, sizeof(*in));
		struct rte_gso_ctx *ctxs = calloc(cap.count, sizeof(*ctxs));
		uint32_t *mss = calloc(cap.count, sizeof(*mss));
		int *nb_segs = calloc(cap.count, sizeof(*nb_segs));
		struct rte_mbuf **out;

		if (in == NULL || ctxs == NULL || mss == NULL || nb_segs == NULL)
			die("out of memory");
		for (uint32_t i = 0; i < cap.count; i++) {
			const struct frame *fr = &cap.frames[i];
			uint32_t hdr = fr->base + fr->l3_len + fr->l4_len;
			uint32_t payload = fr->len - hdr;

			/* Default MSS: what fits a 1500-byte (inner) IP MTU (1448 for TCP with timestamps). */
			mss[i] = o.mss ? (uint32_t)o.mss : 1500u - fr->l3_len - fr->l4_len;
			if (hdr + mss[i] > UINT16_MAX || hdr + mss[i] < RTE_GSO_SEG_SIZE_MIN)
				die("gso: superpacket %" PRIu32 ": segment size %" PRIu32 " out of range", i, hdr + mss[i]);
			if (payload == 0)
				die("gso: superpacket %" PRIu32 " has no TCP payload", i);
			if (mss[i] < mss_min)
				mss_min = mss[i];
			n_in += mbufs_per_frame(fr->len, room);
			out_cap += (payload + mss[i] - 1) / mss[i];
		}
		in_pool = make_pool("gso_superpackets", n_in + 64, room);
		direct = make_pool("gso_direct", out_cap + 64, RTE_MBUF_DEFAULT_BUF_SIZE);
		indirect = make_pool("gso_indirect", out_cap * (room < cap.max_len ? 2 : 1) + 64, 0);
		out = calloc(out_cap + 1, sizeof(*out));
		if (out == NULL)
			die("out of memory");
		for (uint32_t i = 0; i < cap.count; i++) {
			const struct frame *fr = &cap.frames[i];

			in[i] = load_frame(in_pool, NULL, fr);
			ctxs[i] = (struct rte_gso_ctx){
				.direct_pool = direct,
				.indirect_pool = indirect,
				.flag = 0, /* incrementing IPv4 IDs, like Linux */
				.gso_types = vxlan ? RTE_ETH_TX_OFFLOAD_VXLAN_TNL_TSO : RTE_ETH_TX_OFFLOAD_TCP_TSO,
				.gso_size = (uint16_t)(fr->base + fr->l3_len + fr->l4_len + mss[i]),
			};
		}
		gso_pass(&cap, in, out, out_cap + 1, nb_segs, mss, o.batch, ctxs, true, &warm, scratch);
		for (unsigned long s = 0; s < o.samples; s++) {
			samples[s] = gso_pass(&cap, in, out, out_cap + 1, nb_segs, mss, o.batch, ctxs, false, &res, scratch);
			if (res.packets_out != warm.packets_out || res.bytes_out != warm.bytes_out)
				die("gso: sample %lu gave %" PRIu64 " segments, the warm-up %" PRIu64, s, res.packets_out,
				    warm.packets_out);
		}
		snprintf(extra, sizeof(extra),
			 ",\"mss\":%" PRIu32 ",\"timed\":\"rte_gso_segment plus software IPv4 and TCP checksums "
			 "(rte_ipv4_cksum, rte_ipv4_udptcp_cksum_mbuf) of every segment%s\"",
			 mss_min, vxlan ? ", outer IPv4 header checksum too" : "");
	}

	print_result(&o, &cap, &warm, samples, eal_args, extra);
	rte_eal_cleanup();
	return 0;
}
