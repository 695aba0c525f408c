//! `deploy/render.sh`, `scripts/build-release.sh` and the Dockerfile.

use super::support::*;
use super::*;

// ---------------------------------------------------------------------------
// Tests: render script and the kustomize directories

/// The Service's cluster IP of a flavour as shipped.
fn default_server_ip(flavour: &str) -> &'static str {
    if flavour == "legacy" {
        "10.0.0.10" // 1.2's default
    } else {
        "10.96.0.10" // kubeadm's default
    }
}

/// `render.sh` is a thin wrapper: with the shipped settings it prints
/// exactly what `kubectl kustomize deploy/<flavour>` prints; a missing
/// IMAGE_PREFIX or DNS_SERVER_IP, or a bad value, is refused with its name
/// and nothing printed.
#[test]
pub(crate) fn render_script_is_kustomize_with_the_settings_and_refuses_bad_values() {
    for flavour in ALL_FLAVOURS {
        let out = render_sh(
            flavour,
            &[
                ("DNS_SERVER_IP", default_server_ip(flavour)),
                ("IMAGE_PREFIX", TEST_IMAGE_PREFIX),
            ],
        );
        assert!(
            out.status.success(),
            "render.sh {flavour}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).expect("UTF-8");
        assert_eq!(
            printed,
            kustomized(&format!("deploy/{flavour}")),
            "render.sh {flavour} with the shipped settings"
        );
    }

    let ok = [
        ("DNS_SERVER_IP", SERVER_IP),
        ("IMAGE_PREFIX", "reg.example"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut env: Vec<(&str, &str)> = ok.to_vec();
        for (k, v) in extra {
            env.retain(|(name, _)| name != k);
            env.push((k, v));
        }
        env
    };
    for (flavour, env, named) in [
        (
            "kubernetes",
            vec![("DNS_SERVER_IP", SERVER_IP)],
            "IMAGE_PREFIX is required",
        ),
        (
            "kubernetes",
            vec![("IMAGE_PREFIX", "reg.example")],
            "DNS_SERVER_IP is required",
        ),
        (
            "kubernetes",
            with(&[("DNS_SERVER_IP", "10.0.0.10/8")]),
            "DNS_SERVER_IP",
        ),
        (
            "legacy",
            with(&[("DNS_DOMAIN", "cluster.local.")]),
            "DNS_DOMAIN",
        ),
        ("legacy", with(&[("DNS_DOMAIN", "a/b")]), "DNS_DOMAIN"),
        ("legacy", with(&[("DNS_REPLICAS", "two")]), "DNS_REPLICAS"),
        ("legacy", with(&[("DNS_REPLICAS", "0")]), "DNS_REPLICAS"),
        (
            "kubernetes",
            with(&[("DNS_REPLICAS", "21")]),
            "above the autoscaler's max of 20",
        ),
        ("modern", ok.to_vec(), "flavour: `kubernetes`"),
        (
            "kubernetes",
            with(&[("IMAGE_PREFIX", "reg.example/")]),
            "IMAGE_PREFIX",
        ),
        (
            "kubernetes",
            with(&[("IMAGE_PREFIX", "Reg.example")]),
            "IMAGE_PREFIX",
        ),
        (
            "kubernetes",
            with(&[("IMAGE_PREFIX", "reg#x")]),
            "IMAGE_PREFIX",
        ),
    ] {
        let out = render_sh(flavour, &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "render.sh {flavour} {env:?} succeeded"
        );
        assert!(
            out.stdout.is_empty(),
            "render.sh {flavour} {env:?} printed output"
        );
        assert!(err.contains(named), "render.sh {flavour} {env:?}: {err}");
    }
}

/// Without DNS_REPLICAS the shipped counts stay: one legacy pod, at least
/// two modern ones; with it they move.
#[test]
fn render_script_replicas_are_optional() {
    for flavour in ALL_FLAVOURS {
        let env = [
            ("DNS_SERVER_IP", SERVER_IP),
            ("IMAGE_PREFIX", "reg.example"),
        ];
        let out = render_sh(flavour, &env);
        let printed = String::from_utf8(out.stdout).expect("UTF-8");
        if flavour == "legacy" {
            assert!(printed.contains("\n  replicas: 1\n"), "{flavour}");
            assert!(rendered_stream(flavour).contains(&format!("\n  replicas: {REPLICAS}\n")));
        } else {
            assert!(printed.contains("\"min\":2,"), "{flavour}");
            assert!(rendered_stream(flavour).contains(&format!("\"min\":{REPLICAS},")));
        }
    }
}

/// `kubectl kustomize` renders every flavour and the example overlay as
/// they are, and the result passes the checks the rendered manifests pass;
/// every image of ours is a `localhost/` name until an overlay moves it.
#[test]
fn every_kustomize_directory_renders_and_is_wired() {
    for flavour in ALL_FLAVOURS {
        let stream = kustomized(&format!("deploy/{flavour}"));
        let ip = default_server_ip(flavour);
        let m = Manifests::rendered_with(flavour, "cluster.local", ip, &stream);
        if flavour == "shared-etcd" {
            // Four Services (the members'); shared.rs checks the wiring.
            assert!(
                stream.contains(&format!("  clusterIP: {ip}\n")),
                "{flavour}"
            );
        } else {
            check_service(&m);
            check_pod_wiring(&m);
        }
        for line in stream.lines() {
            let Some(image) = line.trim().strip_prefix("image: ") else {
                continue;
            };
            assert!(
                image.starts_with("localhost/kube-dns-rs/") || UPSTREAM_IMAGES.contains(&image),
                "deploy/{flavour}: {image} could be pulled from someone else's registry"
            );
        }
        for file in manifest_files(flavour) {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(!text.contains("$DNS_"), "{}: a placeholder", file.display());
        }
    }
    let example = kustomized("deploy/example");
    let m = Manifests::rendered_with("kubernetes", "cluster.local", "10.96.0.10", &example);
    check_pod_wiring(&m);
    check_service(&m);
    assert!(example.contains("image: registry.example.com/dns/skydns:0.1.0\n"));
}

/// `IMAGE_PREFIX` moves our three images, and only them, to the registry
/// `deploy/build-images.sh` pushes to: the output is the tested one with
/// `image: kube-dns-rs/` replaced; the upstream images stay.
#[test]
fn render_script_image_prefix_moves_our_images_only() {
    let prefix = "registry.example.com:5000/team/dns";
    for flavour in ALL_FLAVOURS {
        let out = render_sh(
            flavour,
            &[
                ("DNS_DOMAIN", DOMAIN),
                ("DNS_SERVER_IP", SERVER_IP),
                ("DNS_REPLICAS", REPLICAS),
                ("IMAGE_PREFIX", prefix),
            ],
        );
        assert!(
            out.status.success(),
            "render.sh {flavour}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).expect("UTF-8");
        let want = rendered_stream(flavour).replace(
            &format!("image: {TEST_IMAGE_PREFIX}/"),
            &format!("image: {prefix}/"),
        );
        assert_eq!(printed, want, "render.sh {flavour} with IMAGE_PREFIX");
        let images: BTreeSet<&str> = printed
            .lines()
            .filter_map(|l| l.trim().strip_prefix("image: "))
            .collect();
        for image in &images {
            assert!(
                image.starts_with(&format!("{prefix}/")) || UPSTREAM_IMAGES.contains(image),
                "deploy/{flavour}: {image} not moved"
            );
        }
        assert!(images.len() > 1, "deploy/{flavour}: {images:?}");
    }
}

/// `deploy/build-images.sh PREFIX` builds every line of `deploy/images.txt`
/// at its Dockerfile stage and pushes it under the name `render.sh` gives it
/// with the same `IMAGE_PREFIX`; `--dry-run` prints those commands.
#[test]
fn build_images_script_builds_and_pushes_what_render_names() {
    let prefix = "registry.example.com/dns";
    let run = |args: &[&str]| {
        Command::new("bash")
            .arg(repo_root().join("deploy/build-images.sh"))
            .args(args)
            .output()
            .expect("running deploy/build-images.sh")
    };
    let out = run(&["--dry-run", "--tool", "docker", prefix]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("UTF-8");
    // The binaries for both architectures, then one multi-arch image each.
    let mut want = String::from(
        "scripts/build-release.sh --target x86_64-unknown-linux-musl --out target/images/amd64\n\
         scripts/build-release.sh --target aarch64-unknown-linux-musl --out target/images/arm64\n",
    );
    for line in our_images() {
        let short = line
            .name
            .strip_prefix("localhost/kube-dns-rs/")
            .expect("localhost/kube-dns-rs/ name");
        let target = format!("{prefix}/{short}:{}", line.tag);
        want.push_str(&format!(
            "docker buildx build --platform linux/amd64,linux/arm64 --build-arg BINARIES=prebuilt \
             --target {} -t {target} --push .\n",
            line.stage
        ));
    }
    assert_eq!(printed, want);
    // The names pushed are the ones the rendered manifests pull.
    let rendered = render_sh(
        "kubernetes",
        &[("DNS_SERVER_IP", SERVER_IP), ("IMAGE_PREFIX", prefix)],
    );
    let rendered = String::from_utf8(rendered.stdout).expect("UTF-8");
    let pushed: Vec<&str> = printed
        .lines()
        .filter_map(|l| l.strip_suffix(" --push ."))
        .filter_map(|l| l.split(" -t ").nth(1))
        .collect();
    assert_eq!(pushed.len(), our_images().len(), "{printed}");
    for pushed in pushed {
        assert!(
            rendered.contains(&format!("image: {pushed}\n")),
            "the manifests do not pull {pushed}"
        );
    }

    let out = run(&["--dry-run", "--no-push", "--tool", "podman", prefix]);
    let printed = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(out.status.success());
    let builds: Vec<&str> = printed
        .lines()
        .filter(|l| l.starts_with("podman build --platform linux/amd64,linux/arm64 "))
        .collect();
    assert_eq!(builds.len(), our_images().len(), "{printed}");
    assert!(!printed.contains("push"), "{printed}");

    // An OCI archive per image, for one platform.
    let out = run(&[
        "--dry-run",
        "--tool",
        "podman",
        "--platform",
        "linux/arm64",
        "--oci",
        "/tmp/oci",
        prefix,
    ]);
    let printed = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(printed.starts_with(
        "scripts/build-release.sh --target aarch64-unknown-linux-musl --out target/images/arm64\n"
    ));
    assert!(printed.contains(&format!(
        "podman manifest push --all {prefix}/skydns:0.1.0 oci-archive:/tmp/oci/skydns.tar\n"
    )));
    assert!(!printed.contains("x86_64"), "{printed}");

    for bad in [
        &[][..],
        &["--dry-run", "reg.example/"],
        &["--dry-run", "--tool", "kaniko", prefix],
        &["--dry-run", "--platform", "linux/s390x", prefix],
        &["--dry-run", "--tool", "docker", "--no-push", prefix],
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?} was accepted");
        assert!(out.stdout.is_empty(), "{bad:?} printed commands");
    }
}

// ---------------------------------------------------------------------------
// Tests: Dockerfile and the release build

/// Dockerfile instructions with their continuation lines joined, comments
/// and blank lines dropped.
pub(crate) fn dockerfile_instructions() -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    assert!(current.is_empty(), "Dockerfile ends in a continuation");
    out
}

/// Stage name → its instructions after `FROM`, plus each stage's base image.
pub(crate) fn dockerfile_stages() -> BTreeMap<String, (String, Vec<String>)> {
    let mut stages = BTreeMap::new();
    let mut current: Option<String> = None;
    for ins in dockerfile_instructions() {
        let words: Vec<&str> = ins.split_whitespace().collect();
        if words[0].eq_ignore_ascii_case("FROM") {
            assert!(
                words.len() == 4 && words[2].eq_ignore_ascii_case("AS"),
                "every stage is named: {ins}"
            );
            let name = words[3].to_owned();
            stages.insert(name.clone(), (words[1].to_owned(), Vec::new()));
            current = Some(name);
        } else if let Some(name) = &current {
            stages.get_mut(name).unwrap().1.push(ins);
        }
    }
    stages
}

/// `cargo metadata`: every `bin` target of the workspace → its package, and
/// the workspace's rust-version.
pub(crate) fn workspace_bins() -> (BTreeMap<String, String>, String) {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let mut bins = BTreeMap::new();
    let mut versions = BTreeSet::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap().to_owned();
        if let Some(v) = package["rust_version"].as_str() {
            versions.insert(v.to_owned());
        }
        for target in package["targets"].as_array().unwrap() {
            let is_bin = target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "bin");
            if is_bin {
                bins.insert(target["name"].as_str().unwrap().to_owned(), name.clone());
            }
        }
    }
    assert_eq!(
        versions.len(),
        1,
        "one workspace rust-version: {versions:?}"
    );
    (bins, versions.into_iter().next().unwrap())
}

