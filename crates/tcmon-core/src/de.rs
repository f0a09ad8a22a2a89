//! Reading the model back from its own JSON (recordings are written in it; see
//! `tcmon-record`): the inverses of the few fields serialized in tc's words rather than as
//! they are held.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use serde::de::{Deserialize, Deserializer, Error};

/// The `&'static str` fields hold tc's words from small fixed sets (`ethernet`, `egress`,
/// `options.htb`); read back, each distinct word is kept once for the life of the process.
fn intern(s: &str) -> &'static str {
    static WORDS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut words = WORDS.lock().unwrap_or_else(PoisonError::into_inner);
    let words = words.get_or_insert_with(HashSet::new);
    if let Some(w) = words.get(s) {
        return w;
    }
    let w: &'static str = Box::leak(s.to_owned().into_boxed_str());
    words.insert(w);
    w
}

pub(crate) fn static_str<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let s: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
    Ok(intern(&s))
}

pub(crate) fn opt_static_str<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<&'static str>, D::Error> {
    let s: Option<std::borrow::Cow<'de, str>> = Deserialize::deserialize(d)?;
    Ok(s.map(|s| intern(&s)))
}

pub(crate) fn vec_static_str<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<&'static str>, D::Error> {
    let v: Vec<std::borrow::Cow<'de, str>> = Deserialize::deserialize(d)?;
    Ok(v.iter().map(|s| intern(s)).collect())
}

/// The inverse of `raw::hex`.
pub(crate) fn hex_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
    if s.len() % 2 != 0 {
        return Err(D::Error::custom(format!("odd length hex string {s:?}")));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
                .ok_or_else(|| D::Error::custom(format!("not hex: {s:?}")))
        })
        .collect()
}

/// The inverse of `filter::hex32` (eight hex digits).
pub(crate) fn hex32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let s: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
    u32::from_str_radix(&s, 16).map_err(|_| D::Error::custom(format!("not a hex u32: {s:?}")))
}

/// tc's word for a setting (`&'static str`), under a name of its own so that serde's derive
/// does not take the field for one borrowed from the input.
pub type Word = &'static str;
