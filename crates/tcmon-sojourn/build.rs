//! Compiles the eBPF program with clang when it is there. Without clang (or with
//! `TCMON_NO_BPF=1`) tcmon is built without the measurement, says so here, and at run time
//! reports the feature off with that reason.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = "src/bpf/sojourn.bpf.c";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tcmon_bpf)");
    println!("cargo::rerun-if-changed={SOURCE}");
    println!("cargo::rerun-if-env-changed=CLANG");
    println!("cargo::rerun-if-env-changed=TCMON_NO_BPF");
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("sojourn.bpf.o");
    if env::var_os("TCMON_NO_BPF").is_some_and(|v| v != "0") {
        skip(&out, "TCMON_NO_BPF is set");
        return;
    }
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
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

fn skip(out: &PathBuf, why: &str) {
    println!("cargo::warning=tcmon is built without the eBPF queueing-delay measurement: {why}");
    let first = why.lines().next().unwrap_or(why);
    println!("cargo::rustc-env=TCMON_BPF_MISSING={first}");
    std::fs::write(out, b"").expect("write to OUT_DIR");
}
