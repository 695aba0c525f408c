//! The two formatters of [`crate::LogFormat::Json`]: [`JsonLines`] writes
//! each event as one object, [`JsonFields`] keeps each span's fields as a
//! JSON object text so that [`JsonLines`] can merge them into its lines.

use super::FieldValues;
use std::fmt;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatFields, Writer};
use tracing_subscriber::fmt::FormattedFields;

/// Formats events as one JSON object per line.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonLines;

/// Formats span fields as a JSON object.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonFields;

impl<'writer> FormatFields<'writer> for JsonFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut values = FieldValues::default();
        fields.record(&mut values);
        write!(writer, "{}", serde_json::Value::Object(values.0))
    }

    /// Fields recorded later (`span.record`) join the object instead of
    /// following it as text.
    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut values = FieldValues::default();
        if let Ok(serde_json::Value::Object(before)) = serde_json::from_str(&current.fields) {
            values.0 = before;
        }
        fields.record(&mut values);
        current.fields = serde_json::Value::Object(values.0).to_string();
        Ok(())
    }
}
