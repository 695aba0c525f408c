//! The parser on comments, quotes, environment variables, snippets and
//! imports, keys, nested blocks, and each malformed input with its line.

use super::*;

/// Files held in memory, matched on their whole label.
struct Mem(Vec<Source>);

impl Files for Mem {
    fn glob(&self, pattern: &str) -> Result<Vec<Source>, String> {
        Ok(self
            .0
            .iter()
            .filter(|s| glob_match(pattern, &s.label))
            .cloned()
            .collect())
    }
}

fn env(name: &str) -> Option<String> {
    match name {
        "UPSTREAM" => Some("10.0.0.2".to_owned()),
        "SPACED" => Some("a b".to_owned()),
        _ => None,
    }
}

fn src(label: &str, text: &str) -> Source {
    Source {
        label: label.to_owned(),
        text: text.to_owned(),
    }
}

fn parse_with(text: &str, files: &[Source]) -> Result<Corefile, ParseError> {
    parse(&src("Corefile", text), &Mem(files.to_vec()), &env)
}

fn blocks(text: &str) -> Vec<ServerBlock> {
    parse_with(text, &[]).expect("parses").blocks
}

/// Each directive as `line: name args...`.
fn lines(block: &ServerBlock) -> Vec<String> {
    (block.directives.iter())
        .map(|d| {
            format!("{}: {} {}", d.pos.line, d.name, d.args.join("|"))
                .trim_end()
                .to_owned()
        })
        .collect()
}

fn error(text: &str) -> (usize, String) {
    let e = parse_with(text, &[]).expect_err("malformed");
    assert_eq!(e.file, "Corefile");
    (e.line, e.message)
}

#[test]
fn comments_run_from_the_start_of_a_token_to_the_end_of_the_line() {
    let b = blocks("# head\n.:53 { # open\n  errors # trailing\n  log a#b \"#quoted\"\n}\n# tail");
    assert_eq!(lines(&b[0]), ["3: errors", "4: log a#b|#quoted"]);
}

#[test]
fn quotes_keep_spaces_and_escaped_quotes_and_may_span_lines() {
    let b = blocks(
        ".:53 {\n  answer \"{{ .Name }} 60 IN TXT \\\"x y\\\"\" tail\n  t \"a\nb\" c\n  next\n}",
    );
    let d = &b[0].directives;
    assert_eq!(d[0].args, ["{{ .Name }} 60 IN TXT \"x y\"", "tail"]);
    assert_eq!(d[1].args, ["a\nb", "c"]);
    assert_eq!((d[2].name.as_str(), d[2].pos.line), ("next", 5));
    // A backslash before anything but a quote stays.
    let b = blocks(".:53 {\n  match \"^a\\.b$\"\n}");
    assert_eq!(b[0].directives[0].args, ["^a\\.b$"]);
}

#[test]
fn environment_variables_are_substituted_in_tokens() {
    let b = blocks(
        ".:53 {\n  forward . {$UPSTREAM} dns://{%UPSTREAM%}:5353 \"{$SPACED}\" {$ nope} {4,}\n}",
    );
    assert_eq!(
        b[0].directives[0].args,
        [
            ".",
            "10.0.0.2",
            "dns://10.0.0.2:5353",
            "a b",
            "{$",
            "nope}",
            "{4,}"
        ]
    );
    assert_eq!(
        error(".:53 {\n  errors\n  forward . {$MISSING}\n}"),
        (
            3,
            "environment variable MISSING is not set (CoreDNS would put an empty string \
             there; set it, or write the value)"
                .to_owned()
        )
    );
}

#[test]
fn snippets_are_imported_where_named_and_keep_their_lines() {
    let text = "(base) {\n  errors\n}\n(tail) {\n  loop\n  cache 30\n}\n.:53 {\n  import base\n  import base\n  import tail\n  reload\n}";
    let b = blocks(text);
    assert_eq!(b.len(), 1);
    assert_eq!(
        lines(&b[0]),
        [
            "2: errors",
            "2: errors",
            "5: loop",
            "6: cache 30",
            "12: reload"
        ]
    );
    // A snippet imports another, at the top level too.
    let b =
        blocks("(one) {\n  errors\n}\n(block) {\nexample.org {\n  import one\n}\n}\nimport block");
    assert_eq!(b[0].keys, ["example.org"]);
    assert_eq!(lines(&b[0]), ["2: errors"]);
}

#[test]
fn imports_read_files_by_glob_and_a_glob_matching_nothing_is_a_note() {
    let files = [
        src(
            "custom/b.server",
            "b.example:53 {\n  forward . 10.0.0.3\n}\n",
        ),
        src(
            "custom/a.server",
            "a.example:53 {\n  forward . 10.0.0.2\n}\n",
        ),
        src("custom/log.override", "log\n"),
    ];
    let mem = Mem(files.to_vec());
    let text =
        ".:53 {\n  import custom/*.override\n  import custom/*.missing\n}\nimport custom/*.server";
    let c = parse(&src("Corefile", text), &mem, &env).expect("parses");
    let keys: Vec<&str> = c.blocks.iter().map(|b| b.keys[0].as_str()).collect();
    // In the order the files come (the Files implementation sorts them).
    assert_eq!(keys, [".:53", "b.example:53", "a.example:53"]);
    assert_eq!(
        c.blocks[0].directives[0].pos,
        Pos {
            file: "custom/log.override".into(),
            line: 1
        }
    );
    assert_eq!(c.blocks[0].directives[0].text, "log");
    assert_eq!(
        c.notes,
        ["Corefile:3: import custom/*.missing matched no file (CoreDNS skips it too)"]
    );
    let e = parse(
        &src("Corefile", ".:53 {\n  import nothing.conf\n}"),
        &mem,
        &env,
    )
    .expect_err("missing");
    assert_eq!(
        (e.line, e.message.as_str()),
        (2, "import nothing.conf: no such snippet or file")
    );
}

