//! The config file: TOML, every key optional, unknown keys rejected. `config.toml` at the top
//! of the repository documents every key with its default.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Config {
    pub(crate) collector: CollectorConfig,
    /// The long-running commands (the TUI, `serve`).
    pub(crate) agent: AgentConfig,
    /// Continuous latency probes of the long-running commands.
    pub(crate) probes: ProbesConfig,
    /// Thresholds of `tcmon check` (and of the agent's findings).
    pub(crate) check: tcmon_diag::Thresholds,
    /// `tcmon serve`.
    pub(crate) serve: ServeConfig,
    /// The queueing delay of real packets, measured in the kernel (eBPF).
    pub(crate) sojourn: SojournConfig,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct SojournConfig {
    pub(crate) enabled: bool,
    /// Timestamp one packet in this many.
    pub(crate) sample_every: u32,
    /// Flows the kernel keeps (least recently used evicted).
    pub(crate) flows: u32,
    /// Packets in the tree at once that can be timestamped.
    pub(crate) in_flight: u32,
}

impl Default for SojournConfig {
    fn default() -> Self {
        let o = tcmon_sojourn::Options::default();
        SojournConfig {
            enabled: true,
            sample_every: o.sample_every,
            flows: o.flows_capacity,
            in_flight: o.inflight_capacity,
        }
    }
}

impl Config {
    /// Whether and how to measure: `--no-bpf` and `[sojourn] enabled = false` turn it off,
    /// and say so as the reason.
    pub(crate) fn sojourn_mode(&self, no_bpf: bool) -> tcmon_sojourn::SojournMode {
        use tcmon_sojourn::SojournMode;
        if no_bpf {
            SojournMode::Off("turned off by --no-bpf".into())
        } else if !self.sojourn.enabled {
            SojournMode::Off("turned off by the config ([sojourn] enabled = false)".into())
        } else {
            SojournMode::Measure(tcmon_sojourn::Options {
                sample_every: self.sojourn.sample_every,
                flows_capacity: self.sojourn.flows,
                inflight_capacity: self.sojourn.in_flight,
            })
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct CollectorConfig {
    /// Re-read filters at least this often, even without change notifications.
    #[serde(with = "humantime_serde_compat")]
    pub(crate) filter_refresh: Duration,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig {
            filter_refresh: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct AgentConfig {
    /// Poll this often.
    #[serde(with = "humantime_serde_compat")]
    pub(crate) interval: Duration,
    /// Samples kept per object for sparklines.
    pub(crate) history: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            interval: Duration::from_secs(1),
            history: 180,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ProbesConfig {
    /// Checked here, resolved by the probes when they start (DNS may be down now).
    #[serde(deserialize_with = "targets")]
    pub(crate) targets: Vec<tcmon_probe::TargetSpec>,
    #[serde(with = "humantime_serde_compat")]
    pub(crate) interval: Duration,
    #[serde(with = "humantime_serde_compat")]
    pub(crate) timeout: Duration,
    #[serde(with = "humantime_serde_compat")]
    pub(crate) baseline_window: Duration,
    pub(crate) recent: usize,
}

impl Default for ProbesConfig {
    fn default() -> Self {
        let d = tcmon_probe::ContinuousOptions::default();
        ProbesConfig {
            targets: d.targets,
            interval: d.interval,
            timeout: d.timeout,
            baseline_window: d.baseline_window,
            recent: d.recent,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ServeConfig {
    /// Address and port to listen on.
    pub(crate) listen: std::net::SocketAddr,
    /// Connections served at once; more are closed on accept.
    pub(crate) max_connections: usize,
    /// A client must send its request line and headers within this time.
    #[serde(with = "humantime_serde_compat")]
    pub(crate) header_timeout: Duration,
    /// Per-object metric groups `/metrics` carries (see `tcmon_export::Groups`).
    pub(crate) metrics: Vec<String>,
}

impl ServeConfig {
    /// The groups named by `metrics` (validated when the config is loaded).
    pub(crate) fn groups(&self) -> tcmon_export::Groups {
        tcmon_export::Groups::from_names(self.metrics.iter().map(String::as_str))
            .unwrap_or_default()
    }
}

/// Where `tcmon serve` listens unless told otherwise.
pub(crate) const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    DEFAULT_PORT,
);
/// docs/guide/serve.md ("Port") says how it was chosen.
pub(crate) const DEFAULT_PORT: u16 = 29110;

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: DEFAULT_LISTEN,
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            metrics: tcmon_export::Groups::default()
                .names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        }
    }
}

fn targets<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<tcmon_probe::TargetSpec>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|t| t.parse().map_err(serde::de::Error::custom))
        .collect()
}

impl Config {
    /// What the agent needs from the config, for `target`.
    pub(crate) fn agent_options(
        &self,
        netns: Option<String>,
        devices: Vec<String>,
        no_bpf: bool,
    ) -> tcmon_agent::AgentOptions {
        tcmon_agent::AgentOptions {
            netns,
            devices,
            interval: self.agent.interval,
            filter_refresh: self.collector.filter_refresh,
            thresholds: self.check.clone(),
            history_len: self.agent.history,
            probes: Some(tcmon_probe::ContinuousOptions {
                targets: self.probes.targets.clone(),
                interval: self.probes.interval,
                timeout: self.probes.timeout,
                baseline_window: self.probes.baseline_window,
                recent: self.probes.recent,
                netns: None,
            }),
            sojourn: self.sojourn_mode(no_bpf),
        }
    }
}

mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s)
            .map_err(|e| serde::de::Error::custom(format!("expected a duration like \"10s\": {e}")))
    }
}

