//! What a person reads in a finding's text: the numbers in it.

/// Numbers printed with four or more decimals (`\d+\.\d{4,}`): raw floats, which no person
/// reads (`queue_delay_ms=1927.4895472379544`). Dotted quads have at most three digits a part.
pub(super) fn raw_floats(text: &str) -> Vec<&str> {
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
