//! A machine without clang still builds tcmon: the measurement of real packets' delay is left
//! out, the build says so (without warnings of code it left unused), and at run time it is off
//! with that reason. A clang installed afterwards is noticed by the next plain build.

use std::path::Path;
use std::process::{Command, Output};

/// `cargo test -p tcmon-sojourn --lib -- without_the_program` in a target dir of its own, with
/// `CLANG` naming `clang`.
fn build(target: &Path, clang: &Path) -> Output {
    Command::new(env!("CARGO"))
        .args([
            "test",
            "-p",
            "tcmon-sojourn",
            "--lib",
            "--",
            "without_the_program",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", target)
        .env("CLANG", clang)
        .env_remove("TCMON_NO_BPF")
        .output()
        .unwrap()
}

/// The first clang on PATH, if this machine has one.
fn installed_clang() -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("clang"))
        .find(|c| c.is_file())
}

#[test]
fn without_clang_the_measurement_is_left_out_and_says_why() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let target = tmp.join("no-clang");
    // where CLANG points: empty now, a clang in it later
    let bin = tmp.join("no-clang-bin");
    let clang = bin.join("clang");
    let _ = std::fs::remove_file(&clang);
    std::fs::create_dir_all(&bin).unwrap();
    let o = build(&target, &clang);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "tcmon is built without the eBPF queueing-delay measurement: {} not found",
            clang.display()
        )),
        "{stderr}"
    );
    // the build's only warning is that one: no code left unused by the missing program
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning"))
        .filter(|l| !l.contains("built without the eBPF"))
        .collect();
    assert!(warnings.is_empty(), "{stderr}");
    assert!(
        stdout.contains("without_the_program_start_says_why ... ok"),
        "{stdout}"
    );

    // clang installed where it was looked for: the same command builds the measurement
    let Some(real) = installed_clang() else {
        eprintln!("SKIPPED the build after clang appears: no clang on this machine");
        return;
    };
    std::os::unix::fs::symlink(&real, &clang).unwrap();
    let o = build(&target, &clang);
    let _ = std::fs::remove_file(&clang);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("built without the eBPF"), "{stderr}");
    // the test of a build without the program is not in this one
    assert!(
        !stdout.contains("without_the_program_start_says_why"),
        "{stdout}"
    );
}
