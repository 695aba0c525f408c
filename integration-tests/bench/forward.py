#!/usr/bin/env python3
"""The measuring half of forward.sh (which starts the servers): forwarded
names through skydns and Unbound while the first upstream is dead.

  forward.py dead PORT
      The dead upstream: binds UDP and TCP (listening, never accepting) on
      127.0.0.1:PORT and never answers, so each query sent there costs the
      asker its whole timeout. Runs until killed.
  forward.py measure --servers LABEL=PORT=CONFIG ... [options]
      first   each server in turn: the first 10 queries it ever gets (n0..n9,
              one after the other, 5 s timeout each): the ones that discover
              the dead upstream; then one pass over all the names, 500 a
              second (fills the caches of the configurations that have one);
      QPS     dnsperf over the names for --seconds, --clients clients, 500
              queries outstanding (closed loop: the server's throughput),
              --rounds rounds, order alternating, the best round counts;
      latency each server in turn: an open-loop client at --rate queries/s
              for --seconds, each query's time to its answer (dnsperf -v has
              per-query latencies too, but at saturation that is queueing).
              No answer in 5 s = lost; an answer but NOERROR with an A =
              failed (e.g. skydns's SERVFAIL past 1000 pending forwards).
              Both count as 5000 ms in the percentiles.
      Prints the table and the goal line, and writes --json.
"""

import argparse
import json
import os
import random
import re
import socket
import statistics
import struct
import subprocess
import threading
import time

from benchlib import encode_query, percentile, query, udp_socket

TIMEOUT = 5.0


def dead(port):
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", port))
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("127.0.0.1", port))
    tcp.listen(4096)  # the kernel completes handshakes; nobody ever reads
    while True:
        time.sleep(3600)


def names(count):
    return ["n%d.example.test" % i for i in range(count)]


def first_queries(port, count=10):
    """Latencies (ms, None when lost) of `count` queries sent one at a time."""
    out = []
    with udp_socket(port, TIMEOUT) as sock:
        for i in range(count):
            start = time.monotonic()
            try:
                query(sock, "n%d.example.test" % i, 1000 + i)
                out.append((time.monotonic() - start) * 1000)
            except socket.timeout:
                out.append(None)
    return out


