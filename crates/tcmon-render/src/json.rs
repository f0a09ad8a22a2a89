//! JSON with fields of a caller's own written beside chosen objects as serde_json streams the
//! document: names beside each class of a snapshot without a `Value` of the whole (which cost
//! 330 MB and a third more time at 50,000 circuits).

use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};

/// The fields to add to one object, written as JSON as they are given.
#[derive(Debug, Default)]
pub struct Extra(Vec<u8>);

impl Extra {
    /// Adds `"key": "value"`.
    pub fn field(&mut self, key: &str, value: &str) {
        self.0.push(b',');
        // a string into a Vec cannot fail
        let _ = serde_json::to_writer(&mut self.0, key);
        self.0.push(b':');
        let _ = serde_json::to_writer(&mut self.0, value);
    }

    /// Adds `"key": value` with `value` serialized as JSON.
    pub fn value<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> serde_json::Result<()> {
        self.0.push(b',');
        serde_json::to_writer(&mut self.0, key)?;
        self.0.push(b':');
        serde_json::to_writer(&mut self.0, value)
    }
}

/// Writes `value` as `serde_json::to_writer` does, byte for byte, and at the end of each object
/// on `path` the fields `extra` adds for it. `path` names arrays from the top object down:
/// `["interfaces", "classes"]` is every element of `interfaces` and every element of `classes`
/// in each of them; `extra` is given the element's index in each array of the path down to
/// it (one index for an interface, two for a class).
pub fn write_beside<W, T, F>(w: W, value: &T, path: &[&str], extra: F) -> serde_json::Result<()>
where
    W: io::Write,
    T: Serialize + ?Sized,
    F: FnMut(&[usize], &mut Extra),
{
    let f = Beside {
        path,
        extra,
        buf: Extra::default(),
        has_fields: Vec::with_capacity(path.len()),
        depth: 0,
        matched: 0,
        at: Vec::with_capacity(path.len()),
        key: String::new(),
        capturing: false,
        key_hit: false,
    };
    let mut ser = serde_json::Serializer::with_formatter(w, f);
    value.serialize(&mut ser)
}

/// Follows the path through the formatter's calls. The object of the path's `i`th step (the
/// top object for 0) is at container depth `2i + 1`, its array at `2i + 2`.
struct Beside<'p, F> {
    path: &'p [&'p str],
    extra: F,
    buf: Extra,
    /// Whether each element object around (outermost first) has written a field of its own.
    has_fields: Vec<bool>,
    depth: usize,
    /// Keys of the path the containers around hold.
    matched: usize,
    /// Index of the current element in each matched array.
    at: Vec<usize>,
    /// The key being written, where it could be the path's next.
    key: String,
    capturing: bool,
    /// The last key at the path's next depth was its next key.
    key_hit: bool,
}

impl<F> Beside<'_, F> {
    fn element_depth(&self) -> usize {
        2 * self.matched + 1
    }
    /// The object being written is an element of an array of the path.
    fn is_element(&self) -> bool {
        self.matched > 0 && self.depth == self.element_depth()
    }
}

impl<F: FnMut(&[usize], &mut Extra)> Formatter for Beside<'_, F> {
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.is_element() {
            self.has_fields.push(false);
        }
        CompactFormatter.begin_object(w)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.is_element() {
            self.buf.0.clear();
            (self.extra)(&self.at, &mut self.buf);
            let b = &self.buf.0;
            // an object without fields of its own takes no comma before the first
            let own = self.has_fields.pop().unwrap_or(true);
            let skip = usize::from(!own && !b.is_empty());
            w.write_all(&b[skip..])?;
            if let Some(i) = self.at.last_mut() {
                *i += 1;
            }
        }
        self.depth -= 1;
        CompactFormatter.end_object(w)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.depth == self.element_depth() {
            if let Some(h) = self.has_fields.last_mut() {
                *h = true;
            }
            if self.matched < self.path.len() {
                self.key.clear();
                self.capturing = true;
            }
        }
        CompactFormatter.begin_object_key(w, first)
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.capturing {
            self.capturing = false;
            self.key_hit = self.key == self.path[self.matched];
        }
        CompactFormatter.end_object_key(w)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.depth == self.element_depth() {
            self.key_hit = false;
        }
        CompactFormatter.end_object_value(w)
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.key_hit && self.depth == self.element_depth() + 1 {
            self.key_hit = false;
            self.matched += 1;
            self.at.push(0);
        }
        CompactFormatter.begin_array(w)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.matched > 0 && self.depth == 2 * self.matched {
            self.matched -= 1;
            self.at.pop();
        }
        self.depth -= 1;
        CompactFormatter.end_array(w)
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if self.capturing {
            self.key.push_str(fragment);
        }
        CompactFormatter.write_string_fragment(w, fragment)
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: serde_json::ser::CharEscape,
    ) -> io::Result<()> {
        if self.capturing {
            // no key of a path has an escape
            self.key.push('\0');
        }
        CompactFormatter.write_char_escape(w, escape)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::write_beside;

    fn beside(v: &serde_json::Value, path: &[&str]) -> String {
        let mut out = Vec::new();
        write_beside(&mut out, v, path, |at, e| {
            let s = format!("{at:?}");
            e.field("at", &s);
        })
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn fields_go_at_the_end_of_each_object_of_the_path_and_nowhere_else() {
        // serde_json's Map is sorted by key (no preserve_order): the order below is the output's
        let v = json!({
            "a": [{"classes": [{"x": 1}]}],
            "interfaces": [
                {"classes": [{"h": "1:1", "n": {"classes": [{}]}}, {}, {"q\"": [1, {"y": 2}]}],
                 "name": "eth0", "qdiscs": [{"classes": []}]},
                {"classes": [], "name": "lo"},
                {"classes": null},
                {"classes": [{"k": "v"}], "z": {"classes": [{"w": 0}]}},
                {}
            ],
            "z": 3
        });
        assert_eq!(
            beside(&v, &["interfaces", "classes"]),
            concat!(
                r#"{"a":[{"classes":[{"x":1}]}],"interfaces":["#,
                r#"{"classes":[{"h":"1:1","n":{"classes":[{}]},"at":"[0, 0]"},{"at":"[0, 1]"},"#,
                r#"{"q\"":[1,{"y":2}],"at":"[0, 2]"}],"name":"eth0","qdiscs":[{"classes":[]}],"#,
                r#""at":"[0]"},{"classes":[],"name":"lo","at":"[1]"},{"classes":null,"at":"[2]"},"#,
                r#"{"classes":[{"k":"v","at":"[3, 0]"}],"z":{"classes":[{"w":0}]},"at":"[3]"},"#,
                r#"{"at":"[4]"}],"z":3}"#
            )
        );
        assert_eq!(
            beside(
                &json!({"findings": [{"a": 1}, {"b": [{}]}], "plan": [{}]}),
                &["findings"]
            ),
            r#"{"findings":[{"a":1,"at":"[0]"},{"b":[{}],"at":"[1]"}],"plan":[{}]}"#
        );
        // no field added: what serde_json writes
        let mut out = Vec::new();
        write_beside(&mut out, &v, &["interfaces", "classes"], |_, _| {}).unwrap();
        assert_eq!(out, serde_json::to_vec(&v).unwrap());
    }
}
