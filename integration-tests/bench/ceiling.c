/*
 * The QPS ceiling of the DNS benchmarks: a UDP responder that does no
 * lookup at all. Each query is sent back as it came with QR set, read and
 * written in batches with recvmmsg/sendmmsg, by THREADS threads sharing one
 * socket. What it reaches under dnsperf is what this machine, its kernel's
 * UDP path and dnsperf allow; skydns/ceiling says how far from that skydns
 * is. Built by the benchmark scripts with the system's C compiler:
 *
 *   cc -O2 -pthread -o ceiling ceiling.c && ./ceiling PORT [THREADS]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define SIZE 1232

static int fd;

static void *serve(void *unused) {
    (void)unused;
    static __thread struct mmsghdr msgs[BATCH];
    static __thread struct iovec iovs[BATCH];
    static __thread struct sockaddr_in peers[BATCH];
    static __thread unsigned char bufs[BATCH][SIZE];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iovs[i].iov_base = bufs[i];
            iovs[i].iov_len = SIZE;
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_iov = &iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &peers[i];
            msgs[i].msg_hdr.msg_namelen = sizeof peers[i];
        }
        int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (n < 0) {
            perror("recvmmsg");
            continue;
        }
        int out = 0;
        for (int i = 0; i < n; i++) {
            if (msgs[i].msg_len < 12)
                continue; /* not a DNS header: dropped */
            bufs[i][2] |= 0x80; /* QR */
            iovs[i].iov_len = msgs[i].msg_len;
            if (out != i) {
                msgs[out] = msgs[i];
            }
            out++;
        }
        if (out > 0 && sendmmsg(fd, msgs, out, 0) < 0)
            perror("sendmmsg");
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [THREADS]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (port <= 0 || port > 65535 || threads < 1 || threads > 64) {
        fprintf(stderr, "%s: bad PORT or THREADS\n", argv[0]);
        return 2;
    }
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("bind");
        return 1;
    }
    pthread_t ids[64];
    for (int t = 1; t < threads; t++)
        pthread_create(&ids[t], NULL, serve, NULL);
    serve(NULL);
    return 0;
}