#[test]
fn an_import_cycle_is_an_error_at_the_import() {
    let files = [src("loop.conf", "errors\nimport loop.conf\n")];
    let e = parse_with(".:53 {\n  import loop.conf\n}", &files).expect_err("cycle");
    assert_eq!((e.file.as_str(), e.line), ("loop.conf", 2));
    assert!(
        e.message
            .starts_with("import loop.conf: imports nest too deep"),
        "{e}"
    );
}

#[test]
fn keys_are_separated_by_spaces_or_commas_and_a_comma_continues_the_line() {
    for text in [
        "a.org b.org:1053 {\n}",
        "a.org, b.org:1053 {\n}",
        "a.org,b.org:1053 {\n}",
        "a.org,\n  b.org:1053 {\n}",
    ] {
        assert_eq!(blocks(text)[0].keys, ["a.org", "b.org:1053"], "{text}");
    }
}

#[test]
fn nested_blocks_hold_one_sub_directive_per_line() {
    let b = blocks(
        ".:53 {\n  health { lameduck 5s }\n  forward . 10.0.0.2 {\n    max_fails 3\n    policy sequential\n  }\n  loop\n}",
    );
    let d = &b[0].directives;
    let health = d[0].block.as_ref().expect("health block");
    assert_eq!(
        (health[0].name.as_str(), health[0].args.as_slice()),
        ("lameduck", &["5s".to_owned()][..])
    );
    let forward = d[1].block.as_ref().expect("forward block");
    assert_eq!(
        lines(&ServerBlock {
            directives: forward.clone(),
            ..b[0].clone()
        }),
        ["4: max_fails 3", "5: policy sequential"]
    );
    assert_eq!(
        (d[1].args.as_slice(), d[1].text.as_str()),
        (
            &[".".to_owned(), "10.0.0.2".to_owned()][..],
            "forward . 10.0.0.2 {"
        )
    );
    assert_eq!(lines(&b[0])[2], "7: loop");
}

#[test]
fn the_only_block_may_omit_its_braces() {
    let b = blocks("example.org:1053\nerrors\nforward . 10.0.0.2 {\n  max_fails 1\n}\n");
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].keys, ["example.org:1053"]);
    assert_eq!(lines(&b[0]), ["2: errors", "3: forward .|10.0.0.2"]);
}

#[test]
fn malformed_input_names_the_line() {
    let cases: &[(&str, usize, &str)] = &[
        (
            ".:53 {\n  errors\n",
            1,
            "this '{' of \".:53\" is never closed",
        ),
        (
            ".:53 {\n  errors\n}\n}\n",
            4,
            "unexpected '}' outside a server block",
        ),
        (
            ".:53 {\n  errors }\n",
            2,
            "unexpected '}': a closing brace starts its own line",
        ),
        (
            ".:53 {\n}\nerrors\n",
            3,
            "\"errors\" is outside any server block (a directive after a block's '}', or a \
             server block without '{': only a file's only block may omit its braces)",
        ),
        (
            ".:53 {\n  template IN A x {\n    answer \"unterminated\n  }\n}\n",
            3,
            "unterminated quoted string",
        ),
        (
            "a.org, {\n}\n",
            1,
            "empty server block key (a ',' before '{')",
        ),
        ("\"\" {\n}\n", 1, "empty server block key"),
        ("a.org,,b.org {\n}\n", 1, "empty server block key"),
        (
            ".:53 {\n  forward . 10.0.0.2 {\n    tls {\n    }\n  }\n}\n",
            3,
            "a block nested deeper than allowed: a plugin's options take no block of their own",
        ),
        (
            ".:53 {\n  forward . 10.0.0.2 {\n    max_fails 1\n",
            2,
            "this '{' is never closed",
        ),
        (
            "(snip) {\n  errors\n",
            1,
            "snippet (snip): '{' is never closed",
        ),
        (
            ".:53 {\n  import\n}\n",
            2,
            "import needs a snippet name or a file glob",
        ),
        ("{\n}\n", 1, "unexpected '{' outside a server block"),
    ];
    for (text, line, message) in cases {
        assert_eq!(error(text), (*line, (*message).to_owned()), "{text:?}");
    }
}

#[test]
fn glob_match_is_filepath_match_for_one_element() {
    for (pattern, name, want) in [
        ("*.server", "a.server", true),
        ("*.server", "a.override", false),
        ("*", "", true),
        ("a?c", "abc", true),
        ("a?c", "ac", false),
        ("[a-c]x", "bx", true),
        ("[!a-c]x", "bx", false),
        ("[!a-c]x", "dx", true),
        ("custom/*.server", "custom/x.server", true),
    ] {
        assert_eq!(glob_match(pattern, name), want, "{pattern} {name}");
    }
}
