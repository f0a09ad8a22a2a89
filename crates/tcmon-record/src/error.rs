use std::path::PathBuf;

/// What failed, and on which file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("recording directory {path}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a tcmon recording (no {magic:?} header, or version {version} of the format; this tcmon reads 1)")]
    NotARecording {
        path: PathBuf,
        magic: &'static str,
        version: u32,
    },
    #[error("{path}: frame at byte {offset}: {what}")]
    Frame {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{dir}: nothing recorded{}", match when { Some(w) => format!(" at or before {w}"), None => String::new() })]
    Nothing { dir: PathBuf, when: Option<String> },
}

impl Error {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.to_owned(),
            source,
        }
    }
}
