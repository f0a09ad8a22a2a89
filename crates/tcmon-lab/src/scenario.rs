//! The seeds' lab: node1 - router - node2, routed, with a shaper on the router's interface
//! toward node1, in one of the configurations the seeds experimented with.

use crate::{run, LabError, Netns};

/// Three namespaces: traffic from node2 to node1 crosses the router and its shaper on `r1`.
#[derive(Debug)]
pub struct Lab {
    pub node1: Netns,
    pub router: Netns,
    pub node2: Netns,
}

/// Rules per prio when a kernel caps a u32 bucket at 4,095 (Linux 6.1).
const U32_BUCKET_CHUNK: usize = 4_000;

/// A named configuration of the router's shaper.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub description: &'static str,
    /// `tc` commands (without the leading `tc`) run in the router's namespace.
    commands: &'static [&'static str],
    /// u32 rules to add in bulk (the long filter chain), as (count, rule).
    bulk_filters: Option<(usize, &'static str)>,
}

/// Every number a description states is measured by `tests/kernel/lab.rs`
/// (`scenario_descriptions_state_what_the_lab_measures`), which runs the scenario.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "default-fifo",
        description: "HTB 2 Mbit with a class that has no qdisc: the kernel's default FIFO of \
                      txqueuelen (1000) packets holds 6 s of full-size packets",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 10",
            "class add dev r1 parent 1: classid 1:1 htb rate 2mbit ceil 2mbit",
            "class add dev r1 parent 1:1 classid 1:10 htb rate 2mbit ceil 2mbit",
        ],
        bulk_filters: None,
    },
    Scenario {
        name: "short-fifo",
        description: "the same 2 Mbit class with a 10-packet pfifo: the delay is bounded (60 ms \
                      of full-size packets; a local sender's GSO super-packets hold more)",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 10",
            "class add dev r1 parent 1: classid 1:1 htb rate 2mbit ceil 2mbit",
            "class add dev r1 parent 1:1 classid 1:10 htb rate 2mbit ceil 2mbit",
            "qdisc add dev r1 parent 1:10 handle 10: pfifo limit 10",
        ],
        bulk_filters: None,
    },
    Scenario {
        name: "tbf",
        description: "TBF 2 Mbit with a 2-second queue (latency 2s)",
        commands: &["qdisc add dev r1 root handle 1: tbf rate 2mbit burst 10k latency 2s"],
        bulk_filters: None,
    },
    Scenario {
        name: "r2q",
        description: "HTB r2q 10 with a 900 Mbit class (quantum capped at 200000) and a 64 kbit class \
                      (quantum raised to 1000, below the MTU)",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 10 r2q 10",
            "class add dev r1 parent 1: classid 1:1 htb rate 1gbit ceil 1gbit",
            "class add dev r1 parent 1:1 classid 1:10 htb rate 900mbit ceil 1gbit",
            "class add dev r1 parent 1:1 classid 1:20 htb rate 64kbit ceil 1gbit",
            "qdisc add dev r1 parent 1:10 handle 10: pfifo limit 100",
            "qdisc add dev r1 parent 1:20 handle 20: pfifo limit 100",
        ],
        bulk_filters: None,
    },
    Scenario {
        name: "quantum-big",
        description: "HTB r2q 1: two 1 Mbit classes borrowing from a 10 Mbit parent, quantum \
                      125,000 B each; while bulk UDP in 1:10 takes its turn, probes in 1:20 \
                      wait for it: a predicted 100 ms (125,000 B at 10 Mbit)",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 20 r2q 1",
            "class add dev r1 parent 1: classid 1:1 htb rate 10mbit ceil 10mbit",
            "class add dev r1 parent 1:1 classid 1:10 htb rate 1mbit ceil 10mbit",
            "class add dev r1 parent 1:1 classid 1:20 htb rate 1mbit ceil 10mbit",
            "qdisc add dev r1 parent 1:10 handle 10: pfifo limit 50",
            "qdisc add dev r1 parent 1:20 handle 20: pfifo limit 50",
            "filter add dev r1 parent 1: protocol ip prio 1 u32 match ip dport 9 0xffff flowid 1:10",
        ],
        bulk_filters: None,
    },
    Scenario {
        name: "quantum-gso",
        description: "HTB 10 Mbit, two 1 Mbit classes borrowing, quantum 12,500 B (r2q 10): \
                      TCP in 1:10 sends 64 kB GSO packets, one a turn, and takes from 1:20's \
                      full-size UDP frames most of its share of the spare bandwidth",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 20",
            "class add dev r1 parent 1: classid 1:1 htb rate 10mbit ceil 10mbit",
            "class add dev r1 parent 1:1 classid 1:10 htb rate 1mbit ceil 10mbit",
            "class add dev r1 parent 1:1 classid 1:20 htb rate 1mbit ceil 10mbit",
            "qdisc add dev r1 parent 1:10 handle 10: pfifo limit 50",
            "qdisc add dev r1 parent 1:20 handle 20: pfifo limit 50",
            "filter add dev r1 parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff flowid 1:10",
        ],
        bulk_filters: None,
    },
    Scenario {
        name: "filters",
        description: "ten thousand u32 rules at one prio, tried for every packet before the rule \
                      of the class node1 is reached by (4,000 per prio on kernels whose u32 \
                      bucket holds fewer)",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 3",
            "class add dev r1 parent 1: classid 1:1 htb rate 500mbit ceil 1gbit",
            "class add dev r1 parent 1: classid 1:2 htb rate 500mbit ceil 1gbit",
            "class add dev r1 parent 1: classid 1:3 htb rate 500mbit ceil 1gbit",
            "filter add dev r1 parent 1: protocol ip prio 16 u32 match ip dst 10.99.1.131/32 flowid 1:1",
            "filter add dev r1 parent 1: protocol ip prio 400 u32 match ip dst 10.99.1.2/32 flowid 1:3",
        ],
        bulk_filters: Some((
            10_000,
            "filter add dev r1 parent 1: protocol ip prio 100 u32 match ip dst 10.99.1.132/32 flowid 1:2",
        )),
    },
    Scenario {
        name: "no-default",
        description: "HTB default 30 with no class 1:30: only ICMP is classified, everything else \
                      leaves unshaped through the direct queue",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 30",
            "class add dev r1 parent 1: classid 1:1 htb rate 2mbit ceil 2mbit",
            "class add dev r1 parent 1:1 classid 1:10 htb rate 2mbit ceil 2mbit",
            "qdisc add dev r1 parent 1:10 handle 10: pfifo limit 10",
            "filter add dev r1 parent 1: protocol ip prio 1 u32 match ip protocol 1 0xff flowid 1:10",
        ],
        bulk_filters: None,
    },
    Scenario {
        name: "fq-codel",
        description: "the default-fifo shaper with the fix tcmon check offers where the kernel has \
                      it: an fq_codel leaf (delay stays near the base RTT under load; needs \
                      fq_codel: sudo tests/vm/run --shell)",
        commands: &[
            "qdisc add dev r1 root handle 1: htb default 10",
            "class add dev r1 parent 1: classid 1:1 htb rate 2mbit ceil 2mbit",
            "class add dev r1 parent 1:1 classid 1:10 htb rate 2mbit ceil 2mbit",
            "qdisc add dev r1 parent 1:10 handle 10: fq_codel",
        ],
        bulk_filters: None,
    },
    Scenario {
        name: "cake",
        description: "cake as the shaper itself, bandwidth 2mbit, with its own AQM and flow \
                      isolation (needs cake: sudo tests/vm/run --shell)",
        commands: &["qdisc add dev r1 root handle 1: cake bandwidth 2mbit"],
        bulk_filters: None,
    },
];

