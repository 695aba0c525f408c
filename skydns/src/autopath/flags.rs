//! Autopath's command-line flags, flattened into skydns's own.

use super::Autopath;
use gocompat::flag::boolean;
use std::sync::Arc;

/// `-autopath` and the search list it assumes.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Autopath")]
pub struct Flags {
    /// Answer a pod's search list at the server: a query ending in the first search domain
    /// of the asking pod's namespace (found from its IP in the pod records) that is NXDOMAIN
    /// is walked on through -autopath-search and then the bare name, and the first name
    /// found is answered with a CNAME to it. Needs kube2sky's pod records (--pods).
    #[arg(long, value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub autopath: bool,
    /// The search list -autopath assumes pods resolve with, comma separated; {ns} is the
    /// pod's namespace and {domain} -domain; the first must begin with {ns}. (Kubernetes's).
    #[arg(long, default_value = "{ns}.svc.{domain},svc.{domain},{domain}")]
    pub autopath_search: String,
    /// The ndots -autopath assumes (Kubernetes's 5): a name with this many dots is asked as
    /// it is first, so it is not walked.
    #[arg(long, default_value_t = 5)]
    pub autopath_ndots: usize,
}

impl Flags {
    /// Autopath for `domain`, if on; the error names the flag.
    pub fn build(&self, domain: &str) -> Result<Option<Arc<Autopath>>, String> {
        if !self.autopath {
            return Ok(None);
        }
        Autopath::new(&self.autopath_search, self.autopath_ndots, domain).map(|a| Some(Arc::new(a)))
    }
}
