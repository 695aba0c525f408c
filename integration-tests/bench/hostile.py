#!/usr/bin/env python3
"""Hostile-input load for skydns (run by hostile.sh, which starts skydns).

Phases, each with an in-domain probe running beside it in its own process
(one UDP query for kubernetes.default.svc.cluster.local every 10 ms, 1 s
timeout), run twice: a warm-up pass, then the measured pass:
  plain        plain in-domain queries
  idle-tcp     2,000 TCP connections that never send (past the limit of
               1,000), and a new TCP client every 100 ms that must be
               answered within 1 s
  slowloris    500 TCP connections sending one byte per second
  no-read-tcp  500 TCP clients pipelining 300 queries for a ~56 KB answer,
               never reading
  dead-1k      1,000 QPS of distinct external names (the upstream never answers)
  dead-8k      8,000 QPS of the same
  dnsperf-60s  dnsperf, 60 s, in-domain and external names mixed
  cool-down    nothing but the probe, 10 s
For each: skydns's RSS before / peak / after, its peak open fds, probes sent,
lost, and the p99 probe latency. Prints a Markdown table and checks the goals
of docs/testing.md: RSS growth < 5% after warm-up (the measured
pass's cool-down vs the warm-up pass's: memory that a second round of the
same floods does not reuse is a leak), RSS <= 100 MB at any time, probe
p99 <= 50 ms, 0 probes lost.
"""

import argparse
import multiprocessing
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time


def query(name, qtype=1, qid=None):
    qid = random.randrange(65536) if qid is None else qid
    header = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.strip(".").split("."))
    return header + labels + b"\x00" + struct.pack(">HH", qtype, 1)


class Server:
    """skydns's process: RSS and fds from /proc."""

    def __init__(self, pid):
        self.pid = pid

    def rss_mb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))


def probe_loop(port, stop, results):
    """The in-domain probe, in its own process so that the load threads
    (and their GIL) cannot delay it: latencies of answers, count of losses."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(1.0)
    latencies, lost, n = [], 0, 0
    while not stop.is_set():
        n = (n + 1) % 65536
        start = time.monotonic()
        sock.sendto(query("kubernetes.default.svc.cluster.local", 1, n), ("127.0.0.1", port))
        try:
            while True:
                data, _ = sock.recvfrom(4096)
                if data[:2] == struct.pack(">H", n):
                    break
            latencies.append(time.monotonic() - start)
        except socket.timeout:
            lost += 1
        time.sleep(max(0.0, 0.01 - (time.monotonic() - start)))
    results.put((latencies, lost))


class Probe:
    """Starts [`probe_loop`] in a child process; `finish` collects it."""

    def __init__(self, port):
        self.stop = multiprocessing.Event()
        self.results = multiprocessing.Queue()
        self.process = multiprocessing.Process(target=probe_loop, args=(port, self.stop, self.results))
        self.process.start()
        self.latencies, self.lost = [], 0

    def finish(self):
        self.stop.set()
        self.latencies, self.lost = self.results.get()
        self.process.join()

    def p99_ms(self):
        if not self.latencies:
            return float("nan")
        s = sorted(self.latencies)
        return 1000 * s[min(len(s) - 1, int(len(s) * 0.99))]


def hold_idle_tcp(port, n, seconds, stop, newcomers=None):
    """Holds `n` idle TCP connections for `seconds`; meanwhile, if
    `newcomers` is a list, a new TCP client every 100 ms asks for
    kubernetes A (1 s timeout) and its latency (None: no answer) is added."""
    conns = []
    for _ in range(n):
        try:
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            pass
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        if newcomers is not None:
            newcomers.append(tcp_query(port, "kubernetes.default.svc.cluster.local"))
        stop.wait(0.1)
    for c in conns:
        c.close()


def tcp_query(port, name, timeout=1.0):
    """One query on a new TCP connection: seconds to the reply, or None."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
            c.settimeout(timeout)
            q = query(name)
            c.sendall(struct.pack(">H", len(q)) + q)
            head = c.recv(2)
            if len(head) < 2:
                return None
            want, got = struct.unpack(">H", head)[0], b""
            while len(got) < want:
                chunk = c.recv(want - len(got))
                if not chunk:
                    return None
                got += chunk
        return time.monotonic() - start
    except OSError:
        return None


def slowloris(port, n, seconds, stop):
    conns = []
    for _ in range(n):
        try:
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            pass
    msg = struct.pack(">H", 40) + query("kubernetes.default.svc.cluster.local")
    sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set() and sent < len(msg):
        for c in conns:
            try:
                c.send(msg[sent:sent + 1])
            except OSError:
                pass
        sent += 1
        stop.wait(1.0)
    for c in conns:
        c.close()


def no_read_tcp(port, n, per_client, seconds, stop):
    msg = query("many.default.svc.cluster.local")
    framed = struct.pack(">H", len(msg)) + msg
    conns = []
    for _ in range(n):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=2)
            c.setblocking(False)
            conns.append([c, framed * per_client])
        except OSError:
            pass
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        for entry in conns:
            if entry[1]:
                try:
                    sent = entry[0].send(entry[1])
                    entry[1] = entry[1][sent:]
                except OSError:
                    entry[1] = b""
        time.sleep(0.05)
    for c, _ in conns:
        c.close()


def dead_upstream(port, qps, seconds, stop):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    n = 0
    start = time.monotonic()
    while not stop.is_set():
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        while n < int(elapsed * qps):
            n += 1
            try:
                sock.sendto(query(f"x{n}-{random.randrange(1 << 30)}.example.org"), ("127.0.0.1", port))
            except OSError:
                pass
        try:
            while True:
                sock.recv(4096)
        except OSError:
            pass
        time.sleep(0.001)
    sock.close()


