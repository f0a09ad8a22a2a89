//! The packaged examples use metrics tcmon exports, under the names it exports them.

use std::collections::BTreeSet;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every `tcmon_...` identifier in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("tcmon_") {
        // not part of a longer identifier (`job="tcmon"` is not a metric)
        let before = rest[..i].chars().next_back();
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    out
}

/// The sample names of the golden 0.0.4 exposition, which has every family.
fn exported() -> BTreeSet<String> {
    read("crates/tcmon-export/src/snapshots/tcmon_export__tests__prometheus_text_golden.snap")
        .lines()
        .filter(|l| l.starts_with("tcmon_"))
        .map(|l| l.split(['{', ' ']).next().unwrap().to_owned())
        .collect()
}

#[test]
fn dashboard_and_rules_use_only_exported_metrics() {
    let exported = exported();
    assert!(exported.len() > 50, "golden file read: {}", exported.len());
    let dashboard = read("packaging/grafana/tcmon-dashboard.json");
    let json: serde_json::Value = serde_json::from_str(&dashboard).expect("dashboard is JSON");
    let exprs: Vec<&str> = json["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["targets"].as_array())
        .flatten()
        .map(|t| t["expr"].as_str().unwrap())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    for (file, text) in [
        ("dashboard", exprs.join("\n")),
        ("rules", read("packaging/prometheus/tcmon-rules.yml")),
    ] {
        let used = metric_names(&text);
        assert!(!used.is_empty(), "{file}");
        let unknown: Vec<_> = used.difference(&exported).collect();
        assert!(
            unknown.is_empty(),
            "{file} uses metrics tcmon does not export: {unknown:?}"
        );
    }
}

#[test]
fn the_systemd_unit_runs_unprivileged_and_the_deb_ships_it() {
    let unit = read("packaging/systemd/tcmon.service");
    for line in [
        "DynamicUser=yes",
        "CapabilityBoundingSet=CAP_NET_RAW",
        "AmbientCapabilities=CAP_NET_RAW",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "ExecStart=/usr/bin/tcmon serve --config /etc/tcmon/config.toml",
    ] {
        assert!(unit.lines().any(|l| l == line), "unit lacks {line}");
    }
    assert!(!unit.contains("User=root"));
    let cargo: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    let deb = &cargo["package"]["metadata"]["deb"];
    assert_eq!(
        deb["systemd-units"]["unit-scripts"].as_str(),
        Some("packaging/systemd")
    );
    for asset in deb["assets"].as_array().unwrap() {
        let src = asset[0].as_str().unwrap();
        // a glob (`packaging/man/*.1`, `docs/guide/*.md`) matches at least one file
        if let Some((dir, suffix)) = src.split_once("/*") {
            let matched = std::fs::read_dir(std::path::Path::new(ROOT).join(dir)).map_or(0, |d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
                    .count()
            });
            assert!(matched > 0, "deb asset {src}: no such files");
        } else if !src.starts_with("target/") {
            assert!(
                std::path::Path::new(ROOT).join(src).exists(),
                "deb asset {src} missing"
            );
        }
    }
}

