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
    /// Where the names of classes come from.
    pub(crate) names: NamesConfig,
    /// The managers that own trees.
    pub(crate) managers: ManagersConfig,
    /// The flight recorder.
    pub(crate) record: RecordConfig,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RecordConfig {
    /// Where `serve` records every poll ("" for nowhere) and where `tcmon record` does.
    pub(crate) dir: std::path::PathBuf,
    /// The most the recording keeps on disk.
    #[serde(deserialize_with = "byte_size")]
    pub(crate) budget: u64,
    #[serde(with = "humantime_serde_compat")]
    pub(crate) keyframe_every: Duration,
}

impl Default for RecordConfig {
    fn default() -> Self {
        RecordConfig {
            dir: std::path::PathBuf::new(),
            budget: 2_000_000_000,
            keyframe_every: Duration::from_secs(600),
        }
    }
}

impl RecordConfig {
    /// The recorder's options for `dir` (the config's, or another given).
    pub(crate) fn options(&self, dir: &Path) -> tcmon_record::Options {
        let mut o = tcmon_record::Options::new(dir, self.budget);
        o.keyframe_every = self.keyframe_every;
        o
    }
}

/// "2GB", "500MB", "1.5 GiB", "1000000": bytes as people write them (KB, MB, GB, TB are
/// powers of 1000; KiB, MiB, GiB, TiB of 1024).
pub(crate) fn parse_byte_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size such as 2GB, 500MB or 1GiB"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => 1_048_576.0,
        "gib" => 1_073_741_824.0,
        "tib" => 1_099_511_627_776.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    let bytes = n * mult;
    if !(1.0..1.8e19).contains(&bytes) {
        return Err(format!("{s:?}: out of range"));
    }
    #[allow(clippy::cast_sign_loss)]
    Ok(bytes as u64)
}

fn byte_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    parse_byte_size(&String::deserialize(d)?).map_err(serde::de::Error::custom)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ManagersConfig {
    pub(crate) detect: bool,
    pub(crate) etc: std::path::PathBuf,
    pub(crate) sqm_state_dirs: Vec<std::path::PathBuf>,
}

impl Default for ManagersConfig {
    fn default() -> Self {
        let s = tcmon_names::OwnerSources::default();
        ManagersConfig {
            detect: s.detect,
            etc: s.etc,
            sqm_state_dirs: s.sqm_state_dirs,
        }
    }
}

impl ManagersConfig {
    /// Where the managers of the trees of `netns` keep their files.
    pub(crate) fn sources(&self, netns: Option<&str>) -> tcmon_names::OwnerSources {
        tcmon_names::OwnerSources {
            detect: self.detect,
            netns: netns.map(ToOwned::to_owned),
            etc: self.etc.clone(),
            sqm_state_dirs: self.sqm_state_dirs.clone(),
            // LibreQoS's and cake-autorate's places have no option of their own
            ..tcmon_names::OwnerSources::default()
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct NamesConfig {
    /// iproute2's class names: the first of these files that exists.
    pub(crate) tc_cls: Vec<std::path::PathBuf>,
    /// LibreQoS's configuration ("" for none).
    pub(crate) lqos_conf: std::path::PathBuf,
    /// LibreQoS's files, "" for where lqos.conf puts them.
    pub(crate) queuing_structure: std::path::PathBuf,
    pub(crate) shaped_devices: std::path::PathBuf,
    /// LibreQoS's download and upload interfaces, none for lqos.conf's.
    pub(crate) libreqos_interfaces: Vec<String>,
    /// Where LibreQoS pins its map of addresses to classes ("" for none): `classify` answers
    /// from it.
    pub(crate) libreqos_map: std::path::PathBuf,
    /// FireQOS's run directory ("" for none).
    pub(crate) fireqos_dir: std::path::PathBuf,
    /// Class or address prefix -> name (keys checked when the config is loaded).
    pub(crate) map: std::collections::BTreeMap<String, String>,
}

impl Default for NamesConfig {
    fn default() -> Self {
        let s = tcmon_names::Sources::default();
        NamesConfig {
            tc_cls: s.tc_cls,
            lqos_conf: s.lqos_conf,
            queuing_structure: std::path::PathBuf::new(),
            shaped_devices: std::path::PathBuf::new(),
            libreqos_interfaces: Vec::new(),
            libreqos_map: tcmon_sojourn::libreqos::PIN.into(),
            fireqos_dir: s.fireqos_dir,
            map: std::collections::BTreeMap::new(),
        }
    }
}

impl NamesConfig {
    /// The sources to load names from (the map's keys were validated with the config).
    pub(crate) fn sources(&self) -> tcmon_names::Sources {
        let path = |p: &std::path::PathBuf| (!p.as_os_str().is_empty()).then(|| p.clone());
        tcmon_names::Sources {
            tc_cls: self.tc_cls.clone(),
            lqos_conf: self.lqos_conf.clone(),
            queuing_structure: path(&self.queuing_structure),
            shaped_devices: path(&self.shaped_devices),
            libreqos_interfaces: match self.libreqos_interfaces.as_slice() {
                [down, up] => Some((down.clone(), up.clone())),
                _ => None,
            },
            fireqos_dir: self.fireqos_dir.clone(),
            map: self
                .map
                .iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, v.clone())))
                .collect(),
            owners: tcmon_names::OwnerSources::default(),
        }
    }
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
    /// The sources of names and of the trees' owners, for the trees of `netns`.
    pub(crate) fn name_sources(&self, netns: Option<&str>) -> tcmon_names::Sources {
        tcmon_names::Sources {
            owners: self.managers.sources(netns),
            ..self.names.sources()
        }
    }

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
    /// Address and port to listen on (the forms `serve --listen` takes).
    #[serde(deserialize_with = "crate::listen::deserialize")]
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
            names: Some(self.name_sources(None)),
            record: None,
        }
    }
}

mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s).map_err(|e| {
            use humantime::DurationError as E;
            // humantime's other messages give a byte offset ("expected number at 0")
            let why = match e {
                E::UnknownUnit { unit, .. } => format!(
                    ": unknown unit '{unit}' (units: ns, us, ms, s, min, h, d; \"1m 30s\" adds)"
                ),
                E::NumberOverflow => ": too long".to_owned(),
                _ => String::new(),
            };
            serde::de::Error::custom(format!(
                "expected a duration like \"10s\" or \"500ms\", not \"{s}\"{why}"
            ))
        })
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
    let cfg: Config = toml::from_str(text).map_err(|e| in_plain_words(text, &e))?;
    validate(&cfg).map_err(|m| match line_of_key(text, &m) {
        Some(line) => format!("line {line}: {m}"),
        None => m,
    })?;
    Ok(cfg)
}

/// toml's error as `line N: section.key: what was expected (e.g. the documented default)`,
/// with serde's words for types (`usize`, `a sequence`, `number too large to fit in target
/// type`) put plainly. A file that is not TOML at all keeps toml's message, which shows the
/// line and column.
fn in_plain_words(text: &str, e: &toml::de::Error) -> String {
    let whole = || e.to_string().trim_end().to_owned();
    let Some(span) = e.span() else {
        return whole();
    };
    let line = text[..span.start].matches('\n').count() + 1;
    // A number too large for any integer fails toml's parser itself: read the key off its line.
    let path = match toml_edit::ImDocument::parse(text) {
        Ok(doc) => key_at(doc.as_table(), span.start, ""),
        Err(_) => key_on_line(text, span.start),
    };
    let Some(path) = path else {
        return whole();
    };
    let message = e.message().trim_end();
    match plain(message) {
        Some(plain) => {
            let example = documented(&path)
                .map(|v| format!(" (e.g. {} = {v})", path.rsplit('.').next().unwrap_or(&path)))
                .unwrap_or_default();
            format!("line {line}: {path}: {plain}{example}")
        }
        None => format!("line {line}: {path}: {message}"),
    }
}

/// The dotted path of the key or value at byte `at`.
fn key_at(table: &dyn toml_edit::TableLike, at: usize, prefix: &str) -> Option<String> {
    for (key, item) in table.iter() {
        let path = if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        };
        let within = |span: Option<std::ops::Range<usize>>| span.is_some_and(|s| s.contains(&at));
        if let Some(t) = item.as_table_like() {
            if let Some(found) = key_at(t, at, &path) {
                return Some(found);
            }
        }
        let key_span = table.key(key).and_then(toml_edit::Key::span);
        if within(key_span) || (item.is_value() && within(item.span())) {
            return Some(path);
        }
    }
    None
}

/// `section.key` of a `key = value` line holding byte `at`, by the last `[section]` above it.
fn key_on_line(text: &str, at: usize) -> Option<String> {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let (key, _) = text[start..].split_once('=')?;
    let key = key.trim();
    let section = text[..start].lines().rev().find_map(|l| {
        let l = l.trim();
        l.strip_prefix('[')?.strip_suffix(']')
    });
    Some(match section {
        Some(s) => format!("{}.{key}", s.trim()),
        None => key.to_owned(),
    })
}