impl Scenario {
    pub fn find(name: &str) -> Option<&'static Scenario> {
        SCENARIOS.iter().find(|s| s.name == name)
    }

    /// The `tc` commands (without the leading `tc`) that build it in the router's namespace.
    pub fn commands(&self) -> &'static [&'static str] {
        self.commands
    }

    /// Filter rules added in bulk (`tc -batch`).
    pub fn bulk_rules(&self) -> usize {
        self.bulk_filters.map_or(0, |(n, _)| n)
    }

    /// Runs the scenario's `tc` commands (not its bulk filters) on a veth named like the
    /// router's in a throwaway namespace, so that what this kernel lacks shows before a lab
    /// that is up is touched. About 0.1 s.
    pub fn try_on_this_kernel(&self) -> Result<(), LabError> {
        let ns = Netns::create("labtry")?;
        ns.ip(&[
            "link",
            "add",
            Lab::SHAPED,
            "type",
            "veth",
            "peer",
            "name",
            "peer0",
        ])?;
        for cmd in self.commands {
            let args: Vec<&str> = cmd.split_whitespace().collect();
            match ns.tc(&args) {
                Err(LabError::Failed { stderr, .. }) if stderr.contains("kind is unknown") => {
                    return Err(LabError::KernelLacks {
                        scenario: self.name,
                        kind: qdisc_kind(cmd).unwrap_or_default().to_owned(),
                        stderr,
                    });
                }
                r => {
                    r?;
                }
            }
        }
        Ok(())
    }
}

