//! The metrics listener's command-line flags, flattened into skydns's own.

use std::net::SocketAddr;

/// Where metrics, `/health` and `/ready` are served.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Metrics and probes")]
pub struct Flags {
    /// Serve Prometheus metrics, /health and /ready on this address (IP:port) [default:
    /// 0.0.0.0:<PROMETHEUS_PORT> when that is set, else off].
    #[arg(long = "metrics-addr")]
    pub metrics_addr: Option<String>,
    /// Port of the metrics listener on all interfaces, when -metrics-addr is not given (SkyDNS
    /// read only the environment variable) [default: off].
    #[arg(long = "prometheus-port", env = "PROMETHEUS_PORT")]
    pub prometheus_port: Option<String>,
    /// Path of the metrics endpoint (not /health or /ready, the probes).
    #[arg(
        long = "prometheus-path",
        env = "PROMETHEUS_PATH",
        default_value = "/metrics"
    )]
    pub prometheus_path: String,
}

/// The metrics listener.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Where to serve metrics, if anywhere.
    pub addr: Option<SocketAddr>,
    /// Path of the metrics endpoint.
    pub path: String,
}

impl Flags {
    /// `-metrics-addr`, else `0.0.0.0:$PROMETHEUS_PORT`, else none, and the
    /// path; the error names the flag or variable.
    pub fn build(&self) -> Result<Settings, String> {
        if !self.prometheus_path.starts_with('/') {
            return Err(format!(
                "PROMETHEUS_PATH must start with '/': {:?}",
                self.prometheus_path
            ));
        }
        if ["/health", "/ready"].contains(&self.prometheus_path.as_str()) {
            return Err(format!(
                "PROMETHEUS_PATH {:?} is taken by the probe of that name",
                self.prometheus_path
            ));
        }
        Ok(Settings {
            addr: self.addr()?,
            path: self.prometheus_path.clone(),
        })
    }

    fn addr(&self) -> Result<Option<SocketAddr>, String> {
        if let Some(addr) = &self.metrics_addr {
            let parsed = addr
                .parse()
                .map_err(|_| format!("metrics-addr is invalid: {addr:?} (want IP:port)"))?;
            return Ok(Some(parsed));
        }
        match self.prometheus_port.as_deref() {
            None | Some("") => Ok(None),
            Some(port) => {
                let port: u16 = port
                    .parse()
                    .map_err(|_| format!("PROMETHEUS_PORT is invalid: {port:?}"))?;
                Ok(Some(SocketAddr::from(([0, 0, 0, 0], port))))
            }
        }
    }
}