#[test]
pub(crate) fn release_script_builds_exactly_the_three_binaries() {
    let script = read("scripts/build-release.sh");
    let cargo_lines: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("cargo ") || l.contains(" cargo "))
        .filter(|l| !l.starts_with('#'))
        .collect();
    // The host's build, and the cross build for --target: the same flags
    // and binaries, nothing else (no --features that CI does not build).
    assert_eq!(
        cargo_lines,
        [
            r#"cargo build --locked --release "${bins[@]}""#,
            r#"cargo zigbuild --locked --release --target "$target" "${bins[@]}""#,
        ],
        "the cargo commands"
    );
    let bins_line = script
        .lines()
        .find(|l| l.starts_with("bins=("))
        .expect("a bins=(...) array");
    let words: Vec<&str> = bins_line
        .trim_start_matches("bins=(")
        .trim_end_matches(')')
        .split_whitespace()
        .collect();
    let mut bins = BTreeSet::new();
    let mut rest = words.iter();
    while let Some(w) = rest.next() {
        assert_eq!(*w, "--bin", "{bins_line}");
        bins.insert(rest.next().expect("--bin NAME").to_string());
    }
    let want: BTreeSet<String> = our_images().into_iter().map(|i| i.binary).collect();
    assert_eq!(bins, want, "the binaries of the three images");
    // The same three are the ones copied out.
    assert!(
        script.contains("for bin in skydns kube2sky exec-healthz; do"),
        "the --out loop copies the same binaries"
    );

    // Each is a bin target of the expected workspace crate (CI's
    // `cargo test --workspace` builds every workspace bin).
    let (targets, _) = workspace_bins();
    for ImageLine { binary: bin, .. } in our_images() {
        let package = crate_of(&bin);
        assert_eq!(
            targets.get(&bin).map(String::as_str),
            Some(package),
            "{bin} is a [[bin]] of crate {package}"
        );
    }
}