/// The kind a `qdisc add|replace ...` command names: its first word after the device, the
/// parent and the handle.
fn qdisc_kind(cmd: &str) -> Option<&str> {
    let mut words = cmd.split_whitespace().skip(2);
    while let Some(w) = words.next() {
        match w {
            "dev" | "parent" | "handle" => {
                words.next();
            }
            "root" => {}
            k => return Some(k),
        }
    }
    None
}

impl Lab {
    pub const NODE1: &'static str = "10.99.1.2";
    pub const ROUTER_TO_NODE1: &'static str = "10.99.1.1";
    pub const ROUTER_TO_NODE2: &'static str = "10.99.2.1";
    pub const NODE2: &'static str = "10.99.2.2";
    /// The router's interface toward node1, where the shaper is.
    pub const SHAPED: &'static str = "r1";

    /// A throwaway lab (tests): unique names, deleted on drop.
    pub fn create(tag: &str) -> Result<Lab, LabError> {
        let lab = Lab {
            node1: Netns::create(&format!("{tag}n1"))?,
            router: Netns::create(&format!("{tag}rt"))?,
            node2: Netns::create(&format!("{tag}n2"))?,
        };
        lab.wire()?;
        Ok(lab)
    }

    /// A user's lab with fixed names `<prefix>-node1`, `-router`, `-node2`.
    pub fn create_named(prefix: &str) -> Result<Lab, LabError> {
        let node1 = Netns::create_named(&format!("{prefix}-node1"))?;
        let router = Netns::create_named(&format!("{prefix}-router"))?;
        let node2 = Netns::create_named(&format!("{prefix}-node2"))?;
        let lab = Lab {
            node1,
            router,
            node2,
        };
        lab.wire()?;
        Ok(lab)
    }

    fn wire(&self) -> Result<(), LabError> {
        let r = &self.router;
        r.ip(&[
            "link",
            "add",
            "r1",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &self.node1.name,
        ])?;
        r.ip(&[
            "link",
            "add",
            "r2",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &self.node2.name,
        ])?;
        r.ip(&[
            "addr",
            "add",
            &format!("{}/24", Self::ROUTER_TO_NODE1),
            "dev",
            "r1",
        ])?;
        r.ip(&[
            "addr",
            "add",
            &format!("{}/24", Self::ROUTER_TO_NODE2),
            "dev",
            "r2",
        ])?;
        self.node1
            .ip(&["addr", "add", &format!("{}/24", Self::NODE1), "dev", "eth0"])?;
        self.node2
            .ip(&["addr", "add", &format!("{}/24", Self::NODE2), "dev", "eth0"])?;
        for (ns, dev) in [
            (r, "r1"),
            (r, "r2"),
            (&self.node1, "eth0"),
            (&self.node2, "eth0"),
        ] {
            ns.ip(&["link", "set", dev, "up"])?;
        }
        self.node1
            .ip(&["route", "add", "default", "via", Self::ROUTER_TO_NODE1])?;
        self.node2
            .ip(&["route", "add", "default", "via", Self::ROUTER_TO_NODE2])?;
        r.sysctl("net.ipv4.ip_forward", "1")?;
        // Static neighbours: an ARP reply stuck behind a full FIFO would stall everything.
        let mac = |ns: &Netns, dev: &str| crate::mac(ns, dev);
        r.ip(&[
            "neigh",
            "replace",
            Self::NODE1,
            "lladdr",
            &mac(&self.node1, "eth0")?,
            "dev",
            "r1",
            "nud",
            "permanent",
        ])?;
        r.ip(&[
            "neigh",
            "replace",
            Self::NODE2,
            "lladdr",
            &mac(&self.node2, "eth0")?,
            "dev",
            "r2",
            "nud",
            "permanent",
        ])?;
        self.node1.ip(&[
            "neigh",
            "replace",
            Self::ROUTER_TO_NODE1,
            "lladdr",
            &mac(r, "r1")?,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])?;
        self.node2.ip(&[
            "neigh",
            "replace",
            Self::ROUTER_TO_NODE2,
            "lladdr",
            &mac(r, "r2")?,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])?;
        Ok(())
    }

