use super::*;

/// The lines a JSON subscriber writes while `f` runs.
fn json_lines(f: impl FnOnce()) -> Vec<serde_json::Value> {
    let out = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(out.clone())
        .fmt_fields(JsonFields)
        .event_format(JsonLines)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    (out.text().lines())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn an_event_is_one_object_with_its_fields_typed() {
    let lines = json_lines(|| {
        let peer: std::net::SocketAddr = "10.0.0.7:5353".parse().unwrap();
        tracing::warn!(
            target: "skydns::query",
            client = %peer,
            size = 74u64,
            offset = -3i64,
            duration_seconds = 0.25f64,
            cached = true,
            name = "a\"b.",
            "query {}", 1
        );
    });
    let [line] = lines.as_slice() else {
        panic!("{lines:?}")
    };
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["target"], "skydns::query");
    assert_eq!(line["message"], "query 1");
    assert_eq!(line["client"], "10.0.0.7:5353");
    assert_eq!(line["size"], 74);
    assert_eq!(line["offset"], -3);
    assert_eq!(line["duration_seconds"], 0.25);
    assert_eq!(line["cached"], true);
    assert_eq!(line["name"], "a\"b.");
    let timestamp = line["timestamp"].as_str().unwrap();
    assert!(
        timestamp.len() >= 20 && timestamp.ends_with('Z') && timestamp.as_bytes()[10] == b'T',
        "{timestamp}"
    );
}

#[test]
fn span_fields_join_the_line_and_the_event_wins_a_clash() {
    let lines = json_lines(|| {
        let outer = tracing::info_span!("watch", kind = "services", rv = tracing::field::Empty);
        let _outer = outer.enter();
        outer.record("rv", 42u64);
        let inner = tracing::info_span!("page", page = 3u64, kind = "inner");
        let _inner = inner.enter();
        tracing::info!(page = 4u64, "listed");
    });
    let [line] = lines.as_slice() else {
        panic!("{lines:?}")
    };
    assert_eq!(
        line["kind"], "inner",
        "the inner span's field follows the outer's"
    );
    assert_eq!(line["rv"], 42, "a field recorded after the span began");
    assert_eq!(line["page"], 4, "the event's own field wins");
    assert_eq!(line["message"], "listed");
}

#[test]
fn a_value_json_has_no_number_for_is_text() {
    let lines = json_lines(|| tracing::info!(ratio = f64::NAN, "odd"));
    assert_eq!(lines[0]["ratio"], "NaN");
}

#[test]
fn formats_are_named_text_and_json() {
    assert_eq!("text".parse::<LogFormat>(), Ok(LogFormat::Text));
    assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
    assert_eq!(LogFormat::default(), LogFormat::Text);
    assert_eq!(LogFormat::Json.to_string(), "json");
    let err = "JSON".parse::<LogFormat>().unwrap_err();
    assert!(
        err.contains("\"JSON\"") && err.contains("text or json"),
        "{err}"
    );
}

#[test]
fn the_metadata_cannot_be_overwritten_by_a_field() {
    let lines = json_lines(|| tracing::error!(target: "t", level = "quiet", target = "x", "m"));
    assert_eq!(lines[0]["level"], "ERROR");
    assert_eq!(lines[0]["target"], "t");
    let lines = json_lines(|| tracing::info!(n = 1u64));
    assert_eq!(lines[0]["message"], "", "a line always has a message");
}

#[test]
fn an_event_of_the_log_crate_keeps_its_own_target_and_level() {
    // Installs the log-to-tracing bridge for this test binary (once).
    let _ = tracing_log::LogTracer::init();
    let lines = json_lines(|| log::warn!(target: "rustls::conn", "Sending fatal alert"));
    let [line] = lines.as_slice() else {
        panic!("{lines:?}")
    };
    assert_eq!(line["target"], "rustls::conn");
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["message"], "Sending fatal alert");
    let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
    assert!(keys.iter().all(|k| !k.starts_with("log.")), "{keys:?}");
}

#[test]
fn a_said_line_is_the_bare_message_in_text_and_an_object_of_its_level_in_json() {
    let error = tracing::Level::ERROR;
    assert_eq!(
        said_line(LogFormat::Text, error, "skydns", "addr is invalid"),
        "addr is invalid"
    );
    let json: serde_json::Value = serde_json::from_str(&said_line(
        LogFormat::Json,
        error,
        "skydns",
        "addr \"x\" is invalid",
    ))
    .unwrap();
    assert_eq!(json["level"], "ERROR");
    assert_eq!(json["target"], "skydns");
    assert_eq!(json["message"], "addr \"x\" is invalid");
    assert!(json["timestamp"].as_str().unwrap().ends_with('Z'));
    let warning = said_line(LogFormat::Json, tracing::Level::WARN, "kube2sky", "w");
    let json: serde_json::Value = serde_json::from_str(&warning).unwrap();
    assert_eq!(
        (json["level"].as_str(), json["target"].as_str()),
        (Some("WARN"), Some("kube2sky"))
    );
}
