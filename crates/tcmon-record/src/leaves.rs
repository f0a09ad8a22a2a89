//! An object's numbers, in the order its JSON holds them: what a sample records of a qdisc or
//! class whose counters moved, and how a recorded object gets them back.
//!
//! Both directions run serde_json's own serializer, with a formatter that, instead of printing
//! numbers, collects them ([`leaves`]) or prints recorded ones in their place ([`patched`]).
//! The order is therefore the JSON's, for every kind, including kinds and attributes added
//! later, with no list of fields to keep in step. Everything that is not a number (strings,
//! booleans, absent fields) goes into a hash, the object's *shape*: a sample records an object
//! whose shape changed whole, as JSON.

use std::hash::Hasher;
use std::io;

use rustc_hash::FxHasher;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};

/// An object's numbers (as u64 bits: signed as two's complement, floats as IEEE bits) and the
/// hash of the rest of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leaves {
    pub numbers: Vec<u64>,
    pub shape: u64,
}

/// Fills `out` with `value`'s numbers and shape (its vector reused).
pub fn leaves<T: Serialize + ?Sized>(value: &T, out: &mut Leaves) {
    out.numbers.clear();
    let mut shape = FxHasher::default();
    let f = Collect {
        numbers: &mut out.numbers,
        shape: &mut shape,
    };
    let mut ser = serde_json::Serializer::with_formatter(io::sink(), f);
    // The model's Serialize impls do not fail, and io::sink() cannot.
    let _ = value.serialize(&mut ser);
    out.shape = shape.finish();
}

/// `value` with its numbers replaced by `numbers` (of the same shape): its JSON, printed with
/// those numbers, read back.
///
/// # Errors
/// When the numbers do not fit the fields they are printed into (a recording that does not
/// belong to this object).
pub fn patched<T: Serialize + DeserializeOwned>(
    value: &T,
    numbers: &[u64],
) -> Result<T, serde_json::Error> {
    let (mut at, mut missing) = (0, false);
    let f = Substitute {
        numbers,
        at: &mut at,
        missing: &mut missing,
    };
    let mut json = Vec::with_capacity(512);
    {
        let mut ser = serde_json::Serializer::with_formatter(&mut json, f);
        value.serialize(&mut ser)?;
    }
    if missing || at != numbers.len() {
        return Err(serde::de::Error::custom(format!(
            "recorded {} numbers for an object that has {at}",
            numbers.len(),
        )));
    }
    serde_json::from_slice(&json)
}

struct Collect<'a> {
    numbers: &'a mut Vec<u64>,
    shape: &'a mut FxHasher,
}

impl Collect<'_> {
    fn number(&mut self, tag: u8, bits: u64) {
        self.shape.write_u8(tag);
        self.numbers.push(bits);
    }
}

// Numbers are recorded, not printed; the rest is printed into io::sink() as serde_json would.
#[allow(clippy::cast_sign_loss)] // signed numbers are kept as their two's complement bits
impl Formatter for Collect<'_> {
    fn write_null<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.shape.write_u8(b'n');
        Ok(())
    }
    fn write_bool<W: ?Sized + io::Write>(&mut self, _: &mut W, v: bool) -> io::Result<()> {
        self.shape.write_u8(if v { b't' } else { b'f' });
        Ok(())
    }
    fn write_i8<W: ?Sized + io::Write>(&mut self, _: &mut W, v: i8) -> io::Result<()> {
        self.number(b'i', i64::from(v) as u64);
        Ok(())
    }
    fn write_i16<W: ?Sized + io::Write>(&mut self, _: &mut W, v: i16) -> io::Result<()> {
        self.number(b'i', i64::from(v) as u64);
        Ok(())
    }
    fn write_i32<W: ?Sized + io::Write>(&mut self, _: &mut W, v: i32) -> io::Result<()> {
        self.number(b'i', i64::from(v) as u64);
        Ok(())
    }
    fn write_i64<W: ?Sized + io::Write>(&mut self, _: &mut W, v: i64) -> io::Result<()> {
        self.number(b'i', v as u64);
        Ok(())
    }
    fn write_u8<W: ?Sized + io::Write>(&mut self, _: &mut W, v: u8) -> io::Result<()> {
        self.number(b'u', u64::from(v));
        Ok(())
    }
    fn write_u16<W: ?Sized + io::Write>(&mut self, _: &mut W, v: u16) -> io::Result<()> {
        self.number(b'u', u64::from(v));
        Ok(())
    }
    fn write_u32<W: ?Sized + io::Write>(&mut self, _: &mut W, v: u32) -> io::Result<()> {
        self.number(b'u', u64::from(v));
        Ok(())
    }
    fn write_u64<W: ?Sized + io::Write>(&mut self, _: &mut W, v: u64) -> io::Result<()> {
        self.number(b'u', v);
        Ok(())
    }
    fn write_f32<W: ?Sized + io::Write>(&mut self, _: &mut W, v: f32) -> io::Result<()> {
        self.number(b'd', f64::from(v).to_bits());
        Ok(())
    }
    fn write_f64<W: ?Sized + io::Write>(&mut self, _: &mut W, v: f64) -> io::Result<()> {
        self.number(b'd', v.to_bits());
        Ok(())
    }
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.shape.write(fragment.as_bytes());
        Ok(())
    }
    fn end_string<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.shape.write_u8(b'"');
        Ok(())
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, _: &mut W, _: bool) -> io::Result<()> {
        self.shape.write_u8(b'k');
        Ok(())
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.shape.write_u8(b']');
        Ok(())
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.shape.write_u8(b'}');
        Ok(())
    }
}