    /// Configures the router's shaper as the scenario says.
    pub fn apply(&self, s: &Scenario) -> Result<(), LabError> {
        for cmd in s.commands {
            let args: Vec<&str> = cmd.split_whitespace().collect();
            self.router.tc(&args)?;
        }
        if let Some((count, rule)) = s.bulk_filters {
            // named after the router's namespace, unique per lab: two labs of one process
            // (tests on threads) each write their own
            let path =
                std::env::temp_dir().join(format!("tcmon-lab-{}-{}.tc", s.name, self.router.name));
            let batch = |text: String| -> Result<String, LabError> {
                std::fs::write(&path, text).map_err(|source| LabError::Spawn {
                    cmd: path.display().to_string(),
                    source,
                })?;
                let r = self.router.tc(&["-batch", &path.display().to_string()]);
                let _ = std::fs::remove_file(&path);
                r
            };
            match batch(format!("{rule}\n").repeat(count)) {
                // Linux 6.1 gives a u32 bucket 4,095 node ids (6.18 took 10,000): the same
                // linear walk, split over consecutive prios.
                Err(e) if e.to_string().contains("node ID pool exhausted") => {
                    let prio: u32 = rule
                        .split_whitespace()
                        .skip_while(|w| *w != "prio")
                        .nth(1)
                        .and_then(|p| p.parse().ok())
                        .ok_or(e)?;
                    self.router.tc(&[
                        "filter",
                        "del",
                        "dev",
                        Self::SHAPED,
                        "parent",
                        "1:",
                        "prio",
                        &prio.to_string(),
                    ])?;
                    let mut text = String::new();
                    for i in 0..count {
                        let p = prio + u32::try_from(i / U32_BUCKET_CHUNK).unwrap_or(0);
                        let r = rule.replace(&format!(" prio {prio} "), &format!(" prio {p} "));
                        text.push_str(&r);
                        text.push('\n');
                    }
                    batch(text)?;
                }
                r => {
                    r?;
                }
            }
        }
        Ok(())
    }

    /// Keeps the namespaces after this value is gone (`tcmon lab up`).
    pub fn keep(self) -> [String; 3] {
        [self.node1.keep(), self.router.keep(), self.node2.keep()]
    }
}

/// Deletes a user's lab; returns how many namespaces existed.
pub fn remove_lab(prefix: &str) -> Result<usize, LabError> {
    let mut removed = 0;
    let list = run(&["ip", "netns", "list"])?;
    for role in ["node1", "router", "node2"] {
        let name = format!("{prefix}-{role}");
        if list
            .lines()
            .any(|l| l.split_whitespace().next() == Some(name.as_str()))
        {
            run(&["ip", "netns", "del", &name])?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_a_qdisc_command_names() {
        assert_eq!(
            qdisc_kind("qdisc add dev r1 root handle 1: cake bandwidth 2mbit"),
            Some("cake")
        );
        assert_eq!(
            qdisc_kind("qdisc add dev r1 parent 1:10 handle 10: fq_codel"),
            Some("fq_codel")
        );
        assert_eq!(qdisc_kind("qdisc add dev r1 root"), None);
    }
}
