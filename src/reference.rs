//! The references of docs/reference/ that the binary owns, generated from what they describe:
//! the configuration (config.toml, checked against the config structs) and the CLI (clap's
//! help). Tests compare them with the files; `UPDATE_EXPECT=1 cargo test --bin tcmon
//! reference` rewrites them.

use std::fmt::Write as _;

use clap::CommandFactory;

use crate::Cli;

pub(crate) mod json;

/// config.toml: the documented default config.
const CONFIG: &str = include_str!("../config.toml");

/// One key of config.toml: its section, name, default (as written) and the comment above it.
#[derive(Debug)]
struct Key {
    section: String,
    name: String,
    default: String,
    comment: String,
}

/// config.toml's opening comment, each section's own comment (before its first key) and its
/// keys. One key per line, as config.toml writes them.
fn config_keys() -> (String, Vec<(String, String)>, Vec<Key>) {
    let mut intro = String::new();
    let mut sections: Vec<(String, String)> = Vec::new();
    let mut keys = Vec::new();
    let mut comment = String::new();
    for line in CONFIG.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix('#') {
            if !comment.is_empty() {
                comment.push(' ');
            }
            comment.push_str(text.trim());
        } else if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if sections.is_empty() {
                intro = std::mem::take(&mut comment);
            }
            sections.push((name.to_owned(), String::new()));
        } else if let Some((name, value)) = line.split_once('=') {
            let section = sections.last_mut().expect("keys are in sections");
            let comment = std::mem::take(&mut comment);
            keys.push(Key {
                section: section.0.clone(),
                name: name.trim().to_owned(),
                default: value.trim().to_owned(),
                comment,
            });
        } else if line.is_empty() && !comment.is_empty() {
            // a comment and a blank line before the first key: the section's own
            if let Some(s) = sections.last_mut().filter(|s| s.1.is_empty()) {
                s.1 = std::mem::take(&mut comment);
            }
        }
    }
    (intro, sections, keys)
}

/// `docs/reference/configuration.md`.
fn configuration() -> String {
    let (intro, sections, keys) = config_keys();
    let mut out = format!(
        "<!-- Generated from config.toml by `UPDATE_EXPECT=1 cargo test --bin tcmon \
         reference`: do not edit. -->\n\
         # Configuration\n\n\
         {intro}\n\n\
         The Debian package installs this default as /etc/tcmon/config.toml.\n"
    );
    for (section, about) in &sections {
        let _ = write!(out, "\n## `[{section}]`\n\n");
        // A section's comment is the first key's when no blank line parts them.
        if !about.is_empty() {
            let _ = write!(out, "{about}\n\n");
        }
        out.push_str("| key | default | description |\n|---|---|---|\n");
        for k in keys.iter().filter(|k| &k.section == section) {
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} |",
                k.name,
                k.default,
                k.comment.replace('|', "\\|")
            );
        }
    }
    out
}

/// `docs/reference/cli.md`: every command's `--help`.
fn cli() -> String {
    let mut out = String::from(
        "<!-- Generated from the CLI definition (src/main.rs) by `UPDATE_EXPECT=1 cargo test \
         --bin tcmon reference`: do not edit. -->\n\
         # Command line\n\n\
         Each command's `--help`. The man pages (`man tcmon`, `man tcmon-dump`, ...) say the \
         same.\n",
    );
    let mut cmd = Cli::command();
    cmd.build();
    help_of(&mut cmd, "tcmon", &mut out);
    out
}

