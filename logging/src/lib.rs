//! How the project's binaries log: tracing's usual text lines, or one JSON
//! object per line for log pipelines. skydns, kube2sky and exec-healthz each
//! take a `log-format` flag and call [`init`] with it, so the three write the
//! same shape. `json` holds the JSON formatters; `captured` keeps logs for
//! tests.

use std::fmt;
use std::io::Write as _;
use std::str::FromStr;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

mod captured;
mod json;

pub use captured::Captured;
pub use json::{JsonFields, JsonLines};

/// The shape of each log line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// tracing's text lines (`2026-11-26T23:24:20.123456Z  INFO target: message k=v`).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("unknown log format {other:?} (text or json)")),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// How a binary logs besides the format.
#[derive(Debug)]
pub struct Setup {
    /// Which events are written.
    pub filter: EnvFilter,
    /// Whether text lines name the event's target (module path).
    pub target: bool,
}

/// Installs the global subscriber: lines on stderr in `format`. A closed
/// stderr never panics the task that logs (tracing would report the failed
/// write with `eprintln!`, which panics); colours only on a terminal.
pub fn init(format: LogFormat, setup: Setup) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(setup.filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    match format {
        LogFormat::Text => builder
            .with_target(setup.target)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .fmt_fields(JsonFields)
            .event_format(JsonLines)
            .init(),
    }
}

/// Says why the program stops, whatever the log filter lets through: the
/// bare line on stderr in text (as the programs always did), an ERROR
/// object of `target` in JSON, so that a JSON log has no line that is not
/// an object. A closed stderr is not an error here.
pub fn fatal(format: LogFormat, target: &str, message: &str) {
    say(format, tracing::Level::ERROR, target, message);
}

/// Writes `message` whatever the log filter lets through, as [`fatal`]
/// does, at `level`: for what a program has always printed bare on stderr
/// (kube2sky's pflag warnings), which JSON logs make an object.
pub fn say(format: LogFormat, level: tracing::Level, target: &str, message: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "{}",
        said_line(format, level, target, message)
    );
}

/// The line [`say`] writes.
fn said_line(format: LogFormat, level: tracing::Level, target: &str, message: &str) -> String {
    match format {
        LogFormat::Text => message.to_string(),
        LogFormat::Json => {
            let mut timestamp = String::new();
            let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
            serde_json::json!({
                "timestamp": timestamp,
                "level": level.as_str(),
                "target": target,
                "message": message,
            })
            .to_string()
        }
    }
}

/// The event's fields as JSON values, by name.
#[derive(Default)]
struct FieldValues(serde_json::Map<String, serde_json::Value>);

impl FieldValues {
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        self.0.insert(field.name().to_string(), value);
    }
}

impl Visit for FieldValues {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and infinities have no JSON number.
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| value.to_string().into(), serde_json::Value::Number);
        self.put(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `message` (format_args!) and `%x` fields print as text here.
        self.put(field, format!("{value:?}").into());
    }
}

/// One line's object: the event's metadata, its spans' fields, its own.
/// The metadata goes in last, so no field can stand in for it; an event
/// from the `log` crate gets its own target and level, not `log`'s.
fn event_line<S, N>(ctx: &FmtContext<'_, S, N>, event: &Event<'_>) -> serde_json::Value
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    let mut line = serde_json::Map::new();
    if let Some(scope) = ctx.event_scope() {
        for span in scope.from_root() {
            let extensions = span.extensions();
            let Some(fields) = extensions.get::<FormattedFields<N>>() else {
                continue;
            };
            if let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(fields) {
                line.extend(fields);
            }
        }
    }
    let mut fields = FieldValues::default();
    event.record(&mut fields);
    line.extend(fields.0.into_iter().filter(|(k, _)| !k.starts_with("log.")));
    let normalized = event.normalized_metadata();
    let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
    let mut timestamp = String::new();
    if SystemTime
        .format_time(&mut Writer::new(&mut timestamp))
        .is_ok()
    {
        line.insert("timestamp".into(), timestamp.into());
    }
    line.insert("level".into(), metadata.level().as_str().into());
    line.insert("target".into(), metadata.target().into());
    line.entry("message").or_insert_with(|| "".into());
    serde_json::Value::Object(line)
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writeln!(writer, "{}", event_line(ctx, event))
    }
}

#[cfg(test)]
mod tests;