/// The value `config.toml` documents for `path`, as written there.
fn documented(path: &str) -> Option<String> {
    let doc = toml_edit::ImDocument::parse(include_str!("../config.toml")).ok()?;
    let mut item = doc.as_item();
    for key in path.split('.') {
        item = item.as_table_like()?.get(key)?;
    }
    Some(item.as_value()?.to_string().trim().to_owned())
}

/// serde's message for a value of the wrong type or range, in plain words; `None` for others
/// (an unknown key, or a message of tcmon's own).
fn plain(message: &str) -> Option<String> {
    if message == "number too large to fit in target type" {
        return Some("the number is too large".into());
    }
    if message == "invalid socket address syntax" {
        return Some("expected an address and a port".into());
    }
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    let (found, expected) = rest.rsplit_once(", expected ")?;
    let expected = match expected {
        "usize" | "u64" | "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_owned(),
        "u8" | "u16" | "u32" => {
            let max = match expected {
                "u8" => u64::from(u8::MAX),
                "u16" => u64::from(u16::MAX),
                _ => u64::from(u32::MAX),
            };
            format!("a whole number from 0 to {max}")
        }
        "f32" | "f64" => "a number".to_owned(),
        "a sequence" => "a list in brackets".to_owned(),
        "a string" => "a quoted string".to_owned(),
        "a boolean" => "true or false".to_owned(),
        "a map" | "struct" => "a table".to_owned(),
        e if e.starts_with("struct ") => "a table".to_owned(),
        _ => return None,
    };
    // `integer `-1``, `floating point `1.5``, `string "x"`: the value as written
    let found = found
        .split_once(['`', '"'])
        .map_or(found, |(_, v)| v)
        .trim_end_matches(['`', '"']);
    Some(format!("expected {expected}, not {found}"))
}

