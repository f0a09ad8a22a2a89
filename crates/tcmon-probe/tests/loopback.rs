//! Probes, load and sink against each other on loopback (no privileges needed).

use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tcmon_probe::{
    Direction, Load, ProbeEngine, ProbeSink, ProbeSinkOptions, ProbeSpec, Reply, Target,
    TargetStats,
};

fn sink(opts: ProbeSinkOptions) -> (ProbeSink, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = Arc::clone(&log);
    let s = ProbeSink::start(opts, move |line| l.lock().unwrap().push(line.to_owned())).unwrap();
    (s, log)
}

fn loopback() -> ProbeSinkOptions {
    ProbeSinkOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..ProbeSinkOptions::default()
    }
}

fn collect(engine: &ProbeEngine, n: usize, within: Duration) -> Vec<tcmon_probe::ProbeOutcome> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match engine.outcomes().recv_timeout(left) {
            Ok(o) => out.push(o),
            Err(_) => break,
        }
    }
    out
}

#[test]
fn udp_probes_are_echoed_and_counted_lost_when_the_sink_stops() {
    let (s, _) = sink(loopback());
    let spec = ProbeSpec {
        target: Target::Udp(s.local_addr()),
        interval: Duration::from_millis(20),
        timeout: Duration::from_millis(200),
    };
    let engine = ProbeEngine::start(&[spec]).unwrap();
    let got = collect(&engine, 10, Duration::from_secs(5));
    assert_eq!(got.len(), 10);
    let mut stats = TargetStats::default();
    for o in &got {
        assert!(matches!(o.reply, Reply::Rtt { .. }), "{o:?}");
        stats.record(&o.reply);
    }
    assert!(stats.rtt_ms().unwrap().p50 < 10.0);
    drop(s);
    // Drain what was in flight, then every probe is lost.
    std::thread::sleep(Duration::from_millis(300));
    while engine.outcomes().try_recv().is_ok() {}
    let after = collect(&engine, 5, Duration::from_secs(5));
    assert_eq!(after.len(), 5);
    assert!(
        after.iter().all(|o| o.reply == Reply::Lost),
        "a stopped sink loses every probe: {after:?}"
    );
}

#[test]
fn tcp_connect_times_and_refusals() {
    let (s, _) = sink(loopback());
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let specs = [
        ProbeSpec {
            target: Target::Tcp(s.local_addr()),
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(500),
        },
        ProbeSpec {
            target: Target::Tcp(closed),
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(500),
        },
    ];
    let engine = ProbeEngine::start(&specs).unwrap();
    let got = collect(&engine, 8, Duration::from_secs(5));
    assert!(got
        .iter()
        .filter(|o| o.target == 0)
        .all(|o| matches!(o.reply, Reply::Rtt { .. })));
    assert!(got
        .iter()
        .filter(|o| o.target == 1)
        .all(|o| matches!(&o.reply, Reply::Error(e) if e.contains("refused"))));
}

#[test]
fn load_moves_data_both_ways_and_the_sink_logs_it() {
    let (s, log) = sink(loopback());
    let up = Load::start(s.local_addr(), Direction::Upload, 2, &[], Some("cubic")).unwrap();
    let down = Load::start(s.local_addr(), Direction::Download, 2, &[], Some("reno")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        up.goodput_bits_per_sec() > 1e6,
        "{}",
        up.goodput_bits_per_sec()
    );
    assert!(down.goodput_bits_per_sec() > 1e6);
    drop(up);
    drop(down);
    let deadline = Instant::now() + Duration::from_secs(3);
    while log.lock().unwrap().len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log.iter().filter(|l| l.contains(" upload ")).count(),
        2,
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|l| l.contains(" download ")).count(),
        2,
        "{log:?}"
    );
    assert!(log.iter().all(|l| l.contains("127.0.0.1:")), "who: {log:?}");
}

#[test]
fn the_sink_bounds_connections_idle_time_and_stream_length() {
    let (s, log) = sink(ProbeSinkOptions {
        max_connections: 1,
        max_stream: Duration::from_millis(400),
        idle: Duration::from_millis(200),
        ..loopback()
    });
    // Says nothing: dropped after the idle time.
    let silent = TcpStream::connect(s.local_addr()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // Over the limit while the first is open: refused.
    let _second = TcpStream::connect(s.local_addr()).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    drop(silent);
    // A download that would go on forever is cut at the stream limit.
    let down = Load::start(s.local_addr(), Direction::Download, 1, &[], None).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    drop(down);
    std::thread::sleep(Duration::from_millis(100));
    let log = log.lock().unwrap().clone();
    assert!(log.iter().any(|l| l.contains("refused")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("no hello")), "{log:?}");
    assert!(
        log.iter()
            .any(|l| l.contains("download") && l.contains("stream duration limit")),
        "{log:?}"
    );
}

#[test]
fn a_target_that_does_not_answer_times_out_per_probe() {
    // TEST-NET-1 is never routed to a host; the probe must time out, not hang.
    let spec = ProbeSpec {
        target: Target::Tcp("192.0.2.1:9".parse().unwrap()),
        interval: Duration::from_millis(100),
        timeout: Duration::from_millis(200),
    };
    let engine = ProbeEngine::start(&[spec]).unwrap();
    let t = Instant::now();
    let got = collect(&engine, 3, Duration::from_secs(3));
    assert_eq!(got.len(), 3);
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(got
        .iter()
        .all(|o| matches!(o.reply, Reply::Lost | Reply::Error(_))));
}

/// An echo that answers every probe twice and swaps each pair of answers: duplicates and
/// reordering are counted from the sequence numbers.
#[test]
fn udp_duplicates_and_reordering_are_counted() {
    let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_echo = Arc::clone(&stop);
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut held: Option<(Vec<u8>, std::net::SocketAddr)> = None;
        while !stop_echo.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, peer)) = server.recv_from(&mut buf) else {
                continue;
            };
            let answer = |b: &[u8], to| {
                server.send_to(b, to).unwrap();
                server.send_to(b, to).unwrap();
            };
            match held.take() {
                None => held = Some((buf[..n].to_vec(), peer)),
                Some((first, to)) => {
                    answer(&buf[..n], peer);
                    answer(&first, to);
                }
            }
        }
    });
    let spec = ProbeSpec {
        target: Target::Udp(addr),
        interval: Duration::from_millis(20),
        timeout: Duration::from_millis(500),
    };
    let engine = ProbeEngine::start(&[spec]).unwrap();
    let got = collect(&engine, 20, Duration::from_secs(5));
    drop(engine);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    echo.join().unwrap();
    let mut stats = TargetStats::default();
    for o in &got {
        stats.record(&o.reply);
    }
    assert!(stats.received >= 6, "{got:?}");
    assert_eq!(
        stats.duplicates, stats.received,
        "every answer came twice: {got:?}"
    );
    // The earlier probe of each pair is answered after the later one.
    assert_eq!(stats.reordered * 2, stats.received, "{got:?}");
}