#[test]
pub(crate) fn dockerfile_builds_with_the_release_script_and_matches_the_manifests() {
    let stages = dockerfile_stages();
    let instructions = dockerfile_instructions();

    // The build: only scripts/build-release.sh runs cargo.
    let build_runs: Vec<&String> = instructions
        .iter()
        .filter(|i| i.starts_with("RUN") && i.contains("build-release.sh"))
        .collect();
    assert_eq!(build_runs.len(), 1, "one RUN of the release script");
    assert!(
        build_runs[0].contains("scripts/build-release.sh --out /out"),
        "{}",
        build_runs[0]
    );
    assert!(
        stages["build-source"].1.contains(build_runs[0]),
        "the release script runs in the build-source stage"
    );
    // The other source of binaries: deploy/build-images.sh's cross-compiled
    // ones, per architecture; `build` is whichever BINARIES names.
    assert_eq!(
        stages["build-prebuilt"],
        (
            "scratch".to_owned(),
            vec![
                "ARG TARGETARCH".to_owned(),
                "COPY target/images/${TARGETARCH}/ /out/".to_owned()
            ]
        )
    );
    assert_eq!(stages["build"], ("build-${BINARIES}".to_owned(), vec![]));
    assert!(instructions.contains(&"ARG BINARIES=source".to_owned()));
    for ins in &instructions {
        assert!(
            !ins.split_whitespace().any(|w| w == "cargo" || w == "rustc"),
            "cargo runs only through scripts/build-release.sh: {ins}"
        );
    }

    // The toolchain image is the workspace's declared rust-version.
    let (_, rust_version) = workspace_bins();
    assert!(
        instructions.contains(&format!("ARG RUST_VERSION={rust_version}")),
        "Dockerfile's RUST_VERSION is the workspace rust-version {rust_version}"
    );
    assert!(stages["build-source"].0.starts_with("rust:${RUST_VERSION}"));

    // One runtime stage per line of deploy/images.txt: its base, binary,
    // user, ports and entrypoint (deploy/podman/images.sh builds the same).
    for line in our_images() {
        let ImageLine {
            name,
            stage,
            binary: bin,
            ..
        } = &line;
        let (base, body) = stages
            .get(stage)
            .unwrap_or_else(|| panic!("no Dockerfile stage {stage} for {name}"));
        let want_base = match line.base.as_str() {
            "static" => "gcr.io/distroless/static-debian12",
            "busybox" => "busybox:1.36.1-musl",
            other => panic!("deploy/images.txt: unknown base {other} for {name}"),
        };
        assert_eq!(base, want_base, "stage {stage}");
        let runtime: Vec<&String> = body.iter().collect();
        let want = [
            format!("COPY --from=build /out/{bin} /{bin}"),
            format!("USER {}", line.user),
            format!("EXPOSE {}", line.ports.join(" ")),
            format!("ENTRYPOINT [\"/{bin}\"]"),
        ];
        assert_eq!(runtime, want.iter().collect::<Vec<_>>(), "stage {stage}");
        assert!(!line.user.starts_with("0:"), "{name} runs as non-root");
    }
    // Every image the manifests use is built by a stage, and
    // deploy/build-images.sh builds it so (docs/install.md runs that script).
    let script = read("deploy/build-images.sh");
    assert!(
        script.contains(
            r#"common=(--platform "$platforms" --build-arg BINARIES=prebuilt --target "$stage")"#
        ),
        "deploy/build-images.sh builds each image at its stage"
    );
    for flavour in FLAVOURS {
        let m = Manifests::load(flavour);
        let (_, pod) = m.pod();
        for c in &pod.containers {
            let image = c.image.clone().unwrap_or_default();
            if image == ETCD_IMAGE {
                continue;
            }
            let (name, tag) = image.rsplit_once(':').expect("tagged image");
            let images = our_images();
            let line = images
                .iter()
                .find(|i| i.name == name)
                .unwrap_or_else(|| panic!("deploy/{flavour}: unknown image {image}"));
            assert_eq!(tag, IMAGE_TAG);
            assert_eq!(line.tag, IMAGE_TAG, "deploy/images.txt tags {name}");
            assert!(stages.contains_key(&line.stage), "{image}: no stage");
        }
    }

    let ignore: Vec<String> = read(".dockerignore")
        .lines()
        .map(|l| l.trim().to_owned())
        .collect();
    let at = |line: &str| ignore.iter().position(|l| l == line);
    assert!(
        at("target/*").is_some() && at("target/*") < at("!target/images/"),
        "target/ stays out of the context but for the prebuilt binaries"
    );
}
