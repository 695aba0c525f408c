//! The TCP listener's command-line flags, flattened into skydns's own.

use super::TcpLimits;
use gocompat::flag::duration;
use std::time::Duration;

/// Bounds on TCP clients.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "TCP")]
pub struct Flags {
    /// TCP connections served at once; at the limit a new one takes the place of the connection
    /// idle longest, and is closed only when every connection is in the middle of a query.
    #[arg(long = "tcp-max-connections", default_value_t = 1_000)]
    pub tcp_max_connections: usize,
    /// How long a TCP connection may sit idle between queries (Go duration).
    #[arg(long = "tcp-idle-timeout", value_parser = duration, default_value = "10s")]
    pub tcp_idle_timeout: Duration,
    /// How long the rest of a TCP message may take once it started.
    #[arg(long = "tcp-read-timeout", value_parser = duration, default_value = "2s")]
    pub tcp_read_timeout: Duration,
    /// How long a TCP client may take to accept a reply before it is closed.
    #[arg(long = "tcp-write-timeout", value_parser = duration, default_value = "2s")]
    pub tcp_write_timeout: Duration,
}

impl Flags {
    /// The limits; a zero limit or timeout is an error naming the flag.
    pub fn build(&self) -> Result<TcpLimits, String> {
        let positive = |name: &str, d: Duration| {
            if d.is_zero() {
                Err(format!("{name} must be greater than zero"))
            } else {
                Ok(d)
            }
        };
        if self.tcp_max_connections == 0 {
            return Err("tcp-max-connections must be at least 1".into());
        }
        Ok(TcpLimits {
            max_connections: self.tcp_max_connections,
            idle: positive("tcp-idle-timeout", self.tcp_idle_timeout)?,
            read: positive("tcp-read-timeout", self.tcp_read_timeout)?,
            write: positive("tcp-write-timeout", self.tcp_write_timeout)?,
        })
    }
}
