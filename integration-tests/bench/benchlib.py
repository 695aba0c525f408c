"""Helpers the Python benchmarks share: ports, a real etcd, Knot DNS, DNS
queries from this process, dnsperf, and /proc readings."""

import base64
import calendar
import json
import os
import socket
import struct
import subprocess
import time
import urllib.request


def free_port():
    """A loopback TCP port free right now (the caller binds it soon)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(check, what, timeout=120.0, pause=0.02):
    """Calls `check` until it returns a true value (returned); raises after `timeout` s."""
    deadline = time.time() + timeout
    while True:
        try:
            got = check()
            if got:
                return got
        except OSError:
            pass
        if time.time() > deadline:
            raise RuntimeError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(pause)


def http_ok(url):
    with urllib.request.urlopen(url, timeout=2) as resp:
        return resp.status == 200


def start_etcd(work, name="bench", tuned=True):
    """A fresh single-member etcd (v2 and v3 APIs) on free loopback ports: (Popen, url).
    `tuned`: it takes transactions of up to 1024 operations and runs Go's GC as the
    pod's etcd (deploy/kubernetes: GOGC=200, GOMEMLIMIT=400MiB); otherwise etcd's
    defaults (128 operations)."""
    client, peer = free_port(), free_port()
    url, peer_url = "http://127.0.0.1:%d" % client, "http://127.0.0.1:%d" % peer
    log = open(os.path.join(work, "etcd-%s.log" % name), "a")
    env = dict(os.environ, ETCD_UNSUPPORTED_ARCH=os.uname().machine)
    if tuned:
        env.update(GOGC="200", GOMEMLIMIT="400MiB")
    proc = subprocess.Popen(
        ["etcd", "--name", name, "--data-dir", os.path.join(work, "etcd-" + name),
         "--enable-v2=true", "--quota-backend-bytes", str(8 << 30)]
        + (["--max-txn-ops", "1024"] if tuned else []) + [
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
         "--initial-cluster", "%s=%s" % (name, peer_url)], stdout=log, stderr=log, env=env)
    wait_until(lambda: http_ok(url + "/version"), "etcd")
    return proc, url


def etcd_put(url, puts):
    """Puts `(key, value)` pairs in one v3 transaction through etcd's JSON gateway."""
    b64 = lambda text: base64.b64encode(text.encode()).decode()
    body = {"success": [{"requestPut": {"key": b64(k), "value": b64(v)}} for k, v in puts]}
    req = urllib.request.Request(url + "/v3/kv/txn", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()


def start_knot(work, origin, zone_text):
    """knotd serving `zone_text` as `origin` on a free port: (Popen, port)."""
    port = free_port()
    rundir = os.path.join(work, "knot")
    os.makedirs(rundir, exist_ok=True)
    with open(os.path.join(work, "zone"), "w") as f:
        f.write(zone_text)
    conf = os.path.join(work, "knot.conf")
    with open(conf, "w") as f:
        f.write('server:\n    rundir: "%s"\n    listen: 127.0.0.1@%d\n'
                'database:\n    storage: "%s"\n'
                'zone:\n  - domain: %s\n    storage: "%s"\n    file: "zone"\n'
                'log:\n  - target: stderr\n    any: error\n' % (rundir, port, rundir, origin, work))
    log = open(os.path.join(work, "knot.log"), "a")
    return subprocess.Popen(["/usr/sbin/knotd", "-c", conf], stdout=log, stderr=log), port


def encode_query(name, qtype, qid):
    packet = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        packet += bytes([len(label)]) + label.encode()
    return packet + b"\x00" + struct.pack(">HH", qtype, 1)


def query(sock, name, qid, qtype=1):
    """One query over a connected UDP socket: (rcode, number of answers)."""
    sock.send(encode_query(name, qtype, qid))
    while True:
        reply = sock.recv(65535)
        if struct.unpack(">H", reply[:2])[0] == qid:
            return reply[3] & 0x0F, struct.unpack(">H", reply[6:8])[0]


def udp_socket(port, timeout=2.0):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", port))
    return sock


def answers(port, name, qtype=1):
    """Whether the server on `port` answers `name` with at least one record."""
    with udp_socket(port, 1.0) as sock:
        return query(sock, name, 7, qtype)[1] > 0


def dnsperf(port, query_file, seconds, clients=4):
    """dnsperf's queries per second on `port` asking the lines of `query_file`."""
    out = subprocess.run(
        ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", query_file, "-l", str(seconds),
         "-c", str(clients), "-q", "500"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Queries per second:" in line:
            return float(line.split(":")[1])
    raise RuntimeError("no QPS from dnsperf:\n" + out)


def log_time(line):
    """Unix seconds of a log line of ours (RFC 3339 UTC timestamp first)."""
    stamp = line.split(None, 1)[0].rstrip("Z")
    day, clock = stamp.split("T")
    whole, _, fraction = clock.partition(".")
    t = time.strptime(day + "T" + whole, "%Y-%m-%dT%H:%M:%S")
    return calendar.timegm(t) + float("0." + (fraction or "0"))


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def status_kb(pid, field):
    """A field of /proc/PID/status in kB (VmRSS, VmHWM); 0 when the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    """User + system CPU seconds of a running process."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
