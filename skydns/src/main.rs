//! `skydns`: parse flags, set up logging, serve until SIGTERM or Ctrl-C
//! (the first starts the lameduck and a graceful stop, a second stops at once).

use skydns::lifecycle::Shutdown;
use std::process::ExitCode;

/// jemalloc, not glibc's malloc: under tokio's worker threads glibc keeps
/// freed memory in per-thread arenas (at 300,000 records, 5-10 MB more
/// resident for the same heap).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let flags = match skydns::config::parse_args(std::env::args_os()) {
        Ok(flags) => flags,
        Err(e) => e.exit(),
    };
    // -verbose logs every query (skydns at debug), not every crate's internals.
    let default_level = if flags.verbose {
        "skydns=debug,info"
    } else {
        "info"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let setup = logging::Setup {
        filter,
        target: true,
    };
    let format = flags.log_format;
    logging::init(format, setup);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            logging::fatal(
                format,
                "skydns",
                &format!("skydns: cannot start the runtime: {e}"),
            );
            return ExitCode::FAILURE;
        }
    };
    let shutdown = Shutdown::default();
    runtime.spawn(stop_on_signals(shutdown.clone()));
    match runtime.block_on(skydns::run(flags, shutdown)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            logging::fatal(format, "skydns", &format!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// The first SIGTERM or SIGINT starts a graceful stop; the next one ends it.
async fn stop_on_signals(shutdown: Shutdown) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            return;
        }
    };
    let name = next_signal(&mut term).await;
    shutdown.terminate.cancel();
    tracing::info!("received {name}, stopping");
    let name = next_signal(&mut term).await;
    shutdown.abort.cancel();
    tracing::info!("received {name} again, stopping at once");
}

async fn next_signal(term: &mut tokio::signal::unix::Signal) -> &'static str {
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}
