"""The scale benchmark: the whole pipeline (API test server -> kube2sky ->
etcd v3 -> skydns, release build) at cluster sizes, with Knot DNS serving the
same names from a zone file in the same run.

Per size (see scale_cluster.SIZES):
  sync         kube2sky start -> both whole-subtree reconciles logged
               ("full sync of services/pods done") and skydns answering the
               last service, pod and headless name; kube2sky's CPU seconds;
  during sync  a Service POSTed as soon as skydns answers the first seeded
               service (the first chunk of the full sync is written) ->
               skydns answers it, and whether the full syncs were still
               running then (if not, the figure says nothing);
  restart      kube2sky stopped and started over the same etcd: seconds until
               both reconciles are logged, and etcd revisions it used (0: it
               wrote nothing);
  skydns restart  seconds from skydns's start until it answers (paged reads);
  propagation  POST of a new Service -> skydns answers it (a UDP query from
               this process every 0.5 ms), SAMPLES times, and where each
               sample's time went (the timing lines of kube2sky's and
               skydns's logs: watch event, round written, watch batch,
               snapshot swapped), beside etcd's own put of one key;
  memory       kube2sky's peak RSS (VmHWM) over sync and restart; skydns's RSS
               after everything;
  QPS          dnsperf (4 clients, SECONDS s, best of 2 rounds in alternating
               order) on skydns and Knot for the "direct" and "search path"
               mixes; then "direct" under churn (CHURN_ROUNDS rounds): skydns
               calm, while 200 records/s change in the zone, and with the
               same writes outside it; Knot calm and under the same writer.

With API=real (environment), kube2sky reads a real kube-apiserver (the
tests' control plane, `kube-control-plane`, over its own etcd 3.6) whose
etcd is seeded with the cluster before it starts; the figures add
kube-apiserver's CPU seconds over the sync and its peak RSS, and CoreDNS
(coredns_peer.py) reading the same API server: seconds from its start until
it answers (as skydns restart), propagation measured on both in the same
samples, QPS in the same rounds, its RSS, and kube-apiserver's CPU seconds
and RSS while 3 and then 10 more CoreDNS replicas start and answer.

Usage: scale.py BIN_DIR SIZES SAMPLES SECONDS OUT_DIR
etcd runs as in the pod's manifests (deploy/: transactions of up to 1024
operations, GOGC=200 with GOMEMLIMIT), kube2sky at its defaults.
Environment: KUBE2SKY_ARGS: extra kube2sky flags, e.g. --full-sync-chunk=2000;
ETCD=default: etcd at its own defaults (128 operations per transaction);
SYNC_ONLY=1: the initial sync and restart only (no table, no charts, scale.json
only), with each process's CPU over the sync.
Prints a markdown table; writes OUT_DIR/scale.json.
"""

import base64
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import benchlib as b
import coredns_peer
from scale_cluster import Cluster, mix_file, rng, service_ip

BIN, SIZES, SAMPLES, SECONDS, OUT = (sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]),
                                     int(sys.argv[4]), sys.argv[5])
WORK = tempfile.mkdtemp(prefix="scale-")
PROCS = []
REAL = os.environ.get("API", "test") == "real"
TIMING_LOG = "info,kube2sky::timing=debug,skydns::timing=debug"


def spawn(name, args):
    log = open(os.path.join(WORK, name + ".log"), "w")
    # The timing targets log each step of a change (the propagation breakdown).
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, RUST_LOG=TIMING_LOG))
    proc.log = log.name
    PROCS.append(proc)
    return proc


def stop(proc, sig=signal.SIGTERM):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def logged(proc, text):
    with open(proc.log) as f:
        return text in f.read()


