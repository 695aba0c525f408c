//! Command-line parsing with the semantics of Go's standard `flag` package,
//! which exec-healthz 1.0 used: the flag table, the usage text and the
//! resulting [`Config`]. The syntax is parsed here, not by clap, because the
//! tests pin Go's behaviour: its error texts, its usage format, exit status 2.

use std::time::Duration;

use gocompat::duration::{format as format_duration, parse as parse_duration};

/// Default per-run output cap (bytes kept of the combined stdout+stderr).
pub const DEFAULT_MAX_OUTPUT: usize = 64 * 1024;

/// Everything exec-healthz needs to run, after defaults are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Shell command run as `sh -c <cmd>`.
    pub cmd: String,
    /// Interval between runs; the first run is one period after start.
    pub period: Duration,
    /// Maximum age of the last result before `/healthz` turns 503.
    pub latency: Duration,
    /// Per-run limit after which the command's process group is killed.
    pub timeout: Duration,
    /// TCP port to listen on (all interfaces).
    pub port: u16,
    /// Only log warnings and errors.
    pub quiet: bool,
    /// The shape of log lines (`-log-format`).
    pub log_format: logging::LogFormat,
    /// Whether `/quit` exits the process (1.0 behaviour) or is refused.
    pub quit_enabled: bool,
    /// Bytes of combined output kept per run.
    pub max_output: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            cmd: "echo healthz".to_owned(),
            period: Duration::from_secs(2),
            latency: Duration::from_secs(30),
            timeout: Duration::from_secs(30),
            port: 8080,
            quiet: false,
            log_format: logging::LogFormat::Text,
            quit_enabled: true,
            max_output: DEFAULT_MAX_OUTPUT,
        }
    }
}

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Run with this configuration.
    Run(Config),
    /// `-h`, `-help` or `--help`: print [`usage`] and exit 0.
    Help,
    /// `-V`, `-version` or `--version`: print [`version`] and exit 0 (`-V`
    /// as skydns and kube2sky accept it).
    Version,
}

/// A command-line error; print it and [`usage`] to stderr, then exit 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    /// The flag is not in the table.
    #[error("flag provided but not defined: -{0}")]
    Unknown(String),
    /// Something like `---x` or `-=x`.
    #[error("bad flag syntax: {0}")]
    BadSyntax(String),
    /// A value flag came last without a value.
    #[error("flag needs an argument: -{0}")]
    NeedsArgument(String),
    /// The value does not parse or is out of range.
    #[error("invalid value {value:?} for flag -{flag}: {reason}")]
    InvalidValue {
        /// Flag name, without dashes.
        flag: String,
        /// The offending text.
        value: String,
        /// Why it was refused.
        reason: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Duration,
    Int,
    Str,
}

struct Spec {
    name: &'static str,
    kind: Kind,
    default: &'static str,
    usage: &'static str,
}

const SPECS: &[Spec] = &[
    Spec {
        name: "cmd",
        kind: Kind::Str,
        default: "\"echo healthz\"",
        usage: "Command run as sh -c <cmd> every -period (not on each request). /healthz answers 200 while its last run exited 0 and is no older than -latency.",
    },
    Spec {
        name: "latency",
        kind: Kind::Duration,
        default: "30s",
        usage: "If the async worker hasn't updated the probe command output in this long, return a 503.",
    },
    Spec {
        name: "log-format",
        kind: Kind::Str,
        default: "text",
        usage: "The shape of log lines: text, or json (one object per line: timestamp, level, target, message and each field by name).",
    },
    Spec {
        name: "period",
        kind: Kind::Duration,
        default: "2s",
        usage: "Period to run the given cmd in an async worker. The first run is one period after start; runs never overlap.",
    },
    Spec {
        name: "port",
        kind: Kind::Int,
        default: "8080",
        usage: "Port number to serve /healthz on (all interfaces).",
    },
    Spec {
        name: "quiet",
        kind: Kind::Bool,
        default: "",
        usage: "Run in quiet mode by only logging errors.",
    },
    Spec {
        name: "quit-enabled",
        kind: Kind::Bool,
        default: "true",
        usage: "Serve /quit, which makes the process exit 0 (unauthenticated, as in 1.0). With -quit-enabled=false /quit answers 403.",
    },
    Spec {
        name: "timeout",
        kind: Kind::Duration,
        default: "the -latency value",
        usage: "Maximum duration of one run; a run still going then has its whole process group killed (SIGKILL) and counts as failed.",
    },
];

/// The usage text printed for `-h` and after a command-line error.
pub fn usage() -> String {
    let mut out = String::from("Usage of exec-healthz:\n");
    for spec in SPECS {
        let type_name = match spec.kind {
            Kind::Bool => "",
            Kind::Duration => " duration",
            Kind::Int => " int",
            Kind::Str => " string",
        };
        out.push_str(&format!(
            "  -{}{type_name}\n    \t{}",
            spec.name, spec.usage
        ));
        if !spec.default.is_empty() {
            out.push_str(&format!(" (default {})", spec.default));
        }
        out.push('\n');
    }
    out.push_str("  -V, -version\n    \tPrint the version and exit.\n");
    out.push_str(&format!(
        "Flags may be written -flag=value, -flag value or --flag=value; boolean flags only as -flag or -flag=false.\nCaptured output is capped at {} bytes per run.\nExit status: 0 after /quit, SIGTERM or SIGINT; 1 if the port cannot be bound; 2 on a command-line error.\nDocumentation: docs/exec-healthz.md.\n",
        DEFAULT_MAX_OUTPUT
    ));
    out
}