def open_loop(port, qnames, rate, seconds):
    """Sends `rate` queries a second for `seconds` (cycling over `qnames`)
    without waiting for answers; returns (latencies in ms of the answered,
    number sent, number lost, number failed, rcodes seen)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.connect(("127.0.0.1", port))
    total = int(rate * seconds)
    pending, lock = {}, threading.Lock()  # id -> send time
    latencies, rcodes, failed = [], {}, [0]
    done = threading.Event()

    def receive():
        sock.settimeout(0.2)
        while not done.is_set():
            try:
                reply = sock.recv(65535)
            except socket.timeout:
                continue
            now = time.monotonic()
            qid = struct.unpack(">H", reply[:2])[0]
            with lock:
                sent = pending.pop(qid, None)
            if sent is not None and now - sent <= TIMEOUT:
                rcode = reply[3] & 0x0F
                rcodes[rcode] = rcodes.get(rcode, 0) + 1
                if rcode == 0 and struct.unpack(">H", reply[6:8])[0] > 0:
                    latencies.append((now - sent) * 1000)
                else:
                    failed[0] += 1

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    packets = [encode_query(n, 1, 0)[2:] for n in qnames]
    start = time.monotonic()
    for i in range(total):
        due = start + i / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        qid = i & 0xFFFF  # at most rate * 5 s in flight: ids never collide
        with lock:
            pending[qid] = time.monotonic()
        sock.send(struct.pack(">H", qid) + packets[i % len(packets)])
    # Whatever has not come back 5 s after the last send is lost.
    time.sleep(TIMEOUT + 0.1)
    done.set()
    receiver.join()
    sock.close()
    return latencies, total, total - len(latencies) - failed[0], failed[0], rcodes


def dnsperf(port, query_file, seconds, clients):
    """dnsperf's queries per second. (Its "lost" in a timed run are mostly the
    queries in flight when time is up, so they are not reported.)"""
    out = subprocess.run(
        ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", query_file, "-l", str(seconds),
         "-c", str(clients), "-q", "500", "-t", str(int(TIMEOUT))],
        capture_output=True, text=True).stdout
    qps = re.search(r"Queries per second:\s*([\d.]+)", out)
    if not qps:
        raise RuntimeError("no QPS from dnsperf:\n" + out)
    return float(qps.group(1))


def warm_up(row, args):
    """The first 10 queries of the fresh server, then a pass over all names."""
    label, port = row["label"], row["port"]
    first = first_queries(port)
    row["first10_ms"] = first
    row["first10_total_s"] = sum(TIMEOUT * 1000 if v is None else v for v in first) / 1000
    print("  %s: first 10 queries (ms): %s" % (
        label, " ".join("lost" if v is None else "%.0f" % v for v in first)), flush=True)
    t0 = time.monotonic()
    warm, _, lost, failed, rcodes = open_loop(port, names(args.names), 500, args.names / 500)
    row["warm"] = {"lost": lost, "failed": failed, "p99_ms": percentile(warm or [5e3], 99),
                   "s": time.monotonic() - t0}
    print("  %s: warm-up pass over %d names: %d lost, %d failed, p99 %.1f ms" % (
        label, args.names, lost, failed, row["warm"]["p99_ms"]), flush=True)
    if not warm:
        raise SystemExit("%s answered none of the names (rcodes %s): misconfigured?" % (
            label, rcodes))


def latency(row, args, n):
    """Round n of p50/p99 at a fixed rate; lost and failed queries count as
    5000 ms. The row keeps every round and, as its figures, the median
    round's p50 and p99 (the rounds of a 2-core machine differ by tens of
    microseconds) and the sums of lost and failed."""
    shuffled = names(args.names)
    random.Random(1 + n).shuffle(shuffled)
    lat, sent, lost, failed, rcodes = open_loop(row["port"], shuffled, args.rate, args.seconds)
    counted = lat + [TIMEOUT * 1000] * (lost + failed)
    this = dict(sent=sent, lost=lost, failed=failed, p50_ms=percentile(counted, 50),
                p99_ms=percentile(counted, 99), max_ms=max(counted))
    rounds = row.setdefault("latency_rounds", [])
    rounds.append(this)
    seen = row.setdefault("rcodes", {})
    for k, v in rcodes.items():
        seen[str(k)] = seen.get(str(k), 0) + v
    row.update(sent=sum(r["sent"] for r in rounds), lost=sum(r["lost"] for r in rounds),
               failed=sum(r["failed"] for r in rounds), max_ms=max(r["max_ms"] for r in rounds),
               p50_ms=statistics.median(r["p50_ms"] for r in rounds),
               p99_ms=statistics.median(r["p99_ms"] for r in rounds))
    print("  round %d: %s: %d sent at %d/s, %d lost, %d failed, p50 %.3f ms, p99 %.3f ms" % (
        n + 1, row["label"], sent, args.rate, lost, failed, this["p50_ms"], this["p99_ms"]),
        flush=True)


def measure(rows, args, query_file):
    print("==> first queries and warm-up, each server in turn", flush=True)
    for row in rows:
        warm_up(row, args)
    print("==> QPS: dnsperf, %d rounds of %d s, order alternating, best round counts" % (
        args.rounds, args.seconds), flush=True)
    for n in range(args.rounds):
        for row in (rows if n % 2 == 0 else rows[::-1]):
            qps = dnsperf(row["port"], query_file, args.seconds, args.clients)
            print("  round %d: %s %.0f qps" % (n + 1, row["label"], qps), flush=True)
            row["qps"] = max(qps, row.get("qps", 0))
    print("==> latency: open loop at %d/s for %d s, %d rounds in alternating order, median counts" % (
        args.rate, args.seconds, args.latency_rounds), flush=True)
    for n in range(args.latency_rounds):
        for row in (rows if n % 2 == 0 else rows[::-1]):
            latency(row, args, n)


def machine():
    with open("/proc/cpuinfo") as f:
        model = [l.split(":", 1)[1].strip() for l in f if l.startswith("model name")][:1]
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / (1 << 20)
    return {"cores": os.cpu_count(), "cpu": (model or ["?"])[0], "memory_gib": round(mem)}


def report(rows, skipped, args):
    anchor = next((r for r in rows if r["server"] == "unbound"), None)
    print("\n%-20s %-42s %8s %8s %8s %5s %6s %7s %7s" % (
        "server", "config", "QPS", "p50 ms", "p99 ms", "lost", "failed", "QPS/unb", "p99/unb"))
    for r in rows:
        ratio_q = ratio_p = "-"
        if anchor and r is not anchor:
            r["qps_ratio_unbound"] = r["qps"] / anchor["qps"]
            r["p99_ratio_unbound"] = r["p99_ms"] / anchor["p99_ms"]
            ratio_q, ratio_p = "%.2f" % r["qps_ratio_unbound"], "%.2f" % r["p99_ratio_unbound"]
        print("%-20s %-42s %8.0f %8.3f %8.3f %5d %6d %7s %7s" % (
            r["label"], r["config"], r["qps"], r["p50_ms"], r["p99_ms"], r["lost"], r["failed"],
            ratio_q, ratio_p))
    for label, why in skipped:
        print("%-20s skipped: %s" % (label, why))
    print("(QPS: dnsperf, best round. p50/p99: median round; lost, failed: summed; open loop at %d/s; lost = no\n"
          " answer in 5 s, failed = an answer other than NOERROR with an A; both count as\n"
          " 5000 ms in p50/p99. Ratios skydns/Unbound: QPS higher, p99 lower is better.)" % args.rate)
    print("\n(first 10 queries of a fresh server, one at a time, total s: %s)" % ", ".join(
        "%s %.1f" % (r["label"], r["first10_total_s"]) for r in rows))
    print("\ngoal: skydns p99 with a dead upstream <= Unbound's p99, both caching (after+rcache;\n"
          "      'after' asks the upstream for every query, so it is shown but not held to it)")
    goals = {}
    for r in rows:
        if r["label"] == "skydns after+rcache" and anchor:
            met = r["p99_ms"] <= anchor["p99_ms"]
            goals[r["label"]] = met
            print("  %-20s p99 %.2f ms vs Unbound %.2f ms: %s" % (
                r["label"], r["p99_ms"], anchor["p99_ms"], "met" if met else "NOT met"))
    if not goals:
        print("  not measured: no skydns (after) row (see the skipped rows)")
    result = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine(),
        "setup": {"names": args.names, "seconds": args.seconds, "clients": args.clients,
                  "rounds": args.rounds, "rate": args.rate, "timeout_s": TIMEOUT, "rtimeout": "2s",
                  "upstreams": "dead first, then Knot (live)"},
        "results": rows, "skipped": [{"label": l, "why": w} for l, w in skipped],
        "goal": "skydns (after+rcache) p99 with a dead upstream <= Unbound's p99", "goal_met": goals,
    }
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print("\nwrote %s" % args.json)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("dead").add_argument("port", type=int)
    m = sub.add_parser("measure")
    m.add_argument("--servers", nargs="+", required=True, help="LABEL=PORT=CONFIG")
    m.add_argument("--skipped", nargs="*", default=[], help="LABEL=WHY")
    for opt, default in (("names", 1000), ("seconds", 10), ("clients", 4), ("rate", 1000),
                         ("rounds", 2), ("latency-rounds", 3)):
        m.add_argument("--" + opt, type=int, default=default)
    m.add_argument("--work", required=True)
    m.add_argument("--json", required=True)
    args = p.parse_args()
    if args.cmd == "dead":
        dead(args.port)
    query_file = os.path.join(args.work, "queries")
    with open(query_file, "w") as f:
        shuffled = names(args.names)
        random.Random(0).shuffle(shuffled)
        f.writelines("%s A\n" % n for n in shuffled)
    rows = [dict(zip(("label", "port", "config"), spec.split("=", 2))) for spec in args.servers]
    for row in rows:
        row.update(server=row["label"].split(" ")[0], port=int(row["port"]))
    measure(rows, args, query_file)
    report(rows, [tuple(s.split("=", 1)) for s in args.skipped], args)


if __name__ == "__main__":
    main()
