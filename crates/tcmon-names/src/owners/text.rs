//! The two formats managers here write: shell variables and OpenWrt's UCI.

/// `KEY=value` lines as sh reads a file of plain assignments (sqm-scripts' state file, its
/// `sqm.conf` and `IFACE.iface.conf`): `#` lines and blanks skipped, an `export ` before the
/// key allowed, the value unquoted from `"..."` or `'...'`, a trailing `# comment` after an
/// unquoted value dropped. Lines that are not an assignment are skipped.
pub(crate) fn parse_shell_vars(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.is_empty()
            || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            || key.as_bytes()[0].is_ascii_digit()
        {
            continue;
        }
        let value = match value.as_bytes().first() {
            Some(q @ (b'"' | b'\'')) => {
                let rest = &value[1..];
                match rest.find(char::from(*q)) {
                    Some(end) => rest[..end].to_owned(),
                    None => rest.to_owned(),
                }
            }
            _ => value
                .split(" #")
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned(),
        };
        out.push((key.to_owned(), value));
    }
    out
}

/// One section of a UCI file: `config TYPE ['NAME']`, then `option KEY 'value'` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UciSection {
    pub(crate) kind: String,
    /// The name `uci` addresses it by: its own, or `@TYPE[N]` for an unnamed one.
    pub(crate) name: String,
    pub(crate) options: Vec<(String, String)>,
}

impl UciSection {
    pub(crate) fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A UCI file as `uci` reads one: words quoted with `'` or `"` or bare, `#` comments.
pub(crate) fn parse_uci(text: &str) -> Vec<UciSection> {
    let mut out: Vec<UciSection> = Vec::new();
    let mut unnamed: Vec<(String, usize)> = Vec::new();
    for line in text.lines() {
        let words = uci_words(line);
        match words.as_slice() {
            [c, kind, rest @ ..] if c == "config" => {
                let n = match unnamed.iter_mut().find(|(k, _)| k == kind) {
                    Some((_, n)) => {
                        *n += 1;
                        *n - 1
                    }
                    None => {
                        unnamed.push((kind.clone(), 1));
                        0
                    }
                };
                out.push(UciSection {
                    kind: kind.clone(),
                    name: rest
                        .first()
                        .cloned()
                        .unwrap_or_else(|| format!("@{kind}[{n}]")),
                    options: Vec::new(),
                });
            }
            [o, key, value, ..] if o == "option" => {
                if let Some(s) = out.last_mut() {
                    s.options.push((key.clone(), value.clone()));
                }
            }
            _ => {}
        }
    }
    out
}

fn uci_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            '#' => break,
            c if c.is_whitespace() => {
                chars.next();
            }
            '\'' | '"' => {
                chars.next();
                words.push(chars.by_ref().take_while(|x| *x != c).collect());
            }
            _ => {
                let mut w = String::new();
                while let Some(&x) = chars.peek() {
                    if x.is_whitespace() {
                        break;
                    }
                    w.push(x);
                    chars.next();
                }
                words.push(w);
            }
        }
    }
    words
}
