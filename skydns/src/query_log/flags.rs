//! The query log's command-line flags, flattened into skydns's own.

use super::QueryLog;
use std::sync::Arc;

/// `-log-queries` and its sampling.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Query log")]
pub struct Flags {
    /// Write one line per answered query of these classes, comma separated: all, success
    /// (answers), denial (NXDOMAIN, NODATA), error (SERVFAIL, REFUSED, FORMERR, NOTIMP...):
    /// client, proto, name, qtype, qclass, rcode, answers, truncated, size, duration_seconds,
    /// source (local, cached, stale, forwarded, stub, autopath); tracing target skydns::query,
    /// level INFO [default: off].
    #[arg(long = "log-queries", default_value = "", hide_default_value = true)]
    pub log_queries: String,
    /// The share of the -log-queries classes' replies written, from 0.000001 to 1 (0.01: one
    /// in a hundred, evenly spread).
    #[arg(long = "log-queries-sample", default_value_t = 1.0)]
    pub log_queries_sample: f64,
}

impl Flags {
    /// The query log, if on; the error names the flag.
    pub fn build(&self) -> Result<Option<Arc<QueryLog>>, String> {
        Ok(QueryLog::new(&self.log_queries, self.log_queries_sample)?.map(Arc::new))
    }
}
