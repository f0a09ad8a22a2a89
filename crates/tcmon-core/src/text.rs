//! What a person reads in tcmon's text output: the numbers in it. For tests (feature
//! `test-support`): the diagnosis's and the commands' tests check that no raw float is printed
//! and that a description's numbers are measured.

/// Numbers printed with four or more decimals (`\d+\.\d{4,}`): raw floats, which no person
/// reads (`queue_delay_ms=1927.4895472379544`). Dotted quads have at most three digits a part.
pub fn raw_floats(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            let dot = i;
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i - dot > 4 {
                out.push(&text[start..i]);
            }
        }
    }
    out
}

/// The numbers a text states, as written (`2`, `4,000`, `1:30`): runs of digits with their
/// `,` `.` `:` parts, except digits that are part of a word (`u32`, `node1`, `r2q`).
pub fn numbers(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let glued = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if !b[i].is_ascii_digit() || glued {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len()
            && (b[i].is_ascii_digit()
                || (matches!(b[i], b',' | b'.' | b':')
                    && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        out.push(&text[start..i]);
        // the rest of a word that starts with digits (`2mbit`, `2-second`) is not a number
        while i < b.len() && b[i].is_ascii_alphanumeric() {
            i += 1;
        }
    }
    out
}
