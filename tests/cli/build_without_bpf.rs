//! A machine without clang still builds tcmon: the measurement of real packets' delay is left
//! out, the build says so, and at run time it is off with that reason.

use std::process::Command;

#[test]
fn without_clang_the_measurement_is_left_out_and_says_why() {
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-clang");
    let o = Command::new(env!("CARGO"))
        .args([
            "test",
            "-p",
            "tcmon-sojourn",
            "--lib",
            "--",
            "without_the_program",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &target)
        .env("CLANG", "/nonexistent/clang")
        .env_remove("TCMON_NO_BPF")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "tcmon is built without the eBPF queueing-delay measurement: /nonexistent/clang not found"
        ),
        "{stderr}"
    );
    assert!(
        stdout.contains("without_the_program_start_says_why ... ok"),
        "{stdout}"
    );
}
