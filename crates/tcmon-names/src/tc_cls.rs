//! iproute2's class names file (`tc_cls`), read as `tc -nm` reads it (lib/names.c
//! `read_id_name`): blanks before a line's first word are skipped, lines starting with `#` and
//! empty lines are comments, and a line is `MAJOR:MINOR NAME` (both hex, `0x` allowed),
//! `0xID NAME` (the 32-bit class id in hex) or `ID NAME` (decimal); the name is one word and
//! anything after it is ignored (a `# comment`, say).

use std::path::Path;

use tcmon_core::units::Handle;

use crate::SourceError;

/// The `(class id, name)` pairs of a file's text, and a warning for each line tc would refuse.
/// tc then drops the whole file (`Database ... is corrupted`); here the good lines are kept.
pub(crate) fn parse(path: &Path, text: &str) -> (Vec<(Handle, String)>, Vec<SourceError>) {
    let mut names = Vec::new();
    let mut warnings = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let p = line.trim_start_matches([' ', '\t']);
        if p.is_empty() || p.starts_with('#') {
            continue;
        }
        match parse_line(p) {
            Some(Line::Name(h, name)) => names.push((h, name)),
            Some(Line::Skipped) => {}
            None => warnings.push(SourceError::Line {
                path: path.to_owned(),
                line: n + 1,
                what: format!(
                    "not `classid name`: {p:?} (tc -nm ignores the whole file for this line)"
                ),
            }),
        }
    }
    (names, warnings)
}

enum Line {
    Name(Handle, String),
    /// A negative decimal id, which tc reads and skips.
    Skipped,
}

/// `None` when the line is not one of tc's forms.
fn parse_line(p: &str) -> Option<Line> {
    // each form must match up to the name, or the next is tried (as sscanf's count of 3 or 2)
    if let Some((maj, rest)) = hex(p) {
        if let Some((min, name)) = rest
            .strip_prefix(':')
            .and_then(hex)
            .and_then(|(min, rest)| Some((min, word(rest)?)))
        {
            let (maj, min) = (u16::try_from(maj).ok()?, u16::try_from(min).ok()?);
            return Some(Line::Name(Handle::new(maj, min), name));
        }
    }
    if let Some((id, name)) = p
        .strip_prefix("0x")
        .and_then(hex)
        .and_then(|(id, rest)| Some((id, word(rest)?)))
    {
        return Some(Line::Name(Handle(u32::try_from(id).ok()?), name));
    }
    let digits = p.trim_start();
    let end = digits
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map_or(digits.len(), |(i, _)| i);
    let id: i64 = digits[..end].parse().ok()?;
    let name = word(&digits[end..])?;
    Some(u32::try_from(id).map_or(Line::Skipped, |id| Line::Name(Handle(id), name)))
}

/// scanf's `%x`: blanks, an optional `0x`, hex digits.
fn hex(s: &str) -> Option<(u64, &str)> {
    let s = s.trim_start();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    let end = s.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(s.len());
    if end == 0 || end > 16 {
        return None;
    }
    Some((u64::from_str_radix(&s[..end], 16).ok()?, &s[end..]))
}

/// scanf's ` %s`: any blanks (none too: `1:10x` is class 1:10 named `x` for tc), then one word.
fn word(s: &str) -> Option<String> {
    s.split_whitespace().next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> (Vec<(String, String)>, Vec<String>) {
        let (n, w) = parse(Path::new("/etc/iproute2/tc_cls"), text);
        (
            n.into_iter().map(|(h, s)| (h.to_string(), s)).collect(),
            w.into_iter().map(|e| e.to_string()).collect(),
        )
    }

    #[test]
    fn reads_every_form_tc_reads() {
        let text = "# class names\n\
                    \n\
                    1:10 voice\n\
                    \t  1:0x20   video  # the comment is ignored\n\
                    0x1:0x1a2f smith\n\
                    0x00030004 oak\n\
                    65541 decimal\n\
                    -5 negative_is_skipped\n\
                    ffff:1 high\n\
                    1:30x glued\n\
                    7:8\n";
        let (n, w) = names(text);
        assert!(w.is_empty(), "{w:?}");
        let want = [
            ("1:10", "voice"),
            ("1:20", "video"),
            ("1:1a2f", "smith"),
            ("3:4", "oak"),
            ("1:5", "decimal"),
            ("ffff:1", "high"),
            // scanf's readings, which tc keeps: the name need not be apart from the id, and
            // `7:8` alone is the decimal id 7 named `:8`
            ("1:30", "x"),
            (":7", ":8"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect();
        assert_eq!(n, want);
    }

    #[test]
    fn a_bad_line_is_named_and_the_others_kept() {
        let (n, w) = names("1:10 voice\nvoice 1:20\nnot a line\n1:30 bulk\n10000:1 too_big\n");
        assert_eq!(n.len(), 2, "{n:?}");
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].starts_with("names: /etc/iproute2/tc_cls:2: not `classid name`: \"voice 1:20\""),
            "{w:?}"
        );
        assert!(w[1].contains("tc_cls:3:"), "{w:?}");
        assert!(w[2].contains("tc_cls:5:"), "{w:?}");
    }
}
