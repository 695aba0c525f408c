//! Raw Corefiles, ConfigMaps alone, in Lists and in several documents,
//! their data keys as import files, and input that is neither.

use super::*;

const COREFILE: &str = ".:53 {\n    errors\n}\n";

fn config_map(name: &str, data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: kube-system\ndata:\n{data}")
}

fn labels(files: &ConfigMapFiles, pattern: &str) -> Vec<String> {
    files
        .glob(pattern)
        .expect("glob")
        .into_iter()
        .map(|s| s.label)
        .collect()
}

#[test]
fn a_corefile_is_read_as_it_is() {
    for text in [
        COREFILE,
        "# comment: yes\n.:53 {\n}\n",
        "example.org\nwhoami\n",
        "",
    ] {
        assert_eq!(
            read("Corefile", text),
            Ok(Input::Raw(source("Corefile", text))),
            "{text:?}"
        );
    }
}

#[test]
fn a_config_map_gives_its_corefile_and_its_other_keys_for_imports() {
    let yaml = config_map(
        "coredns",
        "  Corefile: |\n    .:53 {\n        errors\n    }\n  extra.server: |\n    x.org {\n    }\n",
    );
    let Ok(Input::ConfigMap { corefile, files }) = read("cm.yaml", &yaml) else {
        panic!("not read as a ConfigMap");
    };
    assert_eq!(corefile, source("cm.yaml[coredns:Corefile]", COREFILE));
    assert_eq!(
        labels(&files, "/etc/coredns/*.server"),
        ["cm.yaml[coredns:extra.server]"]
    );
    assert_eq!(
        labels(&files, "*"),
        ["cm.yaml[coredns:extra.server]"],
        "never the Corefile itself"
    );
}

#[test]
fn a_list_or_several_documents_give_every_config_map_s_keys() {
    let custom = config_map(
        "coredns-custom",
        "  b.server: \"b.org {\\n}\\n\"\n  a.server: \"a.org {\\n}\\n\"\n  x.override: log\n",
    );
    let main = config_map(
        "coredns",
        "  Corefile: |\n    .:53 {\n        errors\n    }\n",
    );
    let indent = |s: &str| {
        s.lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
            .replacen("  apiVersion", "- apiVersion", 1)
    };
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}{}",
        indent(&main),
        indent(&custom)
    );
    let docs = format!("{main}---\n{custom}");
    for text in [list, docs] {
        let Ok(Input::ConfigMap { corefile, files }) = read("in", &text) else {
            panic!("not read as ConfigMaps: {text}");
        };
        assert_eq!(corefile.text, COREFILE);
        assert_eq!(
            labels(&files, "custom/*.server"),
            ["in[coredns-custom:a.server]", "in[coredns-custom:b.server]"]
        );
        assert_eq!(
            files.glob("custom/x.override").expect("glob")[0].text,
            "log"
        );
    }
}

#[test]
fn yaml_without_a_corefile_or_broken_yaml_is_an_error() {
    let no_corefile = config_map("kube-dns", "  stubDomains: '{}'\n");
    assert_eq!(
        read("cm.yaml", &no_corefile),
        Err(InputError(
            "cm.yaml: no ConfigMap in it holds data.Corefile (give the coredns ConfigMap, e.g. \
             kubectl -n kube-system get configmap coredns -o yaml)"
                .to_owned()
        ))
    );
    let Err(InputError(broken)) = read(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  Corefile: [\n",
    ) else {
        panic!("broken YAML was read");
    };
    assert!(
        broken.starts_with("cm.yaml:5: not valid YAML: "),
        "{broken}"
    );
    let not_string = config_map("coredns", "  Corefile: |\n    .:53 {\n    }\n  port: 53\n");
    assert_eq!(
        read("cm.yaml", &not_string),
        Err(InputError(
            "cm.yaml: data of ConfigMap coredns holds a key or value that is not a string"
                .to_owned()
        ))
    );
}
