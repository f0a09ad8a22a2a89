//! What the decoders hand over as it came: short names, and attributes tcmon does not know or
//! could not decode. Below the objects and the filters, which both carry them.

use serde::{Deserialize, Serialize, Serializer};

/// Short names (kinds, protocols) stored inline: a poll of a big tree makes tens of thousands.
pub use smol_str::SmolStr as Name;

/// An attribute kept as the kernel sent it, because tcmon does not know it or could not decode it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawAttr {
    /// Where it was found, e.g. `options`, `xstats`, `options.htb`.
    #[serde(deserialize_with = "crate::de::static_str")]
    pub at: crate::de::Word,
    #[serde(rename = "type")]
    pub kind: u16,
    #[serde(serialize_with = "hex", deserialize_with = "crate::de::hex_bytes")]
    pub bytes: Vec<u8>,
}

pub(crate) fn hex<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    s.serialize_str(&out)
}

/// Parts of an object's attributes that were kept raw, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Undecoded {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw_attributes: Vec<RawAttr>,
    /// Why something was not decoded (truncated struct, bad nesting, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decode_errors: Vec<String>,
}

impl Undecoded {
    pub fn is_empty(&self) -> bool {
        self.raw_attributes.is_empty() && self.decode_errors.is_empty()
    }
}