def dnsperf(port, seconds, work):
    path = os.path.join(work, "mixed.txt")
    with open(path, "w") as f:
        for i in range(2000):
            f.write("kubernetes.default.svc.cluster.local A\n")
            f.write("_https._tcp.kubernetes.default.svc.cluster.local SRV\n")
            f.write(f"missing{i}.default.svc.cluster.local A\n")
            f.write(f"ext{i}.example.org A\n")
    out = subprocess.run(
        ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", path, "-l", str(seconds), "-c", "4", "-t", "5"],
        capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if "Queries lost" in line or "Queries per second" in line:
            print("    dnsperf:", line.strip(), file=sys.stderr)


def run_phase(name, server, port, action, sample_every=0.1):
    probe = Probe(port)
    before = server.rss_mb()
    peak, fds = before, server.fds()
    stop = threading.Event()
    worker = threading.Thread(target=action, args=(stop,), daemon=True)
    worker.start()
    while worker.is_alive():
        peak = max(peak, server.rss_mb())
        fds = max(fds, server.fds())
        worker.join(sample_every)
    time.sleep(0.5)
    probe.finish()
    after = server.rss_mb()
    row = (name, before, max(peak, after), after, fds, len(probe.latencies) + probe.lost, probe.lost, probe.p99_ms())
    print(f"  {name}: rss {before:.1f} -> peak {row[2]:.1f} -> {after:.1f} MB, fds {fds}, "
          f"probes {row[5]} lost {probe.lost} p99 {row[7]:.1f} ms", file=sys.stderr)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--quick", action="store_true", help="short phases (smoke)")
    a = ap.parse_args()
    print("warm-up pass:", file=sys.stderr)
    warm = run_pass(a, 0.2 if a.quick else 1.0)
    print("measured pass:", file=sys.stderr)
    rows = run_pass(a, 0.2 if a.quick else 1.0)
    report(warm, rows)


def run_pass(a, s):
    """Every phase once, each `s` times its full length."""
    server = Server(a.pid)
    port = a.port

    def plain(stop):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(1)
        end = time.monotonic() + 10 * s
        while time.monotonic() < end and not stop.is_set():
            for name in ("kubernetes.default.svc.cluster.local", "many.default.svc.cluster.local"):
                sock.sendto(query(name), ("127.0.0.1", port))
                try:
                    sock.recv(65535)
                except OSError:
                    pass

    newcomers = []
    phases = [
        ("plain queries", plain),
        ("idle-tcp 2,000", lambda stop: hold_idle_tcp(port, 2000, 15 * s, stop, newcomers)),
        ("slowloris 500", lambda stop: slowloris(port, 500, 15 * s, stop)),
        ("no-read-tcp 500x300", lambda stop: no_read_tcp(port, 500, 300, 20 * s, stop)),
        ("dead upstream 1k QPS", lambda stop: dead_upstream(port, 1000, 15 * s, stop)),
        ("dead upstream 8k QPS", lambda stop: dead_upstream(port, 8000, 15 * s, stop)),
        ("dnsperf mixed 60 s", lambda stop: dnsperf(port, int(60 * s), a.work)),
        ("cool-down", lambda stop: stop.wait(10 * s)),
    ]
    rows = [run_phase(name, server, port, action) for name, action in phases]
    answered = [t for t in newcomers if t is not None]
    p99 = 1000 * sorted(answered)[min(len(answered) - 1, int(len(answered) * 0.99))] if answered else 0.0
    NEWCOMERS.append((len(answered), len(newcomers), p99))
    return rows


# Per pass: (new TCP clients answered, asked, p99 ms) during idle-tcp.
NEWCOMERS = []


def report(warm, rows):
    print(f"Warm-up pass: RSS peak {max(r[2] for r in warm):.1f} MB, {warm[-1][3]:.1f} MB after; measured pass:")
    print()
    print("| phase | RSS before | RSS peak | RSS after | fds peak | probes | lost | probe p99 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, before, peak, after, fds, probes, lost, p99 in rows:
        print(f"| {name} | {before:.1f} MB | {peak:.1f} MB | {after:.1f} MB | {fds} | {probes} | {lost} | {p99:.1f} ms |")
    warm_rss = warm[-1][3]
    final_rss = rows[-1][3]
    growth = 100 * (final_rss - warm_rss) / warm_rss
    worst_p99 = max(r[7] for r in rows)
    checks = [
        (f"RSS growth after warm-up {growth:+.1f}% (< 5%)", growth < 5),
        (f"RSS peak {max(r[2] for r in warm + rows):.1f} MB (<= 100 MB)", max(r[2] for r in warm + rows) <= 100),
        (f"worst probe p99 {worst_p99:.1f} ms (<= 50 ms)", worst_p99 <= 50),
        (f"in-domain probes lost {sum(r[6] for r in rows)} (0)", sum(r[6] for r in rows) == 0),
    ]
    ok, asked, p99 = NEWCOMERS[-1]
    checks.append((f"new TCP clients beside 2,000 idle connections answered within 1 s: "
                   f"{ok}/{asked}, p99 {p99:.1f} ms (all)", asked > 0 and ok == asked))
    print()
    for text, ok in checks:
        print(f"- {'met' if ok else 'MISSED'}: {text}")
    sys.exit(0 if all(ok for _, ok in checks) else 1)


if __name__ == "__main__":
    main()
