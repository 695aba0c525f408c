"""skydns's share of propagation at cluster sizes: an etcd v3 holding N
records (A records of services, as kube2sky writes them), skydns serving
them; then, SAMPLES times, one new record PUT through etcd's JSON gateway
and the time until skydns answers it (a DNS query from this process every
0.5 ms, no process spawned per poll). Also the QPS of dnsperf (4 clients,
1,000 names that exist) still, while 200 keys per second are written outside
skydns's prefix (the same load on the machine, nothing for skydns), and
while 200 records per second change in the zone (other names than those
asked): the hot path's cache under churn.

Usage: propagation.py BIN_DIR SIZES [SAMPLES]   (SIZES: comma-separated)
Prints one table row per size.
"""

import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import dnsperf, etcd_put, free_port, percentile, query, start_etcd, udp_socket

BIN = sys.argv[1]
SIZES = [int(s) for s in sys.argv[2].split(",")]
SAMPLES = int(sys.argv[3]) if len(sys.argv) > 3 else 100
WORK = tempfile.mkdtemp(prefix="propagation-")
ZONE = "/skydns/local/cluster/svc/"


def ip_of(i):
    return "10.%d.%d.%d" % (i // 62500 + 1, (i // 250) % 250, i % 250 + 1)


def record(ip):
    return '{"host":"%s","priority":10,"weight":10,"ttl":30,"targetstrip":0}' % ip


class Etcd:
    def __init__(self):
        self.proc, self.url = start_etcd(tempfile.mkdtemp(dir=WORK), "p")

    def txn(self, puts):
        etcd_put(self.url, puts)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def name_of(i):
    return "s%d.bulk.svc.cluster.local" % i


def key_of(i):
    return ZONE + "bulk/s%d/%x" % (i, i)


def qps(port, names, seconds):
    """dnsperf's queries per second asking `names` (4 clients)."""
    path = os.path.join(WORK, "queries")
    with open(path, "w") as f:
        for n in names:
            f.write("%s A\n" % n)
    return dnsperf(port, path, seconds)


def run(size):
    etcd = Etcd()
    for start in range(0, size, 128):
        etcd.txn([(key_of(i), record(ip_of(i))) for i in range(start, min(size, start + 128))])
    port = free_port()
    log = open(os.path.join(WORK, "skydns.log"), "a")
    skydns = subprocess.Popen(
        [os.path.join(BIN, "skydns"), "-addr", "127.0.0.1:%d" % port, "-machines", etcd.url,
         "-etcd3", "-domain", "cluster.local."], stdout=log, stderr=log)
    rss_kb = 0
    try:
        sock = udp_socket(port)
        deadline = time.time() + 300
        while True:
            try:
                if query(sock, name_of(size - 1), 1)[1] > 0:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("skydns never answered")
            time.sleep(0.05)
        delays = []
        for s in range(SAMPLES):
            i = size + s
            etcd.txn([(key_of(i), record(ip_of(i)))])
            t0 = time.perf_counter()
            while query(sock, name_of(i), 2)[1] == 0:
                time.sleep(0.0005)
            delays.append((time.perf_counter() - t0) * 1000)
        names = [name_of(random.randrange(size)) for _ in range(1000)]
        still = qps(port, names, 8)
        def churning(prefix):
            """dnsperf's QPS while 20 keys under `prefix` change every 100 ms."""
            stop = threading.Event()

            def churn():
                j = 0
                while not stop.is_set():
                    t = time.time()
                    etcd.txn([(prefix + "s%d/%x" % ((j + k) % 1000, j + k), record(ip_of(j + k)))
                              for k in range(20)])
                    j += 20
                    time.sleep(max(0, 0.1 - (time.time() - t)))

            churner = threading.Thread(target=churn)
            churner.start()
            try:
                return qps(port, names, 8)
            finally:
                stop.set()
                churner.join()

        # The same writes outside skydns's prefix load the machine (etcd,
        # this script) as much, and change nothing skydns serves.
        elsewhere = churning("/elsewhere/")
        inside = churning(ZONE + "churn/")
        with open("/proc/%d/status" % skydns.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
        print("| %d | %.1f ms | %.1f ms | %.1f ms | %.0f | %.0f | %.0f | %.2f | %.2f | %.0f MB |" % (
            size, percentile(delays, 50), percentile(delays, 99), max(delays),
            still, elsewhere, inside, inside / still, inside / elsewhere, rss_kb / 1024), flush=True)
    finally:
        skydns.kill()
        skydns.wait()
        etcd.stop()


def main():
    print("| records | propagation p50 | p99 | max | QPS still | QPS, 200 writes/s elsewhere | QPS, 200 changes/s in the zone | in zone / still | in zone / elsewhere | skydns RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        for size in SIZES:
            run(size)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


main()
