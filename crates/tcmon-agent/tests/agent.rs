//! The agent against a real kernel: states follow the tree, rates and history fill in, pause
//! holds, a vanished interface is survived.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tcmon_agent::{Agent, AgentOptions};
use tcmon_core::rates::ObjectKey;
use tcmon_core::Handle;
use tcmon_lab::UdpLoad;
use tcmon_lab::{skip_unless_root, Pair};

fn wait_for(agent: &Agent, what: &str, ok: impl Fn(&tcmon_agent::State) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if ok(&agent.state()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}: {:?}", agent.state());
}

#[test]
fn agent_polls_rates_history_pause_and_vanished_interfaces() {
    if skip_unless_root("agent_polls_rates_history_pause_and_vanished_interfaces") {
        return;
    }
    let pair = Pair::create("agent").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 8mbit")
        .unwrap();
    let agent = Agent::start(AgentOptions {
        netns: Some(pair.a.name.clone()),
        interval: Duration::from_millis(200),
        ..AgentOptions::default()
    })
    .unwrap();
    let first = agent.state();
    assert!(first.rates.is_none(), "one poll has no rates yet");
    assert!(first
        .findings
        .iter()
        .any(|f| f.code == "queue-too-deep" && f.object == "1:10"));

    let dst: SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    let _load = UdpLoad::start(&pair.a.name, dst, 1000, 250_000).unwrap();
    wait_for(&agent, "a 2 Mbit rate on 1:10", |s| {
        let Some(r) = &s.rates else { return false };
        let i = s.snapshot.interface("veth0").unwrap();
        let c = i.class(Handle::new(1, 0x10)).unwrap();
        r.class(i, c)
            .and_then(|r| r.bits_per_sec)
            .is_some_and(|b| (1.6e6..2.4e6).contains(&b))
    });
    let s = agent.state();
    let i = s.snapshot.interface("veth0").unwrap();
    let key = ObjectKey::class(i, i.class(Handle::new(1, 0x10)).unwrap());
    assert!(!agent.history(&key).is_empty());

    agent.set_paused(true);
    wait_for(&agent, "paused", |s| s.paused);
    let polls = agent.state().polls_total;
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(agent.state().polls_total, polls, "no polls while paused");
    agent.set_paused(false);
    wait_for(&agent, "polling again", |s| s.polls_total > polls + 1);

    // The interface goes away under the agent: it keeps polling and says so.
    pair.a.ip(&["link", "del", "veth0"]).unwrap();
    wait_for(&agent, "veth0 gone", |s| {
        s.snapshot.interface("veth0").is_none()
    });
    let polls = agent.state().polls_total;
    wait_for(&agent, "still polling", |s| s.polls_total > polls + 2);
}

/// The agent keeps configuration findings between polls; a change to the tree must still show
/// on the next poll, and traffic findings must follow the counters.
#[test]
fn findings_follow_tree_changes_between_polls() {
    if skip_unless_root("findings_follow_tree_changes_between_polls") {
        return;
    }
    let pair = Pair::create("agentcfg").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 2mbit")
        .unwrap();
    let agent = Agent::start(AgentOptions {
        netns: Some(pair.a.name.clone()),
        interval: Duration::from_millis(200),
        history_len: 0,
        ..AgentOptions::default()
    })
    .unwrap();
    let deep = |s: &tcmon_agent::State| {
        s.findings
            .iter()
            .any(|f| f.code == "queue-too-deep" && f.object == "1:10")
    };
    assert!(deep(&agent.state()));
    // same tree for a few polls: the findings stay
    let polls = agent.state().polls_total;
    wait_for(&agent, "three more polls", |s| s.polls_total >= polls + 3);
    assert!(deep(&agent.state()));
    // where the poll's time went
    let s = agent.state();
    assert_eq!(s.steps.read_ns, s.snapshot.poll_duration_ns);
    assert!(
        s.steps.read_ns > 0 && s.steps.rates_ns > 0 && s.steps.diagnosis_ns > 0,
        "{:?}",
        s.steps
    );
    // a short FIFO under the class: gone at the next poll
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 10")
        .unwrap();
    wait_for(&agent, "queue-too-deep gone", |s| !deep(s));
    // the class slowed down so that 10 packets are a long queue again
    pair.tc_a("class change parent 1: classid 1:10 htb rate 64kbit")
        .unwrap();
    wait_for(&agent, "queue-too-deep back at 64 kbit", |s| {
        s.findings
            .iter()
            .any(|f| f.code == "queue-too-deep" && f.object == "10:")
    });
    // traffic rules still run on every poll: without its default class, packets pass
    // through the direct queue
    pair.tc_a("class del parent 1: classid 1:10").unwrap();
    let dst: SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    let _load = UdpLoad::start(&pair.a.name, dst, 1000, 250_000).unwrap();
    wait_for(&agent, "unclassified traffic flagged critical", |s| {
        s.findings.iter().any(|f| {
            f.code == "htb-default-class-missing" && f.severity == tcmon_diag::Severity::Critical
        })
    });
}

#[test]
fn continuous_probes_run_in_the_agents_namespace_and_track_the_queue() {
    if skip_unless_root("continuous_probes_run_in_the_agents_namespace_and_track_the_queue") {
        return;
    }
    let pair = Pair::create("agprobe").unwrap();
    // 1 Mbit with the default FIFO: a 125 kB/s UDP load over the rate builds a queue.
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 1mbit")
        .unwrap();
    let agent = Agent::start(AgentOptions {
        netns: Some(pair.a.name.clone()),
        interval: Duration::from_millis(200),
        probes: Some(tcmon_probe::ContinuousOptions {
            targets: vec![Pair::ADDR_B.parse().unwrap()],
            interval: Duration::from_millis(50),
            timeout: Duration::from_secs(3),
            recent: 10,
            ..tcmon_probe::ContinuousOptions::default()
        }),
        ..AgentOptions::default()
    })
    .unwrap();
    // Only reachable from inside the pair's namespace: answers prove where the probes run.
    wait_for(&agent, "an idle baseline", |s| {
        s.probes
            .first()
            .is_some_and(|p| p.received_total >= 10 && p.baseline_ms.is_some_and(|b| b < 5.0))
    });
    let dst: SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    let _load = UdpLoad::start(&pair.a.name, dst, 1000, 250_000).unwrap();
    wait_for(&agent, "the queue in the increase", |s| {
        s.probes[0].increase_ms.is_some_and(|i| i > 100.0)
    });
    let p = &agent.state().probes[0];
    assert_eq!(p.target, format!("icmp:{}", Pair::ADDR_B));
    assert_eq!(p.rtt_buckets.last().unwrap().1, p.received_total);
}
