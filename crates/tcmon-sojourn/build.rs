//! Compiles the eBPF program with clang when it is there. Without clang (or with
//! `TCMON_NO_BPF=1`) tcmon is built without the measurement, says so here, and at run time
//! reports the feature off with that reason.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "src/bpf/sojourn.bpf.c";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tcmon_bpf)");
    println!("cargo::rerun-if-changed={SOURCE}");
    println!("cargo::rerun-if-env-changed=CLANG");
    println!("cargo::rerun-if-env-changed=TCMON_NO_BPF");
    println!("cargo::rerun-if-env-changed=PATH");
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("sojourn.bpf.o");
    if env::var_os("TCMON_NO_BPF").is_some_and(|v| v != "0") {
        skip(&out, "TCMON_NO_BPF is set");
        return;
    }
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    for path in watched(&clang) {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    let res = Command::new(&clang)
        .args([
            "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror", "-c", SOURCE, "-o",
        ])
        .arg(&out)
        .output();
    match res {
        Ok(o) if o.status.success() => println!("cargo::rustc-cfg=tcmon_bpf"),
        Ok(o) => skip(
            &out,
            &format!(
                "{clang} failed on {SOURCE}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        ),
        Err(e) => skip(&out, &format!("{clang} not found ({e}); install clang")),
    }
}

/// What to watch so that a clang installed (or upgraded) after this build is noticed: the
/// compiler found, else the existing directories it was looked for in (a directory changes
/// when a file appears in it). Never a missing path: cargo would rerun this script, and
/// rebuild the crate, on every build.
fn watched(clang: &str) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = if clang.contains('/') {
        Path::new(clang)
            .parent()
            .map(Path::to_path_buf)
            .into_iter()
            .collect()
    } else {
        env::var_os("PATH")
            .map(|p| env::split_paths(&p).collect())
            .unwrap_or_default()
    };
    let candidates = dirs
        .iter()
        .map(|d| d.join(Path::new(clang).file_name().unwrap_or_default()));
    if let Some(found) = candidates.clone().find(|c| c.is_file()) {
        return vec![found];
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

fn skip(out: &PathBuf, why: &str) {
    println!("cargo::warning=tcmon is built without the eBPF queueing-delay measurement: {why}");
    let first = why.lines().next().unwrap_or(why);
    println!("cargo::rustc-env=TCMON_BPF_MISSING={first}");
    std::fs::write(out, b"").expect("write to OUT_DIR");
}
