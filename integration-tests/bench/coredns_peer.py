"""CoreDNS in the scale benchmark (API=real): the binary scripts/kube-tools.sh
builds from tools/coredns, run with kubeadm's Corefile against the same
kube-apiserver kube2sky reads, and measured beside skydns.

kubeadm's Corefile, minus what needs a node or an upstream: forward, loop
and reload (the benchmark's names are all in cluster.local). health, ready
and prometheus listen on free ports, and cache 30 and `pods insecure` stay,
as clusters run them.
"""

import os

import benchlib as b

COREFILE = """.:{dns} {{
    errors
    health 127.0.0.1:{health} {{
        lameduck 5s
    }}
    ready 127.0.0.1:{ready}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    prometheus 127.0.0.1:{prometheus}
    cache 30
    loadbalance
}}
"""


def binary():
    """CoreDNS beside the control plane's binaries: scale.sh puts the
    directory scripts/kube-tools.sh printed in KUBE_TOOLS_DIR."""
    return os.path.join(os.environ["KUBE_TOOLS_DIR"], "coredns")


def start(spawn, work, kubeconfig, coredns, name="coredns"):
    """A CoreDNS replica on free ports: (process, DNS port)."""
    ports = dict(dns=b.free_port(), health=b.free_port(), ready=b.free_port(),
                 prometheus=b.free_port())
    conf = os.path.join(work, name + ".Corefile")
    with open(conf, "w") as f:
        f.write(COREFILE.format(kubeconfig=kubeconfig, **ports))
    return spawn(name, [coredns, "-conf", conf]), ports["dns"]


def wait_answers(port, names, proc, timeout):
    """Waits until the replica on `port` answers every name of `names`."""
    for name in names:
        b.wait_until(lambda: b.answers(port, name) or proc.poll() is not None,
                     "CoreDNS to answer " + name, timeout)
        if proc.poll() is not None:
            raise RuntimeError("CoreDNS exited; see " + proc.log)
