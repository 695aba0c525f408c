//! `exec-healthz` binary: parses Go-style flags, sets up logging, binds the
//! port and hands over to [`healthz::run`]. Exit status: 0 on `/quit`,
//! SIGTERM or SIGINT; 1 when listening fails; 2 on a command-line error.

use std::process::ExitCode;

use healthz::flags::{self, Parsed};

#[tokio::main]
async fn main() -> ExitCode {
    let args = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned());
    let config = match flags::parse(args) {
        Ok(Parsed::Run(config)) => config,
        Ok(Parsed::Help) => {
            eprint!("{}", flags::usage());
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Version) => {
            print!("{}", flags::version());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("{err}");
            eprint!("{}", flags::usage());
            return ExitCode::from(2);
        }
    };
    let level = if config.quiet { "warn" } else { "info" };
    let setup = logging::Setup {
        filter: tracing_subscriber::EnvFilter::new(level),
        target: false,
    };
    logging::init(config.log_format, setup);
    let listener = match healthz::bind(config.port).await {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!("{err:#}");
            return ExitCode::FAILURE;
        }
    };
    match healthz::run(config, listener, healthz::termination_signal()).await {
        Ok(exit) => {
            tracing::info!("exiting: {exit:?}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}