/// systemd itself checks the unit (syntax, directives it knows, the binary) and rates its
/// sandbox. PID 1 here is not systemd, so this is as close to running it as these machines get.
#[test]
fn systemd_accepts_the_unit_and_rates_its_sandbox_ok() {
    let dir = std::env::temp_dir().join(format!("tcmon-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unit = dir.join("tcmon.service");
    let text = read("packaging/systemd/tcmon.service")
        .replace("/usr/bin/tcmon", env!("CARGO_BIN_EXE_tcmon"));
    std::fs::write(&unit, text).unwrap();
    let analyze = |args: &[&str]| {
        let out = std::process::Command::new("systemd-analyze")
            .args(args)
            .arg(&unit)
            .output()
            .unwrap_or_else(|e| {
                panic!("systemd-analyze: {e} (install the Debian package systemd; .ci/run does)")
            });
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, said) = analyze(&["verify"]);
    let (_, security) = analyze(&["security", "--offline=yes", "--no-pager"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        ok && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
    // "Overall exposure level for tcmon.service: 1.6 OK": 0 is fully locked down, 10 is none.
    let exposure: f64 = security
        .lines()
        .find_map(|l| l.split("exposure level for tcmon.service: ").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in: {security}"));
    assert!(exposure <= 2.0, "exposure {exposure}: {security}");
}

/// `cargo deb` (cargo-deb, which `.ci/run` installs) builds the package from this build's
/// binary: the files where the unit and the docs say, the config a conffile, the systemd
/// maintainer scripts (daemon-reload; the service neither enabled nor started), a libc
/// dependency, and a binary that runs.
#[test]
fn the_debian_package_has_its_files_scripts_and_a_binary_that_runs() {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("tcmon-deb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // `--no-build` packages target/release/tcmon: a target dir holding this build's binary
    std::fs::create_dir_all(dir.join("release")).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_tcmon"), dir.join("release/tcmon")).unwrap();
    let deb = dir.join("tcmon.deb");
    let out = Command::new("cargo")
        .args(["deb", "--no-build", "--strip", "-o"])
        .arg(&deb)
        .env("CARGO_TARGET_DIR", &dir)
        .current_dir(ROOT)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo deb (install it with `cargo install cargo-deb`, as .ci/run does): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dpkg = |args: &[&str]| {
        let o = Command::new("dpkg-deb")
            .args(args)
            .output()
            .expect("dpkg-deb");
        assert!(o.status.success(), "dpkg-deb {args:?}: {o:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    let deb = deb.to_str().unwrap();
    let files = dpkg(&["-c", deb]);
    for f in [
        "./usr/bin/tcmon",
        "./usr/lib/systemd/system/tcmon.service",
        "./etc/tcmon/config.toml",
        "./usr/share/doc/tcmon/README.md",
        "./usr/share/doc/tcmon/CHANGELOG.md",
        "./usr/share/doc/tcmon/docs/README.md",
        "./usr/share/doc/tcmon/docs/guide/check.md",
        "./usr/share/doc/tcmon/docs/reference/findings.md",
        "./usr/share/doc/tcmon/examples/prometheus/tcmon-rules.yml",
        "./usr/share/doc/tcmon/examples/grafana/tcmon-dashboard.json",
        "./usr/share/man/man1/tcmon.1",
        "./usr/share/man/man1/tcmon-check.1",
        "./usr/share/man/man1/tcmon-lab-up.1",
        "./usr/share/bash-completion/completions/tcmon",
        "./usr/share/zsh/vendor-completions/_tcmon",
        "./usr/share/fish/vendor_completions.d/tcmon.fish",
    ] {
        assert!(files.contains(f), "{f} not in the package:\n{files}");
    }
    assert!(
        !files.contains("/docs/dev/"),
        "developer docs are not shipped:\n{files}"
    );
    assert!(dpkg(&["-f", deb, "Depends"]).contains("libc6"));
    let ctl = dir.join("control");
    dpkg(&["-e", deb, ctl.to_str().unwrap()]);
    let control = |name: &str| std::fs::read_to_string(ctl.join(name)).unwrap_or_default();
    assert_eq!(control("conffiles").trim(), "/etc/tcmon/config.toml");
    let postinst = control("postinst");
    assert!(postinst.contains("daemon-reload"), "{postinst}");
    assert!(!postinst.contains("deb-systemd-invoke start"), "{postinst}");
    assert!(control("postrm").contains("deb-systemd-helper purge"));
    let root = dir.join("root");
    dpkg(&["-x", deb, root.to_str().unwrap()]);
    let v = Command::new(root.join("usr/bin/tcmon"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(v.status.success() && String::from_utf8_lossy(&v.stdout).starts_with("tcmon "));
    // `man tcmon check` finds and renders the installed page
    let page = Command::new("man")
        .arg("-M")
        .arg(root.join("usr/share/man"))
        .args(["tcmon", "check"])
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80")
        .output()
        .expect("man (Debian package man-db)");
    // man justifies lines, widening the spaces between words: compared with single spaces
    let text = String::from_utf8_lossy(&page.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(page.status.success(), "man: {page:?}");
    assert!(
        text.contains("tcmon check") && text.contains("--fix-script"),
        "{text}"
    );
    // the installed bash completion completes the commands
    let completion = root.join("usr/share/bash-completion/completions/tcmon");
    let words = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(tcmon ch); COMP_CWORD=1; _tcmon tcmon ch tcmon; echo ${{COMPREPLY[@]}}",
            completion.display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&words.stdout).trim(),
        "check",
        "{words:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The man pages and completions under packaging/ are what the CLI generates now
/// (packaging/generate rewrites them).
#[test]
fn packaged_man_pages_and_completions_are_current() {
    use std::process::Command;
    let tcmon = env!("CARGO_BIN_EXE_tcmon");
    let dir = std::env::temp_dir().join(format!("tcmon-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(tcmon)
        .arg("man")
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let mut generated: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    generated.sort();
    let mut packaged: Vec<String> = std::fs::read_dir(format!("{ROOT}/packaging/man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    packaged.sort();
    assert_eq!(generated, packaged, "run packaging/generate");
    for page in &generated {
        assert_eq!(
            std::fs::read(dir.join(page)).unwrap(),
            std::fs::read(format!("{ROOT}/packaging/man/{page}")).unwrap(),
            "{page} is stale: run packaging/generate"
        );
    }
    for (shell, file) in [
        ("bash", "tcmon.bash"),
        ("zsh", "_tcmon"),
        ("fish", "tcmon.fish"),
    ] {
        let o = Command::new(tcmon)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(o.status.success());
        assert_eq!(
            o.stdout,
            std::fs::read(format!("{ROOT}/packaging/completions/{file}")).unwrap(),
            "{file} is stale: run packaging/generate"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
