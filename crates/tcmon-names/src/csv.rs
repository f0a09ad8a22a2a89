//! LibreQoS's `ShapedDevices.csv`, read as LibreQoS.py reads it: Python's `csv.reader` (commas,
//! `"` quotes, `""` inside them), rows that are empty or start with `#` skipped, the first
//! other row the header, whose names (lower case, letters and digits only) place the columns;
//! a column the header does not name stays where the original 13-column layout had it. One row
//! per device; the devices of a circuit share its `Circuit ID`.

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::SourceError;

/// What the file says of one circuit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Circuit {
    pub(crate) name: String,
    pub(crate) parent_node: String,
    pub(crate) devices: Vec<String>,
    pub(crate) ips: Vec<String>,
}

#[derive(Clone, Copy)]
enum Field {
    CircuitId,
    CircuitName,
    DeviceName,
    ParentNode,
    Ipv4,
    Ipv6,
}

/// The original layout's columns, and the header names LibreQoS.py accepts for them.
const FIELDS: [(Field, usize, &str); 6] = [
    (Field::CircuitId, 0, "circuitid"),
    (Field::CircuitName, 1, "circuitname"),
    (Field::DeviceName, 3, "devicename"),
    (Field::ParentNode, 4, "parentnode"),
    (Field::Ipv4, 6, "ipv4"),
    (Field::Ipv6, 7, "ipv6"),
];

pub(crate) fn parse(path: &Path, text: &str) -> (FxHashMap<String, Circuit>, Vec<SourceError>) {
    let mut circuits: FxHashMap<String, Circuit> = FxHashMap::default();
    let mut warnings = Vec::new();
    let mut columns: Option<[usize; 6]> = None;
    for (line, row) in Rows::new(text) {
        let row = match row {
            Ok(r) => r,
            Err(what) => {
                warnings.push(SourceError::Line {
                    path: path.to_owned(),
                    line,
                    what: what.to_owned(),
                });
                continue;
            }
        };
        if row.iter().all(String::is_empty) || row[0].starts_with('#') {
            continue;
        }
        let Some(cols) = columns else {
            let mut cols = FIELDS.map(|(_, legacy, _)| legacy);
            for (i, header) in row.iter().enumerate() {
                let norm: String = header
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                if let Some(f) = FIELDS.iter().position(|(_, _, n)| *n == norm) {
                    cols[f] = i;
                }
            }
            columns = Some(cols);
            continue;
        };
        let get = |f: Field| row.get(cols[f as usize]).map_or("", |s| s.trim());
        let id = get(Field::CircuitId);
        if id.is_empty() {
            warnings.push(SourceError::Line {
                path: path.to_owned(),
                line,
                what: "a device without a Circuit ID".to_owned(),
            });
            continue;
        }
        let c = circuits.entry(id.to_owned()).or_default();
        // the first device's row names the circuit, as LibreQoS keeps the first row's values
        if c.name.is_empty() {
            get(Field::CircuitName).clone_into(&mut c.name);
            get(Field::ParentNode).clone_into(&mut c.parent_node);
        }
        let device = get(Field::DeviceName);
        if !device.is_empty() {
            c.devices.push(device.to_owned());
        }
        for f in [Field::Ipv4, Field::Ipv6] {
            // LibreQoS drops the blanks, then splits at commas
            let list: String = get(f).chars().filter(|c| *c != ' ').collect();
            c.ips
                .extend(list.split(',').filter(|s| !s.is_empty()).map(str::to_owned));
        }
    }
    (circuits, warnings)
}

/// The rows of a CSV text with the line each starts on, or what is wrong with a row.
struct Rows<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl<'a> Rows<'a> {
    fn new(text: &'a str) -> Self {
        Rows {
            chars: text.chars().peekable(),
            line: 1,
        }
    }
}

impl Iterator for Rows<'_> {
    type Item = (usize, Result<Vec<String>, &'static str>);

    fn next(&mut self) -> Option<Self::Item> {
        self.chars.peek()?;
        let start = self.line;
        let mut row = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut bad = None;
        while let Some(c) = self.chars.next() {
            match c {
                '"' if quoted => {
                    if self.chars.peek() == Some(&'"') {
                        self.chars.next();
                        field.push('"');
                    } else {
                        quoted = false;
                    }
                }
                '"' if field.is_empty() => quoted = true,
                ',' if !quoted => row.push(std::mem::take(&mut field)),
                '\n' if !quoted => {
                    self.line += 1;
                    break;
                }
                '\r' if !quoted && self.chars.peek() == Some(&'\n') => {}
                c => {
                    if c == '\n' {
                        self.line += 1;
                    }
                    field.push(c);
                }
            }
        }
        if quoted {
            bad = Some("a quoted field that never ends");
        }
        row.push(field);
        Some((start, bad.map_or(Ok(row), Err)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of LibreQoS's ShapedDevices.example.csv under the original 13-column header.
    const EXAMPLE: &str = "\
Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment
10001,\"968 Circle St., Gurnee, IL 60031\",1,Device 1,AP_A,,\"100.64.0.1, 100.64.0.2\",fdd7:b724:0:100::/56,1,1,155,20,
10001,\"968 Circle St., Gurnee, IL 60031\",11,Device 11,AP_A,,100.64.0.12,,1,1,155,20,
# a comment row
10002,\"31 Marconi Street, \"\"B\"\"\",2,Device 2,AP_A,,100.64.0.3,fdd7:b724:0:200::/56,0.5,0.5,2.5,1,
";

    #[test]
    fn circuits_with_their_devices_and_addresses() {
        let (c, w) = parse(Path::new("ShapedDevices.csv"), EXAMPLE);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c["10001"],
            Circuit {
                name: "968 Circle St., Gurnee, IL 60031".into(),
                parent_node: "AP_A".into(),
                devices: vec!["Device 1".into(), "Device 11".into()],
                ips: vec![
                    "100.64.0.1".into(),
                    "100.64.0.2".into(),
                    "fdd7:b724:0:100::/56".into(),
                    "100.64.0.12".into()
                ],
            }
        );
        assert_eq!(c["10002"].name, "31 Marconi Street, \"B\"");
    }

    #[test]
    fn columns_follow_the_header() {
        let text = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,\
                    Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,\
                    Upload Max Mbps,Comment\r\n\
                    7,\"Smith, 12 Oak St\",70,cpe,AP_9,n9,,,10.0.0.7,,1,1,10,2,\r\n\
                    ,nobody,71,cpe,AP_9,,,,10.0.0.8,,1,1,10,2,\r\n\
                    8,\"broken,9,cpe\n";
        let (c, w) = parse(Path::new("/opt/libreqos/src/ShapedDevices.csv"), text);
        assert_eq!(c["7"].name, "Smith, 12 Oak St");
        assert_eq!(c["7"].parent_node, "AP_9");
        assert_eq!(c["7"].ips, ["10.0.0.7"]);
        let w: Vec<String> = w.iter().map(ToString::to_string).collect();
        assert_eq!(
            w,
            [
                "names: /opt/libreqos/src/ShapedDevices.csv:3: a device without a Circuit ID",
                "names: /opt/libreqos/src/ShapedDevices.csv:4: a quoted field that never ends"
            ]
        );
    }
}
