//! One request to etcd: its deadline ([`bounded`]) and what can go wrong
//! with it ([`EtcdError`]), classified where etcd answers (the conversions
//! from each client's error) so that the writer decides by variant, never
//! by reading an error's text. Every variant's text is what kube2sky has
//! always logged for it.

use etcd_access::member::Unavailable;
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Upper bound on one etcd request, so a hung request cannot stall the retry loop.
pub(super) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a request in flight may still take once shutdown is requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
/// What etcd's v3 API says of a transaction over its `--max-txn-ops`.
const TOO_MANY_OPS: &str = "too many operations in txn request";

/// Why one request (or one scope's requests) to etcd failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EtcdError {
    /// Shutdown was requested: the scope ends early, nothing new starts.
    #[error("shutting down")]
    ShuttingDown,
    /// No answer within the request's deadline.
    #[error("timed out after {0:?}")]
    TimedOut(Duration),
    /// etcd refused a transaction as larger than its `--max-txn-ops`: the
    /// writer halves its transactions.
    #[error("{0}")]
    TooManyOps(String),
    /// etcd answers, but not with the API `--etcd-api` chose (or the
    /// connection settings cannot be used): retrying cannot help.
    #[error("{0}")]
    WrongApi(String),
    /// A read the chosen API cannot do (a key range on v2).
    #[error("{0}")]
    Unsupported(String),
    /// Anything else etcd, or the way to it, said: worth another try.
    #[error("{0}")]
    Failed(String),
}

impl EtcdError {
    /// Whether retrying cannot help (see [`EtcdError::WrongApi`]).
    pub(crate) fn is_wrong_api(&self) -> bool {
        matches!(self, EtcdError::WrongApi(_))
    }

    /// Whether etcd refused a transaction as too large.
    pub(crate) fn is_too_many_ops(&self) -> bool {
        matches!(self, EtcdError::TooManyOps(_))
    }
}

impl From<etcd_client::Error> for EtcdError {
    fn from(error: etcd_client::Error) -> Self {
        let text = error.to_string();
        match &error {
            etcd_client::Error::GRpcStatus(status) if status.message().contains(TOO_MANY_OPS) => {
                EtcdError::TooManyOps(text)
            }
            _ => EtcdError::Failed(text),
        }
    }
}

impl From<etcd_access::v2::Error> for EtcdError {
    fn from(error: etcd_access::v2::Error) -> Self {
        if error.is_permanent() {
            EtcdError::WrongApi(error.to_string())
        } else {
            EtcdError::Failed(error.to_string())
        }
    }
}

impl From<Unavailable> for EtcdError {
    fn from(error: Unavailable) -> Self {
        EtcdError::Failed(error.to_string())
    }
}

/// Runs `work` under [`ATTEMPT_TIMEOUT`]. Once shutdown is requested it
/// gets [`SHUTDOWN_GRACE`] more to finish.
pub(super) async fn bounded<T, E: Into<EtcdError>>(
    shutdown: &CancellationToken,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, EtcdError> {
    bounded_for(ATTEMPT_TIMEOUT, shutdown, work).await
}

/// [`bounded`] with a time limit of `within`.
pub(super) async fn bounded_for<T, E: Into<EtcdError>>(
    within: Duration,
    shutdown: &CancellationToken,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, EtcdError> {
    let work = tokio::time::timeout(within, work);
    tokio::pin!(work);
    let outcome = tokio::select! {
        outcome = &mut work => outcome,
        _ = shutdown.cancelled() => {
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut work).await {
                Ok(outcome) => outcome,
                Err(_) => return Err(EtcdError::ShuttingDown),
            }
        }
    };
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(EtcdError::TimedOut(within)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_they_always_did() {
        assert_eq!(EtcdError::ShuttingDown.to_string(), "shutting down");
        assert_eq!(
            EtcdError::TimedOut(Duration::from_secs(3)).to_string(),
            "timed out after 3s"
        );
        let refused = etcd_client::Error::GRpcStatus(tonic::Status::invalid_argument(
            "etcdserver: too many operations in txn request",
        ));
        let text = refused.to_string();
        let error = EtcdError::from(refused);
        assert!(error.is_too_many_ops(), "{error:?}");
        assert_eq!(error.to_string(), text);
        let other = EtcdError::from(etcd_client::Error::GRpcStatus(tonic::Status::unavailable(
            "etcdserver: leader changed",
        )));
        assert!(
            !other.is_too_many_ops() && !other.is_wrong_api(),
            "{other:?}"
        );
    }

    #[test]
    fn a_v2_server_without_the_keys_api_is_the_wrong_api() {
        let missing = etcd_access::v2::Error::NoV2Api {
            endpoint: "http://e".into(),
            status: 404,
        };
        assert!(EtcdError::from(missing).is_wrong_api());
        let unreachable = etcd_access::v2::Error::Transport("refused".into());
        assert!(!EtcdError::from(unreachable).is_wrong_api());
    }
}
