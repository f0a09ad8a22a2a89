//! A real Prometheus (Debian's `prometheus`) scraping `tcmon serve`, and promtool on the
//! packaged alert rules.

use crate::common;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::server::{get, Served, TempFile};
use tcmon_lab::{skip_unless_root, Pair, UdpLoad};

/// A Prometheus server on a free loopback port with its own data directory, stopped on drop.
pub(crate) struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        Prometheus::start_with(target, |_| {})
    }

    /// Started on a data directory that `seed` fills first (backfilled blocks).
    pub(crate) fn start_with(
        target: SocketAddr,
        seed: impl FnOnce(&std::path::Path),
    ) -> Prometheus {
        // one data directory per server: tests run side by side
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        // A port the kernel just handed out and took back: free unless something races us.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tcmon-prometheus-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: tcmon\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        seed(&dir.join("data"));
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run prometheus (Debian package prometheus; .ci/run installs it)");
        let p = Prometheus { child, addr, dir };
        let start = Instant::now();
        while std::net::TcpStream::connect(addr).is_err()
            || get(addr, "/-/ready", &[]).status != 200
        {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "prometheus not ready"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// One instant query; the JSON `data.result` array.
    fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        self.query_at(promql, None)
    }

    /// One instant query at `time` (Unix seconds; `None`: now).
    pub(crate) fn query_at(&self, promql: &str, time: Option<f64>) -> Vec<serde_json::Value> {
        let at = time.map_or_else(String::new, |t| format!("&time={t:.3}"));
        let r = get(
            self.addr,
            &format!("/api/v1/query?query={}{at}", urlencode(promql)),
            &[],
        );
        assert_eq!(r.status, 200, "{promql}: {}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus scrapes (OpenMetrics, its preferred format) every second; `rate()` over its
/// samples gives each class's byte rate as sent, headers included, within 10%.
#[test]
fn prometheus_rate_of_class_bytes_matches_the_traffic_sent() {
    if skip_unless_root("prometheus_rate_of_class_bytes_matches_the_traffic_sent") {
        return;
    }
    let pair = Pair::create("srvprom").unwrap();
    for cmd in [
        "qdisc add root handle 1: htb default 20",
        "class add parent 1: classid 1:1 htb rate 100mbit",
        "class add parent 1:1 classid 1:10 htb rate 20mbit",
        "class add parent 1:1 classid 1:20 htb rate 20mbit",
        "filter add parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10",
    ] {
        pair.tc_a(cmd).unwrap();
    }
    // payload bytes per second; well below the classes' rates, so all of it is sent
    let offered = [("1:10", 5001, 300_000_u64), ("1:20", 5002, 100_000)];
    let _load: Vec<UdpLoad> = offered
        .iter()
        .map(|&(_, port, rate)| {
            let dst = format!("{}:{port}", Pair::ADDR_B).parse().unwrap();
            UdpLoad::start(&pair.a.name, dst, 1000, rate).unwrap()
        })
        .collect();
    // Polls four times per scrape window second so the counters move smoothly under rate().
    // 1:10 named (the dashboard shows it by name), 1:20 not (it must still be shown)
    let cfg = TempFile::new(
        "prom.toml",
        "[agent]\ninterval = \"250ms\"\n\n[names]\ntc_cls = []\nlqos_conf = \"\"\n\
         map = { \"1:10\" = \"gold\" }\n",
    );
    let s = Served::start(&[
        "--netns",
        &pair.a.name,
        "--dev",
        &pair.dev_a,
        "--config",
        cfg.path(),
    ]);
    let prom = Prometheus::start(s.addr);

    let start = Instant::now();
    let window_s = 8;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let up = prom.query("up{job=\"tcmon\"}");
        let scrapes = prom.query(&format!(
            "count_over_time(up{{job=\"tcmon\"}}[{window_s}s])"
        ));
        let n = scrapes
            .first()
            .map_or(0.0, |r| r["value"][1].as_str().unwrap().parse().unwrap());
        if up.first().is_some_and(|r| r["value"][1] == "1") && n >= f64::from(window_s) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(25),
            "too few good scrapes: {up:?} {n}"
        );
    }
    for &(class, _, payload_rate) in &offered {
        // 1000-byte UDP payloads go out as 1042-byte frames (UDP 8, IPv4 20, Ethernet 14).
        let want = payload_rate as f64 * 1042.0 / 1000.0;
        let q = format!(
            "rate(tcmon_class_bytes_total{{netns=\"{}\",device=\"{}\",handle=\"{class}\"}}[{window_s}s])",
            pair.a.name, pair.dev_a
        );
        let result = prom.query(&q);
        assert_eq!(result.len(), 1, "{q}: {result:?}");
        let got: f64 = result[0]["value"][1].as_str().unwrap().parse().unwrap();
        eprintln!("{class}: Prometheus rate {got:.0} B/s, sent {want:.0} B/s");
        assert!(
            (got - want).abs() <= want * 0.10,
            "{class}: Prometheus says {got:.0} B/s, sent {want:.0} B/s"
        );
    }
    // Prometheus took every sample of every scrape.
    let targets = get(prom.addr, "/api/v1/targets", &[]).body;
    assert!(targets.contains("\"lastError\":\"\""), "{targets}");
    // ...in OpenMetrics, which it asks for first: only that format declares `tcmon_build` an
    // info family (the 0.0.4 text has a gauge `tcmon_build_info`).
    let meta = get(
        prom.addr,
        "/api/v1/targets/metadata?metric=tcmon_build",
        &[],
    )
    .body;
    assert!(meta.contains("\"type\":\"info\""), "{meta}");

    // The dashboard's queries are valid PromQL, and those about classes find them; those
    // joining names give a named class its name and keep the classes without one, each once.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/packaging/grafana/tcmon-dashboard.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut joined = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            let q = expr
                .replace("$__rate_interval", "4s")
                .replace("$instance", ".*")
                .replace("$device", ".*");
            let result = prom.query(&q);
            if expr.contains("tcmon_class_bytes_total") {
                assert!(!result.is_empty(), "{}: {q} found nothing", panel["title"]);
            }
            if expr.contains("tcmon_class_info") {
                joined += 1;
                let of = |h: &str| -> Vec<&serde_json::Value> {
                    result
                        .iter()
                        .filter(|r| r["metric"]["handle"] == h)
                        .map(|r| &r["metric"])
                        .collect()
                };
                let (gold, plain) = (of("1:10"), of("1:20"));
                assert_eq!(gold.len(), 1, "{}: {q}: {result:?}", panel["title"]);
                assert_eq!(gold[0]["name"], "gold", "{}: {q}", panel["title"]);
                assert_eq!(plain.len(), 1, "{}: {q}: {result:?}", panel["title"]);
                assert_eq!(plain[0].get("name"), None, "{}: {q}", panel["title"]);
                // the legend names the class by its name
                if let Some(legend) = target["legendFormat"].as_str() {
                    assert!(legend.contains("{{name}}"), "{}: {legend}", panel["title"]);
                }
            }
        }
    }
    // throughput, load, delay, tokens and ctokens, borrows and lends, and the table
    assert_eq!(joined, 8, "queries joining tcmon_class_info");
}

/// The packaged alert rules are valid, their unit tests (firing and not firing on made-up
/// series) pass, and the example scrape config loads them.
#[test]
fn packaged_alert_rules_pass_promtool() {
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/prometheus/tcmon-rules.yml"
    );
    let tests = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/prometheus/tcmon-rules.test.yml"
    );
    let scrape = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/prometheus/scrape.yml"
    );
    for args in [
        ["check", "rules", rules],
        ["test", "rules", tests],
        ["check", "config", scrape],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .output()
            .expect("run promtool (Debian package prometheus; .ci/run installs it)");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
