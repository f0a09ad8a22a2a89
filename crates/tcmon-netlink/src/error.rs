use std::io;

use tcmon_netns::NetnsError;

/// What went wrong, and where.
///
/// The cause is the error's `source`, not part of its message: print it with an error
/// reporter (`{:#}` in anyhow) to see both, once.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// A named namespace that was read before is no longer there (`ip netns del`); polls
    /// resume when a namespace of that name is back.
    #[error("network namespace '{name}' is gone ({path}); waiting for it to come back")]
    NetnsGone {
        name: String,
        path: String,
        source: io::Error,
    },
    #[error("open rtnetlink socket")]
    Socket(#[source] io::Error),
    #[error("dump {what}{}", on.as_deref().map(|d| format!(" on {d}")).unwrap_or_default())]
    Dump {
        what: &'static str,
        on: Option<String>,
        source: io::Error,
    },
    #[error("no interface named '{name}' (have: {})", available.join(", "))]
    NoSuchDevice {
        name: String,
        available: Vec<String>,
    },
}

impl Error {
    /// Errors the user caused with an argument (`--dev`, `--netns`), as opposed to the system.
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::NoSuchDevice { .. } | Error::Netns { .. })
    }

    /// A dump that may succeed if read again: the receive queue overflowed (ENOBUFS) or the
    /// kernel gave up on a dump that changed under it (EINTR, EBUSY).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Dump { source, .. } => {
                matches!(
                    source.raw_os_error(),
                    Some(libc::ENOBUFS | libc::EINTR | libc::EBUSY)
                )
            }
            _ => false,
        }
    }
}
