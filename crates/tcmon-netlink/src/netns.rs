//! Entering a named network namespace. A netlink socket stays in the namespace it was created
//! in, so only socket creation needs to happen inside it, on a short-lived thread: setns
//! changes the calling thread, and the caller's threads must stay where they are.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::Error;

/// `/run/netns/NAME` for a name as `ip netns` uses it; a path is taken as given.
pub fn netns_path(name: &str) -> PathBuf {
    if name.contains('/') {
        PathBuf::from(name)
    } else {
        PathBuf::from("/run/netns").join(name)
    }
}

/// Runs `f` on a thread that has entered the network namespace `name`.
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> Result<T, Error> {
    let path = netns_path(name);
    let err = |source| Error::Netns {
        name: name.to_owned(),
        path: path.display().to_string(),
        source,
    };
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            let file = File::open(&path)?;
            // SAFETY: setns only reads the fd, which `file` keeps open for the call.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(f())
        })
        .join()
    });
    match result {
        Ok(r) => r.map_err(err),
        Err(_) => Err(err(io::Error::other("netns thread panicked"))),
    }
}