/// The line of the value a validation message starts with (`agent.interval must ...`), if the
/// file sets it (a default that fails cannot, and has no line).
fn line_of_key(text: &str, message: &str) -> Option<usize> {
    let path = message.split_whitespace().next()?.trim_end_matches(':');
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
    if !matches!(cfg.names.libreqos_interfaces.len(), 0 | 2) {
        return Err(
            "names.libreqos_interfaces must be empty or name two interfaces: download, upload"
                .into(),
        );
    }
    for key in cfg.names.map.keys() {
        key.parse::<tcmon_names::MapKey>()
            .map_err(|e| format!("names.map: {e}"))?;
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
    fn names_sources_from_the_config() {
        let defaults = parse(include_str!("../config.toml")).unwrap();
        assert_eq!(defaults.names.sources(), tcmon_names::Sources::default());
        let cfg = parse(
            "[names]\ntc_cls = []\nqueuing_structure = \"/srv/q.json\"\n\
             libreqos_interfaces = [\"eth1\", \"eth0\"]\n\
             [names.map]\n\"1:10\" = \"voice\"\n\"eth0 3:1a2f\" = \"Smith, 12 Oak St\"\n",
        )
        .unwrap();
        let s = cfg.names.sources();
        assert!(s.tc_cls.is_empty());
        assert_eq!(
            s.queuing_structure.as_deref(),
            Some(Path::new("/srv/q.json"))
        );
        assert_eq!(s.shaped_devices, None);
        assert_eq!(s.libreqos_interfaces, Some(("eth1".into(), "eth0".into())));
        assert_eq!(s.map.len(), 2);
        assert_eq!(
            parse("[names]\nmap = { \"eth0\" = \"x\" }\n").unwrap_err(),
            "line 2: names.map: [names.map] key \"eth0\" is not a class (\"1:10\", \"eth0 1:10\") \
             or an address prefix (\"10.0.0.0/24\", \"2001:db8::/48\", \"192.0.2.7\")"
        );
        assert!(parse("[names]\nlibreqos_interfaces = [\"eth1\"]\n")
            .unwrap_err()
            .starts_with("line 2: names.libreqos_interfaces must be empty"));
    }

    /// Every `[section]` and `[section] key` that packaging's comments and the docs name is one
    /// the config has (the unit once said `[probe] targets`).
    #[test]
    fn sections_and_keys_named_elsewhere_exist() {
        let doc = toml_edit::ImDocument::parse(include_str!("../config.toml")).unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("README.md")];
        let mut dirs = vec![root.join("packaging"), root.join("docs")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    // roff, generated from the same help as the completions
                    if !path.ends_with("man") {
                        dirs.push(path);
                    }
                } else {
                    files.push(path);
                }
            }
        }
        let mut named = 0;
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            // In a comment in packaging the next word is the key; in Markdown only inside one
            // code span (`[probes] targets`), as prose may follow a section's name.
            let markdown = file.extension().is_some_and(|e| e == "md");
            for (n, line) in text.lines().enumerate() {
                // packaging: comments only (the rest is the unit's, a script's, generated)
                if !markdown && !line.trim_start().starts_with('#') {
                    continue;
                }
                let mut from = 0;
                while let Some(open) = line[from..].find('[') {
                    let start = from + open;
                    from = start + 1;
                    let Some((section, after)) = line[from..].split_once(']') else {
                        break;
                    };
                    let is_name = !section.is_empty()
                        && section.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
                    // a Markdown link, or TOML's own header in a code block
                    if !is_name || after.starts_with('(') || line.trim() == format!("[{section}]") {
                        continue;
                    }
                    let at = format!("{}:{}: [{section}]", file.display(), n + 1);
                    let Some(table) = doc.get(section).and_then(toml_edit::Item::as_table_like)
                    else {
                        panic!("{at}: config.toml has no such section");
                    };
                    named += 1;
                    let key = after
                        .strip_prefix(' ')
                        .filter(|_| !markdown || line[..start].ends_with('`'))
                        .and_then(|k| {
                            k.split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                                .next()
                        });
                    if let Some(key) = key.filter(|k| !k.is_empty()) {
                        assert!(
                            table.contains_key(key),
                            "{at} {key}: config.toml has no such key"
                        );
                    }
                }
            }
        }
        assert!(named > 10, "found {named} names");
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
    fn type_errors_are_said_in_plain_words_with_the_key_and_an_example() {
        for (text, says) in [
            (
                "[agent]\nhistory = 99999999999999999999999\n",
                "line 2: agent.history: the number is too large (e.g. history = 180)",
            ),
            (
                "[agent]\nhistory = -1\n",
                "line 2: agent.history: expected a whole number, not -1 (e.g. history = 180)",
            ),
            (
                "[agent]\n\nhistory = \"x\"\n",
                "line 3: agent.history: expected a whole number, not x (e.g. history = 180)",
            ),
            (
                "[sojourn]\nflows = 5000000000\n",
                "line 2: sojourn.flows: expected a whole number from 0 to 4294967295, not \
                 5000000000 (e.g. flows = 65536)",
            ),
            (
                "[check]\nsaturated_ratio = \"high\"\n",
                "line 2: check.saturated_ratio: expected a number, not high (e.g. \
                 saturated_ratio = 0.95)",
            ),
            (
                "[serve]\nlisten = \"1.2.3.4:99999\"\n",
                // the parser `--listen` shares, with its own examples
                "line 2: serve.listen: '1.2.3.4:99999': expected an address and port, such as \
                 127.0.0.1:29110, [::1]:29110, :29110 (every IPv4 address) or localhost:29110",
            ),
            (
                "[probes]\ntargets = \"10.0.0.1\"\n",
                "line 2: probes.targets: expected a list in brackets, not 10.0.0.1 (e.g. \
                 targets = [])",
            ),
            (
                "probes.recent = 1.5\n",
                "line 1: probes.recent: expected a whole number, not 1.5 (e.g. recent = 30)",
            ),
            (
                "[sojourn]\nenabled = 1\n",
                "line 2: sojourn.enabled: expected true or false, not 1 (e.g. enabled = true)",
            ),
            (
                "[collector]\nfilter_refresh = \"-1s\"\n",
                "line 2: collector.filter_refresh: expected a duration like \"10s\" or \"500ms\", \
                 not \"-1s\"",
            ),
            (
                "[agent]\ninterval = \"2 parsecs\"\n",
                "line 2: agent.interval: expected a duration like \"10s\" or \"500ms\", not \"2 \
                 parsecs\": unknown unit 'parsecs' (units: ns, us, ms, s, min, h, d; \"1m 30s\" \
                 adds)",
            ),
            (
                "[check]\n\nignore = [\"no-such-code\"]\n",
                "line 3: check.ignore: no finding named 'no-such-code' (tcmon check --explain list)",
            ),
            (
                "[agent]\ninterval = 5\n",
                "line 2: agent.interval: expected a quoted string, not 5 (e.g. interval = \
                 \"1s\")",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e, says, "{text}");
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
        assert!(
            e.contains("line 3") && e.contains("address and port"),
            "{e}"
        );
        let all = parse("[serve]\nlisten = \":29110\"\n").unwrap();
        assert_eq!(all.serve.listen.to_string(), "0.0.0.0:29110");
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