fn help_of(cmd: &mut clap::Command, name: &str, out: &mut String) {
    let help = cmd.render_long_help().to_string();
    let _ = write!(out, "\n## `{name}`\n\n```text\n{}\n```\n", help.trim_end());
    for sub in cmd.get_subcommands_mut() {
        // `help` is clap's own
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let name = format!("{name} {}", sub.get_name());
        help_of(sub, &name, out);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde::de::{self, Deserialize, Visitor};

    use super::*;
    use crate::config;

    #[test]
    fn the_configuration_reference_is_current() {
        expect_test::expect_file!["../docs/reference/configuration.md"].assert_eq(&configuration());
    }

    #[test]
    fn the_json_reference_is_current() {
        expect_test::expect_file!["../docs/reference/json.md"].assert_eq(&json::markdown());
    }

    #[test]
    fn the_cli_reference_is_current() {
        expect_test::expect_file!["../docs/reference/cli.md"].assert_eq(&cli());
    }

    /// The index lists every reference.
    #[test]
    fn the_index_lists_every_reference() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference");
        let index = std::fs::read_to_string(format!("{dir}/README.md")).unwrap();
        for e in std::fs::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name != "README.md" {
                assert!(
                    index.contains(&format!("]({name})")),
                    "{name} not in README.md"
                );
            }
        }
    }

    /// Every relative link of the docs resolves, none leaves the repository, and the README's
    /// test command is the one `.ci/run` runs (docs/check-links.sh says which link is broken).
    #[test]
    fn the_docs_links_resolve() {
        let out = std::process::Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/check-links.sh"))
            .output()
            .expect("bash runs docs/check-links.sh");
        assert!(
            out.status.success(),
            "broken links:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// User docs say what is true now: no work history (sessions, issues, "this VM"); that
    /// belongs in commit messages and docs/dev/.
    #[test]
    fn user_docs_tell_no_history() {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut files = vec![format!("{root}/README.md")];
        let mut dirs = vec![format!("{root}/docs")];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let path = e.unwrap().path();
                if path.is_dir() {
                    if !path.ends_with("dev") {
                        dirs.push(path.to_string_lossy().into_owned());
                    }
                } else if path.extension().is_some_and(|x| x == "md") {
                    files.push(path.to_string_lossy().into_owned());
                }
            }
        }
        let said = [
            "this vm",
            "this session",
            "last session",
            "previous session",
            "the session before",
            "issue #",
            "not understood yet",
        ];
        let mut found = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap().to_lowercase();
            for (n, line) in text.lines().enumerate() {
                let issue_number = line
                    .match_indices("issue ")
                    .any(|(i, m)| line[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()));
                if issue_number || said.iter().any(|s| line.contains(s)) {
                    found.push(format!("{f}:{}: {line}", n + 1));
                }
            }
        }
        assert!(
            found.is_empty(),
            "history in user docs:\n{}",
            found.join("\n")
        );
    }

    /// What a struct's `Deserialize` asks for: its field names.
    struct Fields(&'static [&'static str]);

    impl<'de> de::Deserializer<'de> for &mut Fields {
        type Error = de::value::Error;

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(de::Error::custom("fields taken"))
        }

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
        let mut f = Fields(&[]);
        let _ = T::deserialize(&mut f);
        f.0
    }

    /// config.toml has every key the config structs read, and no other.
    #[test]
    fn config_toml_documents_every_key_of_the_config() {
        let mut read = BTreeSet::new();
        for section in fields::<config::Config>() {
            let keys = match *section {
                "collector" => fields::<config::CollectorConfig>(),
                "agent" => fields::<config::AgentConfig>(),
                "probes" => fields::<config::ProbesConfig>(),
                "check" => fields::<tcmon_diag::Thresholds>(),
                "serve" => fields::<config::ServeConfig>(),
                "sojourn" => fields::<config::SojournConfig>(),
                "names" => fields::<config::NamesConfig>(),
                "managers" => fields::<config::ManagersConfig>(),
                "record" => fields::<config::RecordConfig>(),
                other => panic!("[{other}]: name its type here"),
            };
            assert!(!keys.is_empty(), "[{section}] has no keys");
            read.extend(keys.iter().map(|k| format!("{section}.{k}")));
        }
        let documented: BTreeSet<String> = config_keys()
            .2
            .iter()
            .map(|k| format!("{}.{}", k.section, k.name))
            .collect();
        assert_eq!(documented, read);
    }
}
