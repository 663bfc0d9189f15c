/*
 * The guest side of tests/vhost_user_qemu.rs: a static program in the QEMU
 * guest's initramfs (busybox has no UDP_SEGMENT). It sends a known byte
 * stream and prints one result line on the serial console for the test to
 * parse:
 *
 *   qemu_guest_net tcp ADDR PORT BYTES
 *     one TCP connection, BYTES bytes of the pattern (the guest kernel's TSO
 *     superpackets when the device took HOST_TSO4);
 *     prints "SPGUEST tcp sent=N fnv=HEX"
 *   qemu_guest_net udp ADDR PORT GSO_SIZE BYTES_PER_SEND SENDS
 *     UDP with the UDP_SEGMENT socket option: each send of BYTES_PER_SEND
 *     bytes leaves the socket as one GSO packet of GSO_SIZE-byte datagrams;
 *     prints "SPGUEST udp sent=N fnv=HEX"
 *
 * The pattern is byte k = (k * 13) % 251 over the whole stream; fnv is
 * 64-bit FNV-1a over every byte sent, in order. A failure prints
 * "SPGUEST <mode> error=<what>: <errno text>" and exits 1.
 *
 * Built by the test with `gcc -static -O2`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOL_UDP
#define SOL_UDP 17
#endif

static uint64_t fnv = 0xcbf29ce484222325ULL;
static uint64_t offset;

/* Fills `buf` with the next `n` bytes of the pattern and hashes them. */
static void next_chunk(unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = (unsigned char)(((offset + i) * 13) % 251);
        fnv ^= buf[i];
        fnv *= 0x100000001b3ULL;
    }
    offset += n;
}

static int fail(const char *mode, const char *what)
{
    printf("SPGUEST %s error=%s: %s\n", mode, what, strerror(errno));
    fflush(stdout);
    return 1;
}

static int address(const char *ip, const char *port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)atoi(port));
    return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static int tcp(const char *ip, const char *port, size_t total)
{
    struct sockaddr_in sa;
    if (address(ip, port, &sa) < 0) {
        return fail("tcp", "address");
    }
    int fd = -1;
    /* The link and the neighbour may take a moment: retry for about 10 s. */
    for (int attempt = 0; attempt < 100; attempt++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) {
            return fail("tcp", "socket");
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            break;
        }
        close(fd);
        fd = -1;
        usleep(100 * 1000);
    }
    if (fd < 0) {
        return fail("tcp", "connect");
    }
    static unsigned char buf[256 * 1024];
    size_t sent = 0;
    while (sent < total) {
        size_t n = total - sent < sizeof(buf) ? total - sent : sizeof(buf);
        next_chunk(buf, n);
        size_t off = 0;
        while (off < n) {
            ssize_t w = write(fd, buf + off, n - off);
            if (w < 0) {
                return fail("tcp", "write");
            }
            off += (size_t)w;
        }
        sent += n;
    }
    if (shutdown(fd, SHUT_WR) < 0) {
        return fail("tcp", "shutdown");
    }
    /* Wait for the peer's close: every byte was taken. */
    char c;
    while (read(fd, &c, 1) > 0) {
    }
    close(fd);
    printf("SPGUEST tcp sent=%zu fnv=%016llx\n", sent, (unsigned long long)fnv);
    fflush(stdout);
    return 0;
}

static int udp(const char *ip, const char *port, int gso, size_t per_send, int sends)
{
    struct sockaddr_in sa;
    if (address(ip, port, &sa) < 0) {
        return fail("udp", "address");
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        return fail("udp", "socket");
    }
    if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &gso, sizeof(gso)) < 0) {
        return fail("udp", "UDP_SEGMENT");
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        return fail("udp", "connect");
    }
    static unsigned char buf[65000];
    if (per_send > sizeof(buf)) {
        errno = EMSGSIZE;
        return fail("udp", "size");
    }
    size_t sent = 0;
    for (int i = 0; i < sends; i++) {
        next_chunk(buf, per_send);
        ssize_t w = send(fd, buf, per_send, 0);
        if (w != (ssize_t)per_send) {
            return fail("udp", "send");
        }
        sent += per_send;
        /* Pace the sends so that the receiver's socket buffer keeps up. */
        usleep(20 * 1000);
    }
    close(fd);
    printf("SPGUEST udp sent=%zu fnv=%016llx\n", sent, (unsigned long long)fnv);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "tcp") == 0) {
        return tcp(argv[2], argv[3], (size_t)strtoull(argv[4], NULL, 10));
    }
    if (argc == 7 && strcmp(argv[1], "udp") == 0) {
        return udp(argv[2], argv[3], atoi(argv[4]), (size_t)strtoull(argv[5], NULL, 10), atoi(argv[6]));
    }
    fprintf(stderr, "usage: %s tcp ADDR PORT BYTES | udp ADDR PORT GSO_SIZE BYTES_PER_SEND SENDS\n", argv[0]);
    return 2;
}