/// The line printed for `-V` or `-version`: the binary's name and version.
pub fn version() -> String {
    format!("exec-healthz {}\n", env!("CARGO_PKG_VERSION"))
}

/// Parses the arguments after the program name.
pub fn parse<I, S>(args: I) -> Result<Parsed, FlagError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut args = args.into_iter().map(Into::into);
    let mut config = Config::default();
    let mut timeout: Option<Duration> = None;
    while let Some(arg) = args.next() {
        if arg.len() < 2 || !arg.starts_with('-') {
            break; // first non-flag argument: Go stops here and ignores the rest
        }
        let body = match arg.strip_prefix("--") {
            Some("") => break, // "--" terminates the flags
            Some(rest) => rest,
            None => &arg[1..],
        };
        if body.starts_with('-') || body.starts_with('=') {
            return Err(FlagError::BadSyntax(arg.clone()));
        }
        let (name, inline) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (body, None),
        };
        let Some(spec) = SPECS.iter().find(|s| s.name == name) else {
            if name == "h" || name == "help" {
                return Ok(Parsed::Help);
            }
            // `-V` as in skydns and kube2sky (clap's short version flag).
            if name == "V" || name == "version" {
                return Ok(Parsed::Version);
            }
            return Err(FlagError::Unknown(name.to_owned()));
        };
        let value = match (spec.kind, inline) {
            (Kind::Bool, None) => "true".to_owned(),
            (_, Some(value)) => value,
            (_, None) => args
                .next()
                .ok_or_else(|| FlagError::NeedsArgument(name.to_owned()))?,
        };
        apply(&mut config, &mut timeout, spec, &value)?;
    }
    config.timeout = match timeout {
        Some(timeout) => timeout,
        // The default timeout is the latency; a zero one would kill every run
        // at once (or race it), so say which flag caused it.
        None if config.latency.is_zero() => return Err(FlagError::InvalidValue {
            flag: "latency".to_owned(),
            value: format_duration(config.latency),
            reason:
                "must be greater than zero unless -timeout is given (-timeout defaults to -latency)"
                    .to_owned(),
        }),
        None => config.latency,
    };
    Ok(Parsed::Run(config))
}

fn apply(
    config: &mut Config,
    timeout: &mut Option<Duration>,
    spec: &Spec,
    value: &str,
) -> Result<(), FlagError> {
    let invalid = |reason: String| FlagError::InvalidValue {
        flag: spec.name.to_owned(),
        value: value.to_owned(),
        reason,
    };
    match spec.name {
        "cmd" => config.cmd = value.to_owned(),
        "port" => config.port = parse_port(value).map_err(invalid)?,
        "quiet" => config.quiet = parse_bool(value).map_err(invalid)?,
        "log-format" => config.log_format = value.parse().map_err(invalid)?,
        "quit-enabled" => config.quit_enabled = parse_bool(value).map_err(invalid)?,
        "latency" => config.latency = parse_duration(value).map_err(invalid)?,
        "period" => config.period = positive_duration(value).map_err(invalid)?,
        "timeout" => *timeout = Some(positive_duration(value).map_err(invalid)?),
        other => return Err(FlagError::Unknown(other.to_owned())),
    }
    Ok(())
}