class Pipeline:
    """etcd, the seeded API server, skydns and kube2sky for one cluster."""

    def __init__(self, cluster):
        self.cluster = cluster
        seed = os.path.join(WORK, "seed.json")
        cluster.write_seed(seed, slices=REAL)
        self.etcd, self.etcd_url = b.start_etcd(WORK, "scale-" + cluster.size,
                                                tuned=os.environ.get("ETCD") != "default")
        PROCS.append(self.etcd)
        if REAL:
            self.start_real_apiserver(seed)
        else:
            api_port = b.free_port()
            self.api_url = "http://127.0.0.1:%d" % api_port
            self.api = spawn("api", [os.path.join(BIN, "kube-api-test-server"), "--listen",
                                     "127.0.0.1:%d" % api_port, "--seed", seed,
                                     "--service-cidr", "10.0.0.0/8"])
            b.wait_until(lambda: b.http_ok(self.api_url + "/version"), "the API server", 600)
            self.kube_args, self.headers, self.tls = ["--kube-master-url", self.api_url], {}, None
        self.dns_port = b.free_port()
        self.skydns = self.start_skydns()
        self.kube2sky = None
        self.coredns, self.coredns_port = None, None
        # name -> (wall clock of the POST, of skydns's first answer)
        self.posted = {}

    def start_real_apiserver(self, seed):
        """kube-control-plane with the cluster written into its etcd: the
        API server's URL, an admin's token and its CA, and its pid."""
        kubeconfig = os.path.join(WORK, "kubeconfig")
        self.api = spawn("api", [os.path.join(BIN, "kube-control-plane"), "--kubeconfig", kubeconfig,
                                 "--etcd-seed", seed,
                                 "--apiserver-flag=--service-cluster-ip-range=10.0.0.0/8"])
        b.wait_until(lambda: logged(self.api, "\nready\n") or self.api.poll() is not None,
                     "the real API server", 900)
        if self.api.poll() is not None:
            with open(self.api.log) as f:
                raise RuntimeError("kube-control-plane exited:\n" + f.read()[-3000:])
        with open(self.api.log) as f:
            self.apiserver_pid = int(next(l for l in f if l.startswith("kube-apiserver pid")).split()[-1])
        with open(kubeconfig) as f:
            config = json.load(f)
        self.api_url = config["clusters"][0]["cluster"]["server"]
        ca = config["clusters"][0]["cluster"]["certificate-authority"]
        self.headers = {"Authorization": "Bearer " + config["users"][0]["user"]["token"]}
        self.tls = ssl.create_default_context(cafile=ca)
        self.kube_args = ["--kubecfg-file", kubeconfig]
        self.kubeconfig = kubeconfig

    def start_skydns(self):
        return spawn("skydns", [os.path.join(BIN, "skydns"), "-machines", self.etcd_url, "-etcd3",
                                "-addr", "127.0.0.1:%d" % self.dns_port, "-domain", "cluster.local.",
                                "-no-rec", "-ns-rotate=false"])

    def start_kube2sky(self):
        self.kube2sky = spawn("kube2sky", [
            os.path.join(BIN, "kube2sky"), "--etcd-server", self.etcd_url, "--etcd-api", "v3",
            "--healthz-port", str(b.free_port())] + self.kube_args
            + os.environ.get("KUBE2SKY_ARGS", "").split())
        return self.kube2sky

    def wait_full_syncs(self, timeout):
        for what in ("services", "pods"):
            b.wait_until(lambda: logged(self.kube2sky, "full sync of %s done" % what) or
                         self.kube2sky.poll() is not None, "kube2sky's full sync of " + what, timeout)
            if self.kube2sky.poll() is not None:
                raise RuntimeError("kube2sky exited; see " + self.kube2sky.log)

    def wait_answers(self, timeout):
        for name in self.cluster.last_names():
            b.wait_until(lambda: b.answers(self.dns_port, name), "skydns to answer " + name, timeout)

    def revision(self):
        req = urllib.request.Request(self.etcd_url + "/v3/kv/range",
                                     json.dumps({"key": base64.b64encode(b"/").decode()}).encode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(json.load(resp)["header"]["revision"])

def post_service(p, name, k):
    """POSTs Service `name` in ns0 with the k-th spare cluster IP; returns its DNS name."""
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": service_ip(900000 + k),
                     "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}}
    req = urllib.request.Request(p.api_url + "/api/v1/namespaces/ns0/services",
                                 json.dumps(body).encode(),
                                 dict(p.headers, **{"Content-Type": "application/json"}))
    urllib.request.urlopen(req, timeout=10, context=p.tls).read()
    return "%s.ns0.svc.cluster.local" % name


def answered_after(p, name, k):
    """Milliseconds from the POST of Service `name` until skydns answers it
    (and CoreDNS, when it runs: a list, skydns's first)."""
    ports = [p.dns_port] + ([p.coredns_port] if p.coredns else [])
    socks = [b.udp_socket(port) for port in ports]
    try:
        start, wall = time.perf_counter(), time.time()
        qname = post_service(p, name, k)
        deadline = time.time() + 60
        took = [None] * len(ports)
        while None in took:
            for i, sock in enumerate(socks):
                if took[i] is None and b.query(sock, qname, k % 60000 + 1)[1] > 0:
                    took[i] = (time.perf_counter() - start) * 1000
                    if i == 0:
                        p.posted[name] = (wall, time.time())
            if time.time() > deadline:
                raise RuntimeError(qname + " never answered")
            time.sleep(0.0005)
        return took if p.coredns else took[0]
    finally:
        for sock in socks:
            sock.close()


def measure_sync(p, r):
    api_cpu = b.cpu_seconds(p.apiserver_pid) if REAL else 0
    # What the rest of the pipeline spends beside kube2sky (the cores are shared).
    others = {"etcd": p.etcd.pid, "skydns": p.skydns.pid}
    if not REAL:
        others["api"] = p.api.pid
    others_cpu = {who: b.cpu_seconds(pid) for who, pid in others.items()}
    start = time.time()
    k2s = p.start_kube2sky()
    first = p.cluster.service_name(0)
    b.wait_until(lambda: b.answers(p.dns_port, first), "skydns to answer " + first, 1800, 0.001)
    r["during_sync_ms"] = answered_after(p, "during", 99999)
    r["during_sync_running"] = not logged(k2s, "full sync of pods done")
    p.wait_full_syncs(1800)
    p.wait_answers(300)
    r["sync_s"] = time.time() - start
    r["kube2sky_sync_cpu_s"] = b.cpu_seconds(k2s.pid)
    for who, pid in others.items():
        r[who + "_sync_cpu_s"] = b.cpu_seconds(pid) - others_cpu[who]
    if REAL:
        r["apiserver_sync_cpu_s"] = b.cpu_seconds(p.apiserver_pid) - api_cpu
        r["apiserver_peak_mb"] = b.status_kb(p.apiserver_pid, "VmHWM") / 1024
    r["kube2sky_peak_mb"] = b.status_kb(k2s.pid, "VmHWM") / 1024
    r["keys"] = count_keys(p)
    r["txn_refusals"], r["txn_refusals_ms"] = refusals(k2s)

    before = p.revision()
    stop(k2s)
    start = time.time()
    k2s = p.start_kube2sky()
    p.wait_full_syncs(1800)
    r["restart_s"] = time.time() - start
    r["restart_revisions"] = p.revision() - before
    r["kube2sky_peak_mb"] = max(r["kube2sky_peak_mb"], b.status_kb(k2s.pid, "VmHWM") / 1024)


def refusals(proc):
    """How many transactions etcd refused as too large: the read-only ones
    kube2sky probes its limit with before writing (one line naming each
    size), and any write refused later; and the milliseconds from
    kube2sky's start to the last."""
    with open(proc.log) as f:
        lines = f.read().splitlines()
    probed = [l for l in lines if "etcd refused read-only transactions of" in l]
    writes = [l for l in lines if "etcd refused a transaction of up to" in l]
    count = sum(len(l.split("transactions of ")[1].split(" operations")[0].split(",")) for l in probed)
    stamps = [b.log_time(l) for l in probed + writes]
    return count + len(writes), (max(stamps) - b.log_time(lines[0])) * 1000 if stamps else 0.0


def count_keys(p):
    req = urllib.request.Request(p.etcd_url + "/v3/kv/range", json.dumps({
        "key": base64.b64encode(b"/skydns/").decode(),
        "range_end": base64.b64encode(b"/skydns0").decode(), "count_only": True}).encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(json.load(resp).get("count", 0))


def measure_skydns_restart(p, r):
    stop(p.skydns)
    start = time.time()
    p.skydns = p.start_skydns()
    p.wait_answers(300)
    r["skydns_restart_s"] = time.time() - start


def measure_propagation(p, r):
    delays = [answered_after(p, "prop%d" % k, k) for k in range(SAMPLES)]
    if p.coredns:
        delays, theirs = [d[0] for d in delays], [d[1] for d in delays]
        r["coredns_propagation_p50_ms"] = b.percentile(theirs, 50)
        r["coredns_propagation_p99_ms"] = b.percentile(theirs, 99)
    r["propagation_p50_ms"] = b.percentile(delays, 50)
    r["propagation_p99_ms"] = b.percentile(delays, 99)
    r["propagation_steps"] = breakdown(p, ["prop%d" % k for k in range(SAMPLES)])
    r["etcd_put_p50_ms"], r["etcd_put_p99_ms"] = etcd_put_latency(p, SAMPLES)


STEPS = ("API -> kube2sky's watch", "-> etcd acknowledged the round", "-> skydns's watch",
         "-> snapshot swapped", "-> answered")


def breakdown(p, names):
    """Where each sample's propagation time went, from the timing lines of
    kube2sky's and skydns's logs (same machine, same clock): the POST, the
    watch event kube2sky logs for the Service, the round it was written in
    acknowledged by etcd (at revision R), skydns's watch batch at R or
    later, the snapshot holding it swapped, and the prober's first answer.
    {step: [p50, p99] in ms}, and the samples it could not follow."""
    def lines(proc, text):
        with open(proc.log) as f:
            return [l for l in f if text in l]
    def revision(line):
        return int(line.split("revision=")[1].split()[0])
    events = {l.split(" name=")[1].split()[0]: b.log_time(l)
              for l in lines(p.kube2sky, "watch event") if "kind=Services" in l}
    rounds = [(b.log_time(l), revision(l)) for l in lines(p.kube2sky, "round written")]
    batches = [(b.log_time(l), revision(l)) for l in lines(p.skydns, "watch batch received")]
    swaps = [(b.log_time(l), revision(l)) for l in lines(p.skydns, "snapshot swapped")]
    steps = [[] for _ in STEPS]
    lost = 0
    for name in names:
        try:
            posted, answered = p.posted[name]
            seen = events[name]
            written, at = next((t, rev) for t, rev in rounds if t >= seen)
            received = next(t for t, rev in batches if rev >= at)
            swapped = next(t for t, rev in swaps if rev >= at)
        except (KeyError, StopIteration):
            lost += 1
            continue
        marks = [posted, seen, written, received, swapped, answered]
        for i in range(len(STEPS)):
            steps[i].append((marks[i + 1] - marks[i]) * 1000)
    return {"steps": {step: [b.percentile(v, 50), b.percentile(v, 99)] if v else None
                      for step, v in zip(STEPS, steps)}, "unfollowed": lost}


def etcd_put_latency(p, samples):
    """etcd's own floor: milliseconds per put of one small key through its
    JSON gateway on a kept connection, one at a time (p50, p99)."""
    host, port = p.etcd_url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    took = []
    for k in range(samples):
        body = json.dumps({"key": base64.b64encode(b"/floor/%d" % k).decode(),
                           "value": base64.b64encode(b'{"host":"10.0.0.1"}').decode()})
        start = time.perf_counter()
        conn.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
        took.append((time.perf_counter() - start) * 1000)
    conn.close()
    return b.percentile(took, 50), b.percentile(took, 99)


def measure_coredns_start(p, r):
    """CoreDNS started against the same API server: seconds until it
    answers the last service, pod and headless name (skydns restart's)."""
    start = time.time()
    p.coredns, p.coredns_port = coredns_peer.start(spawn, WORK, p.kubeconfig, coredns_peer.binary())
    coredns_peer.wait_answers(p.coredns_port, p.cluster.last_names(), p.coredns, 900)
    r["coredns_start_s"] = time.time() - start


def measure_replicas(p, r):
    """kube-apiserver's CPU seconds and RSS while more CoreDNS replicas
    start and answer: 3, then 10 (each lists and watches on its own; the
    skydns replicas of shared-etcd never reach the API server)."""
    for n in (3, 10):
        cpu = b.cpu_seconds(p.apiserver_pid)
        replicas = [coredns_peer.start(spawn, WORK, p.kubeconfig, coredns_peer.binary(),
                                       "coredns-%d-%d" % (n, i)) for i in range(n)]
        for proc, port in replicas:
            coredns_peer.wait_answers(port, p.cluster.last_names(), proc, 900)
        r["apiserver_cpu_coredns_%d_s" % n] = b.cpu_seconds(p.apiserver_pid) - cpu
        r["apiserver_rss_coredns_%d_mb" % n] = b.status_kb(p.apiserver_pid, "VmRSS") / 1024
        for proc, _ in replicas:
            stop(proc)
            PROCS.remove(proc)


def churning(p, prefix, run):
    """`run()` while 20 records under `prefix` change every 100 ms (200/s)."""
    done = threading.Event()

    def churn():
        j = 0
        while not done.is_set():
            t = time.time()
            b.etcd_put(p.etcd_url, [(prefix + "c%d/%x" % ((j + k) % 1000, j + k),
                            '{"host":"%s","priority":10,"weight":10,"ttl":30,"targetstrip":0}'
                            % service_ip(800000 + (j + k) % 1000)) for k in range(20)])
            j += 20
            time.sleep(max(0.0, 0.1 - (time.time() - t)))

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        return run()
    finally:
        done.set()
        thread.join()


def measure_qps(p, knot_port, r):
    direct = mix_file(os.path.join(WORK, "direct"), p.cluster.direct_mix(5000, rng()))
    search = mix_file(os.path.join(WORK, "search"), p.cluster.search_mix(5000, rng()))
    servers = {"skydns": p.dns_port, "knot": knot_port}
    if p.coredns:
        servers["coredns"] = p.coredns_port
    for mix, path in (("direct", direct), ("search", search)):
        best = dict.fromkeys(servers, 0.0)
        for order in (list(servers), list(reversed(list(servers)))):
            for who in order:
                best[who] = max(best[who], b.dnsperf(servers[who], path, SECONDS))
        for who, qps in best.items():
            r["qps_%s_%s" % (mix, who)] = qps
    measure_churn(p, knot_port, direct, r)


def measure_churn(p, knot_port, direct, r):
    """QPS on the direct mix, unchanged names, while 200 records/s change
    in the zone (etcd and the writer share the cores; skydns reads every
    change) against calm, for skydns and for Knot (which reads none, so
    its ratio is what etcd and the writer alone cost); the same writes
    outside the zone for skydns too. CHURN_ROUNDS rounds (default 3), the
    order alternating, the best of each."""
    zone, outside = "/skydns/local/cluster/svc/churn/", "/elsewhere/"
    runs = {
        "direct_calm": lambda: b.dnsperf(p.dns_port, direct, SECONDS),
        "direct_churn": lambda: churning(p, zone, lambda: b.dnsperf(p.dns_port, direct, SECONDS)),
        "direct_elsewhere": lambda: churning(p, outside, lambda: b.dnsperf(p.dns_port, direct, SECONDS)),
        "knot_calm": lambda: b.dnsperf(knot_port, direct, SECONDS),
        "knot_churn": lambda: churning(p, zone, lambda: b.dnsperf(knot_port, direct, SECONDS)),
    }
    best = dict.fromkeys(runs, 0.0)
    for n in range(int(os.environ.get("CHURN_ROUNDS", "3"))):
        for what in (list(runs) if n % 2 == 0 else list(reversed(list(runs)))):
            best[what] = max(best[what], runs[what]())
    for what, qps in best.items():
        r["qps_" + what] = qps


def run(size):
    cluster = Cluster(size)
    r = {"size": size, "services": cluster.services, "ports": cluster.ports,
         "pods": cluster.pods, "headless": cluster.headless}
    knot = None
    try:
        p = Pipeline(cluster)
        measure_sync(p, r)
        if os.environ.get("SYNC_ONLY"):
            return r
        measure_skydns_restart(p, r)
        if REAL:
            measure_coredns_start(p, r)
        measure_propagation(p, r)
        knot, knot_port = b.start_knot(WORK, "cluster.local", cluster.zone())
        PROCS.append(knot)
        for name in cluster.last_names():
            b.wait_until(lambda: b.answers(knot_port, name), "Knot to answer " + name, 300)
        measure_qps(p, knot_port, r)
        r["skydns_rss_mb"] = b.status_kb(p.skydns.pid, "VmRSS") / 1024
        if REAL:
            r["coredns_rss_mb"] = b.status_kb(p.coredns.pid, "VmRSS") / 1024
            measure_replicas(p, r)
    finally:
        for proc in reversed(PROCS):
            stop(proc)
        PROCS.clear()
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
    return r


ROW = ("| {size} | {services:,} × {ports} | {pods:,} | {headless:,} | {keys:,} | {sync_s:.1f} s "
       "| {during_sync_ms:.0f} ms{during_mark} "
       "| {kube2sky_sync_cpu_s:.1f} s | {restart_s:.1f} s | {restart_revisions} | {skydns_restart_s:.1f} s "
       "| {propagation_p50_ms:.1f} / {propagation_p99_ms:.1f} ms | {kube2sky_peak_mb:.0f} MB "
       "| {skydns_rss_mb:.0f} MB | {direct_ratio:.2f} | {search_ratio:.2f} | {churn_ratio:.2f} "
       "| {knot_churn_ratio:.2f} |")


def table(results):
    print("| size | services × ports | pods | headless | etcd keys | initial sync "
          "| a change during it | kube2sky CPU "
          "| kube2sky restart | revisions written on restart | skydns restart | propagation p50 / p99 "
          "| kube2sky peak RSS | skydns RSS | direct QPS / Knot | search-path QPS / Knot "
          "| QPS under churn / calm | Knot's, same writer |")
    print("|" + "---|" * 18)
    for r in results:
        print(ROW.format(during_mark="" if r["during_sync_running"] else " (after the sync)",direct_ratio=r["qps_direct_skydns"] / r["qps_direct_knot"],
                         search_ratio=r["qps_search_skydns"] / r["qps_search_knot"],
                         churn_ratio=r["qps_direct_churn"] / r["qps_direct_calm"],
                         knot_churn_ratio=r["qps_knot_churn"] / r["qps_knot_calm"], **r))
    print()
    print("| size | skydns direct | Knot direct | skydns search path | Knot search path "
          "| skydns calm | skydns, 200 writes/s outside the zone | skydns, 200 changes/s in the zone "
          "| Knot calm | Knot, the same writer |")
    print("|" + "---|" * 10)
    for r in results:
        print("| {size} | {qps_direct_skydns:,.0f} | {qps_direct_knot:,.0f} | {qps_search_skydns:,.0f} "
              "| {qps_search_knot:,.0f} | {qps_direct_calm:,.0f} | {qps_direct_elsewhere:,.0f} "
              "| {qps_direct_churn:,.0f} | {qps_knot_calm:,.0f} | {qps_knot_churn:,.0f} |".format(**r))
    steps_table(results)
    if REAL:
        print()
        print("| size | kube-apiserver CPU over the sync | kube-apiserver peak RSS |")
        print("|---|---|---|")
        for r in results:
            print("| {size} | {apiserver_sync_cpu_s:.1f} s | {apiserver_peak_mb:.0f} MB |".format(**r))
        coredns_tables(results)


def steps_table(results):
    """The propagation breakdown, p50 / p99 of each step, and etcd's floor."""
    print()
    print("| size | " + " | ".join(STEPS) + " | total | etcd put alone |")
    print("|" + "---|" * (len(STEPS) + 3))
    for r in results:
        steps = r["propagation_steps"]["steps"]
        cells = ["%.1f / %.1f" % tuple(steps[s]) if steps[s] else "?" for s in STEPS]
        print("| %s | %s | %.1f / %.1f | %.1f / %.1f |" % (
            r["size"], " | ".join(cells), r["propagation_p50_ms"], r["propagation_p99_ms"],
            r["etcd_put_p50_ms"], r["etcd_put_p99_ms"]))
    print("(ms, p50 / p99 of each step over the samples; a step's p99s do not add up to the total's)")


def coredns_tables(results):
    """skydns beside CoreDNS, and the ratio (ours / theirs)."""
    print()
    print("| size | serving every name after a start (skydns / CoreDNS) | propagation p50 "
          "| propagation p99 | RSS per replica | direct QPS | search-path QPS |")
    print("|" + "---|" * 7)
    def pair(ours, theirs, unit, digits):
        return "{:,.{d}f} / {:,.{d}f}{} ({:.2f}×)".format(ours, theirs, unit, ours / theirs, d=digits)

    for r in results:
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            r["size"],
            pair(r["skydns_restart_s"], r["coredns_start_s"], " s", 2),
            pair(r["propagation_p50_ms"], r["coredns_propagation_p50_ms"], " ms", 1),
            pair(r["propagation_p99_ms"], r["coredns_propagation_p99_ms"], " ms", 1),
            pair(r["skydns_rss_mb"], r["coredns_rss_mb"], " MB", 0),
            pair(r["qps_direct_skydns"], r["qps_direct_coredns"], "", 0),
            pair(r["qps_search_skydns"], r["qps_search_coredns"], "", 0)))
    print()
    print("| size | kube-apiserver CPU, 3 / 10 CoreDNS replicas starting | kube-apiserver RSS after |")
    print("|---|---|---|")
    for r in results:
        print("| {size} | {apiserver_cpu_coredns_3_s:.1f} / {apiserver_cpu_coredns_10_s:.1f} s "
              "| {apiserver_rss_coredns_3_mb:.0f} / {apiserver_rss_coredns_10_mb:.0f} MB |".format(**r))


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(OUT, exist_ok=True)
    results = []
    try:
        for size in SIZES:
            print("== %s" % size, file=sys.stderr, flush=True)
            results.append(run(size))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
            with open(os.path.join(OUT, "scale.json"), "w") as f:
                json.dump({"date": time.strftime("%Y-%m-%d"), "machine": machine(),
                           "api": "kube-apiserver" if REAL else "API test server",
                           "results": results}, f, indent=1)
    finally:
        # SIGTERM first: kube-control-plane stops the processes it started
        # (in groups of their own) only when it can clean up.
        for proc in reversed(PROCS):
            stop(proc)
        shutil.rmtree(WORK, ignore_errors=True)
    if not os.environ.get("SYNC_ONLY"):
        table(results)


def machine():
    with open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    return "%d × %s, %.0f GiB" % (os.cpu_count(), model,
                                  os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)


main()