/// A config file that could not be read or understood, with where and why.
#[derive(Debug, thiserror::Error)]
#[error("config {path}: {message}")]
pub(crate) struct ConfigError {
    path: String,
    message: String,
}

pub(crate) fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let err = |message: String| ConfigError {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    parse(&text).map_err(err)
}

fn parse(text: &str) -> Result<Config, String> {
    // toml's message already names the line, column and what was expected.
    let cfg: Config = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())?;
    validate(&cfg).map_err(|m| match line_of_key(text, &m) {
        Some(line) => format!("line {line}: {m}"),
        None => m,
    })?;
    Ok(cfg)
}

/// The line of the value a validation message starts with (`agent.interval must ...`), if the
/// file sets it (a default that fails cannot, and has no line).
fn line_of_key(text: &str, message: &str) -> Option<usize> {
    let path = message.split_whitespace().next()?;
    let (section, key) = path.split_once('.')?;
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let (_, item) = doc
        .as_table()
        .get(section)?
        .as_table_like()?
        .get_key_value(key)?;
    let start = item.span()?.start;
    Some(text[..start].matches('\n').count() + 1)
}

fn validate(cfg: &Config) -> Result<(), String> {
    cfg.check.validate()?;
    if cfg.agent.interval < Duration::from_millis(100) {
        return Err("agent.interval must be at least 100ms".into());
    }
    if cfg.probes.interval < Duration::from_millis(10) {
        return Err("probes.interval must be at least 10ms".into());
    }
    if cfg.probes.timeout.is_zero() {
        return Err("probes.timeout must be above 0".into());
    }
    if !(1..=10_000).contains(&cfg.probes.recent) {
        return Err("probes.recent must be between 1 and 10000".into());
    }
    if !(1..=100_000).contains(&cfg.agent.history) {
        return Err("agent.history must be between 1 and 100000 samples".into());
    }
    if !(1..=65_536).contains(&cfg.serve.max_connections) {
        return Err("serve.max_connections must be between 1 and 65536".into());
    }
    if cfg.serve.header_timeout < Duration::from_millis(100) {
        return Err("serve.header_timeout must be at least 100ms".into());
    }
    if cfg.sojourn.sample_every == 0 {
        return Err("sojourn.sample_every must be at least 1".into());
    }
    if !(64..=16_777_216).contains(&cfg.sojourn.flows) {
        return Err("sojourn.flows must be between 64 and 16777216".into());
    }
    if !(64..=16_777_216).contains(&cfg.sojourn.in_flight) {
        return Err("sojourn.in_flight must be between 64 and 16777216".into());
    }
    if let Err(name) =
        tcmon_export::Groups::from_names(cfg.serve.metrics.iter().map(String::as_str))
    {
        return Err(format!(
            "serve.metrics names an unknown group '{name}' (groups: {})",
            tcmon_export::Groups::NAMES.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_default_config_parses_to_the_defaults() {
        let cfg = parse(include_str!("../config.toml")).unwrap();
        assert_eq!(
            cfg.collector.filter_refresh,
            CollectorConfig::default().filter_refresh
        );
        assert_eq!(cfg.agent.interval, AgentConfig::default().interval);
        assert_eq!(cfg.agent.history, AgentConfig::default().history);
        let serve = ServeConfig::default();
        assert_eq!(cfg.serve.listen, serve.listen);
        assert_eq!(cfg.serve.max_connections, serve.max_connections);
        assert_eq!(cfg.serve.header_timeout, serve.header_timeout);
        assert_eq!(
            format!("{:?}", cfg.check),
            format!("{:?}", tcmon_diag::Thresholds::default()),
            "config.toml documents the thresholds' defaults"
        );
    }

    #[test]
    fn probe_targets_are_checked_but_not_resolved() {
        // RFC 6761: .invalid never resolves, as no name does while DNS is down.
        let cfg =
            parse("[probes]\ntargets = [\"icmp:nonexistent.invalid\", \"tcp:x.invalid:22\"]\n")
                .unwrap();
        let names: Vec<String> = cfg.probes.targets.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["icmp:nonexistent.invalid", "tcp:x.invalid:22"]);
        for (bad, says) in [
            ("icmp:", "no host after icmp:"),
            (
                "udp:sink.invalid:65536",
                "the port '65536' is not a number from 1 to 65535",
            ),
            ("ftp:host", "unknown kind of probe 'ftp:'"),
        ] {
            let e = parse(&format!("[probes]\ntargets = [\"{bad}\"]\n")).unwrap_err();
            assert!(e.contains("line 2") && e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_line() {
        let e = parse("[collector]\nfilter_refresh = \"10s\"\nfiltr = 1\n").unwrap_err();
        assert!(
            e.contains("line 3") && e.contains("unknown field `filtr`"),
            "{e}"
        );
        let e = parse("[collector]\nfilter_refresh = \"soon\"\n").unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("expected a duration"),
            "{e}"
        );
        let e = parse("[check]\nquantum_max_bytes = 0\n").unwrap_err();
        assert!(
            e.starts_with("line 2: check.quantum_max_bytes must be at least 1000"),
            "{e}"
        );
        let e = parse("[probes]\ntargets = [\"udp:nohost\"]\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("HOST:PORT"), "{e}");
        let cfg = parse("[probes]\ntargets = [\"10.0.0.1\", \"udp:127.0.0.1:7878\"]\n").unwrap();
        assert_eq!(cfg.probes.targets.len(), 2);
        let e = parse("# tcmon\n[agent]\ninterval = \"10ms\"\n").unwrap_err();
        assert_eq!(e, "line 3: agent.interval must be at least 100ms");
        let e = parse("[check]\nsaturated_ratio = -1.0\n").unwrap_err();
        assert!(e.starts_with("line 2: check.saturated_ratio"), "{e}");
        let e = parse("probes.recent = 0\n").unwrap_err();
        assert!(e.starts_with("line 1: probes.recent must be"), "{e}");
        let e = parse("[serve]\n\nlisten = \"localhost\"\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("socket address"), "{e}");
        let e = parse("[serve]\nlisten_address = \"127.0.0.1:1\"\n").unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("unknown field `listen_address`"),
            "{e}"
        );
        let e = parse("[serve]\n\n\nmax_connections = 0\n").unwrap_err();
        assert!(e.starts_with("line 4: serve.max_connections"), "{e}");
        let e = parse("[serve]\nmetrics = [\"counters\", \"tokens\"]\n").unwrap_err();
        assert!(
            e.starts_with(
                "line 2: serve.metrics names an unknown group 'tokens' (groups: counters,"
            ),
            "{e}"
        );
        // Both critical and warning set, the first one failing the pair is named.
        let e = parse("[check]\nqueue_delay_warning_ms = 500\nqueue_delay_critical_ms = 100\n")
            .unwrap_err();
        assert!(
            e.starts_with("line 3: check.queue_delay_critical_ms"),
            "{e}"
        );
    }
}
