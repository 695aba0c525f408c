//! What kube2sky logs, as 1.2 did, about a cluster-IP service it writes: one
//! without ports, and a port without a protocol (1.2's
//! `generateRecordsForPortalService` and `buildPortSegmentString`). The
//! records it can make are written all the same.

use crate::kube2sky_support::*;
use anyhow::{ensure, Result};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_without_ports_and_a_port_without_protocol_are_logged() -> Result<()> {
    let (etcd, _api, kubectl, k2s) = cluster(&["--reverse=false"]).await?;
    let svc = "/skydns/local/cluster/svc/default";
    let no_protocol = svc_manifest("noproto", "10.0.0.62", &[("http", "", 80)]);
    kubectl.with_manifest("create", &no_protocol)?;
    k2s.wait_for_log("Port Protocol not set. port segment string cannot be created.")
        .await?;
    kubectl.with_manifest("create", &svc_manifest("bare", "10.0.0.61", &[]))?;
    k2s.wait_for_log("Unexpected service with no ports, this should not have happend")
        .await?;
    wait_for_keys(&etcd, &format!("{svc}/bare/"), 1).await?;
    // Rounds are written in order: `noproto`'s is done. Its A record, and
    // no SRV record without a protocol.
    let keys = keys_under(&etcd, &format!("{svc}/noproto/"))?;
    ensure!(keys.len() == 1, "noproto's keys: {keys:?}");
    Ok(())
}
