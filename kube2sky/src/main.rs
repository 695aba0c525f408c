//! kube2sky binary: parse Go-style flags, set up tracing, run until SIGTERM
//! or SIGINT (then finish the write in flight and exit 0), exit non-zero on
//! a fatal error (etcd unreachable, a mutation timing out, bad flags).

use kube2sky::config::Flags;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// jemalloc, not glibc's malloc: under tokio's worker threads glibc keeps
/// freed memory in per-thread arenas (at 300,000 records, 5-10 MB more
/// resident for the same heap).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() {
    let flags = match Flags::parse_from_go_style(std::env::args()) {
        Ok(flags) => flags,
        Err(e) => e.exit(),
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(flags.log_level()));
    let setup = logging::Setup {
        filter,
        target: true,
    };
    logging::init(flags.log_format, setup);
    for warning in &flags.deprecated_spellings {
        // As kube2sky 1.2's pflag wrote it, or a WARN object in JSON.
        logging::say(flags.log_format, tracing::Level::WARN, "kube2sky", warning);
    }
    let config = match flags.into_config() {
        Ok(config) => config,
        Err(e) => {
            tracing::error!("{e}");
            std::process::exit(2);
        }
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(signals(shutdown.clone()));
    if let Err(e) = kube2sky::run(config, shutdown).await {
        tracing::error!("{e}");
        std::process::exit(1);
    }
    tracing::info!("stopped");
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn signals(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "terminated",
        _ = int.recv() => "interrupt",
    };
    shutdown.cancel();
    tracing::info!("Received signal {name}; finishing the write in flight");
}