struct Substitute<'a> {
    numbers: &'a [u64],
    at: &'a mut usize,
    missing: &'a mut bool,
}

impl Substitute<'_> {
    fn next(&mut self) -> u64 {
        let v = self.numbers.get(*self.at).copied();
        *self.at += 1;
        *self.missing |= v.is_none();
        v.unwrap_or(0)
    }
    fn unsigned<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let v = self.next();
        CompactFormatter.write_u64(w, v)
    }
    #[allow(clippy::cast_possible_wrap)] // the bits of a signed number
    fn signed<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let v = self.next() as i64;
        CompactFormatter.write_i64(w, v)
    }
}

impl Formatter for Substitute<'_> {
    fn write_i8<W: ?Sized + io::Write>(&mut self, w: &mut W, _: i8) -> io::Result<()> {
        self.signed(w)
    }
    fn write_i16<W: ?Sized + io::Write>(&mut self, w: &mut W, _: i16) -> io::Result<()> {
        self.signed(w)
    }
    fn write_i32<W: ?Sized + io::Write>(&mut self, w: &mut W, _: i32) -> io::Result<()> {
        self.signed(w)
    }
    fn write_i64<W: ?Sized + io::Write>(&mut self, w: &mut W, _: i64) -> io::Result<()> {
        self.signed(w)
    }
    fn write_u8<W: ?Sized + io::Write>(&mut self, w: &mut W, _: u8) -> io::Result<()> {
        self.unsigned(w)
    }
    fn write_u16<W: ?Sized + io::Write>(&mut self, w: &mut W, _: u16) -> io::Result<()> {
        self.unsigned(w)
    }
    fn write_u32<W: ?Sized + io::Write>(&mut self, w: &mut W, _: u32) -> io::Result<()> {
        self.unsigned(w)
    }
    fn write_u64<W: ?Sized + io::Write>(&mut self, w: &mut W, _: u64) -> io::Result<()> {
        self.unsigned(w)
    }
    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, _: f32) -> io::Result<()> {
        let v = f64::from_bits(self.next());
        CompactFormatter.write_f64(w, v)
    }
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, _: f64) -> io::Result<()> {
        let v = f64::from_bits(self.next());
        CompactFormatter.write_f64(w, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Obj {
        name: String,
        bytes: u64,
        tokens: i32,
        ratio: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        est: Option<u32>,
        tins: Vec<(u8, i64)>,
    }

    fn obj() -> Obj {
        Obj {
            name: "1:10".into(),
            bytes: 1_000_000,
            tokens: -42,
            ratio: 0.25,
            est: None,
            tins: vec![(1, -7), (2, 9)],
        }
    }

    #[test]
    fn numbers_come_in_json_order_and_go_back_where_they_came_from() {
        let mut l = Leaves::default();
        leaves(&obj(), &mut l);
        #[allow(clippy::cast_sign_loss)]
        let want = vec![
            1_000_000,
            -42i64 as u64,
            0.25f64.to_bits(),
            1,
            -7i64 as u64,
            2,
            9,
        ];
        assert_eq!(l.numbers, want);
        let mut numbers = l.numbers.clone();
        numbers[0] = 2_000_000;
        numbers[1] = 17;
        numbers[5] = 3;
        let back = patched(&obj(), &numbers).unwrap();
        let mut expect = obj();
        expect.bytes = 2_000_000;
        expect.tokens = 17;
        expect.tins[1].0 = 3;
        assert_eq!(back, expect);
    }

    #[test]
    fn the_shape_changes_with_what_is_not_a_number() {
        let (mut a, mut b) = (Leaves::default(), Leaves::default());
        leaves(&obj(), &mut a);
        let mut o = obj();
        o.bytes = 5;
        leaves(&o, &mut b);
        assert_eq!(a.shape, b.shape, "numbers are not the shape");
        o.name = "1:11".into();
        leaves(&o, &mut b);
        assert_ne!(a.shape, b.shape);
        let mut o = obj();
        o.est = Some(0);
        leaves(&o, &mut b);
        assert_ne!(a.shape, b.shape, "a field that appears");
        assert_ne!(a.numbers.len(), b.numbers.len());
    }

    #[test]
    fn numbers_that_do_not_fit_are_an_error() {
        let mut l = Leaves::default();
        leaves(&obj(), &mut l);
        assert!(patched(&obj(), &l.numbers[1..]).is_err());
        let mut too_big = l.numbers.clone();
        too_big[3] = 256; // tins[0].0 is a u8
        assert!(patched(&obj(), &too_big).is_err());
    }
}