fn positive_duration(value: &str) -> Result<Duration, String> {
    let d = parse_duration(value)?;
    if d.is_zero() {
        return Err(format!(
            "must be greater than zero, got {}",
            format_duration(d)
        ));
    }
    Ok(d)
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Result<bool, String> {
    gocompat::parse_bool(value).ok_or_else(|| "not a boolean (use true or false)".to_owned())
}

fn parse_port(value: &str) -> Result<u16, String> {
    let n = gocompat::int::parse(value)?;
    u16::try_from(n).map_err(|_| format!("port out of range 0-65535: {n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Config {
        match parse(args.iter().copied()) {
            Ok(Parsed::Run(config)) => config,
            other => panic!("expected a config, got {other:?}"),
        }
    }

    #[test]
    fn defaults_match_exec_healthz_1_0() {
        let c = run(&[]);
        assert_eq!(c.cmd, "echo healthz");
        assert_eq!(c.period, Duration::from_secs(2));
        assert_eq!(c.latency, Duration::from_secs(30));
        assert_eq!(c.timeout, c.latency);
        assert_eq!(c.port, 8080);
        assert!(!c.quiet);
        assert!(c.quit_enabled);
        assert_eq!(c.max_output, 64 * 1024);
    }

    #[test]
    fn the_log_format_is_text_or_json() {
        assert_eq!(run(&[]).log_format, logging::LogFormat::Text);
        assert_eq!(
            run(&["-log-format", "json"]).log_format,
            logging::LogFormat::Json
        );
        assert!(matches!(
            parse(["-log-format=yaml"]),
            Err(FlagError::InvalidValue { flag, .. }) if flag == "log-format"
        ));
    }

    #[test]
    fn accepts_all_go_flag_spellings() {
        let c = run(&[
            "-cmd=nslookup kubernetes.default.svc.cluster.local 127.0.0.1 >/dev/null",
            "-port",
            "9090",
            "--period=1m30s",
            "--latency",
            "500ms",
            "-quiet",
            "-quit-enabled=false",
        ]);
        assert_eq!(
            c.cmd,
            "nslookup kubernetes.default.svc.cluster.local 127.0.0.1 >/dev/null"
        );
        assert_eq!(c.port, 9090);
        assert_eq!(c.period, Duration::from_secs(90));
        assert_eq!(c.latency, Duration::from_millis(500));
        assert_eq!(
            c.timeout,
            Duration::from_millis(500),
            "timeout defaults to the latency"
        );
        assert!(c.quiet);
        assert!(!c.quit_enabled);
    }

    #[test]
    fn value_may_start_with_a_dash_and_timeout_overrides_latency() {
        let c = run(&["-cmd", "-x", "-timeout=5s", "-quiet=false"]);
        assert_eq!(c.cmd, "-x");
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert!(!c.quiet);
    }

    #[test]
    fn stops_at_first_non_flag_and_at_double_dash() {
        let c = run(&["-port=1", "stray", "-bogus"]);
        assert_eq!(c.port, 1);
        let c = run(&["-port=2", "--", "-bogus"]);
        assert_eq!(c.port, 2);
    }

    #[test]
    fn help_flags() {
        for h in ["-h", "-help", "--help", "--h"] {
            assert_eq!(parse([h]), Ok(Parsed::Help), "{h}");
        }
    }

    #[test]
    fn version_flags() {
        for v in ["-version", "--version"] {
            assert_eq!(parse([v]), Ok(Parsed::Version), "{v}");
        }
        assert!(usage().contains("  -V, -version\n"));
        assert_eq!(
            version(),
            format!("exec-healthz {}\n", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn capital_v_is_the_version_as_in_skydns_and_kube2sky() {
        assert_eq!(parse(["-V"]), Ok(Parsed::Version));
        assert_eq!(parse(["-port=1", "-V"]), Ok(Parsed::Version));
        // Go flags are case-sensitive: lower-case -v stays unknown.
        assert_eq!(parse(["-v"]), Err(FlagError::Unknown("v".into())));
    }

    #[test]
    fn errors_name_the_flag() {
        assert_eq!(parse(["-bogus=1"]), Err(FlagError::Unknown("bogus".into())));
        assert_eq!(
            parse(["-period=abc"]).map_err(|e| e.to_string()),
            Err("invalid value \"abc\" for flag -period: invalid duration \"abc\"".into())
        );
        assert_eq!(
            parse(["-port"]),
            Err(FlagError::NeedsArgument("port".into()))
        );
        assert_eq!(
            parse(["---port=1"]),
            Err(FlagError::BadSyntax("---port=1".into()))
        );
        assert!(
            matches!(parse(["-port=70000"]), Err(FlagError::InvalidValue { flag, .. }) if flag == "port")
        );
        assert!(
            matches!(parse(["-quiet=maybe"]), Err(FlagError::InvalidValue { flag, .. }) if flag == "quiet")
        );
        assert!(
            matches!(parse(["-period=0s"]), Err(FlagError::InvalidValue { flag, .. }) if flag == "period")
        );
        assert!(
            matches!(parse(["-timeout=-1s"]), Err(FlagError::InvalidValue { flag, .. }) if flag == "timeout")
        );
    }

    #[test]
    fn port_takes_go_int_syntax() {
        for (text, want) in [
            ("0x1f90", 8080),
            ("010", 8),
            ("0b1010", 10),
            ("8_080", 8080),
        ] {
            assert_eq!(run(&[&format!("-port={text}")]).port, want, "{text}");
        }
        for bad in ["-1", "08", "8__0", "0x"] {
            assert!(
                matches!(parse([format!("-port={bad}")]), Err(FlagError::InvalidValue { flag, .. }) if flag == "port"),
                "{bad}"
            );
        }
    }

    #[test]
    fn zero_latency_needs_an_explicit_timeout() {
        let err = parse(["-latency=0s"]).unwrap_err();
        assert!(
            matches!(&err, FlagError::InvalidValue { flag, .. } if flag == "latency"),
            "{err:?}"
        );
        assert!(err.to_string().contains("-timeout"), "{err}");
        let c = run(&["-latency=0s", "-timeout=5s"]);
        assert_eq!(
            (c.latency, c.timeout),
            (Duration::ZERO, Duration::from_secs(5))
        );
    }

    #[test]
    fn usage_lists_every_flag() {
        let text = usage();
        for spec in SPECS {
            assert!(text.contains(&format!("  -{}", spec.name)), "{}", spec.name);
        }
    }
}
