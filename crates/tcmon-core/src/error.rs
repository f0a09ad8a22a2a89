//! Errors said in one line, for logs and `/healthz`.

/// An error and its sources, `: `-separated; a source whose text an outer error already said
/// is not said again (many errors print their source inside their own message).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use std::fmt;

    /// An error with a source, whose message is `outer` with or without the source's text.
    #[derive(Debug)]
    struct Wrap(&'static str, bool, std::io::Error);

    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if self.1 {
                write!(f, "{}: {}", self.0, self.2)
            } else {
                f.write_str(self.0)
            }
        }
    }

    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.2)
        }
    }

    #[test]
    fn sources_are_said_once() {
        let io = || std::io::Error::other("no such device");
        let quiet = Wrap("read the tc state", false, io());
        assert_eq!(super::chain(&quiet), "read the tc state: no such device");
        let says = Wrap("bind", true, io());
        assert_eq!(super::chain(&says), "bind: no such device");
    }
}
