//! Entering a named network namespace. A socket stays in the namespace it was created in, so
//! only socket creation needs to happen inside it, on a short-lived thread ([`in_netns`]): setns
//! changes the calling thread, and the caller's threads must stay where they are. A thread that
//! is to live in the namespace (the probes' runtime) moves itself with [`enter`].
//!
//! Its own crate so that what only opens sockets in a namespace (the lab, the sojourn
//! measurement, the probes) need not link the rtnetlink collector.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A namespace that could not be entered (or named).
#[derive(Debug, thiserror::Error)]
#[error("enter network namespace '{name}' ({path}){}", hint(source))]
pub struct NetnsError {
    pub name: String,
    pub path: String,
    pub source: io::Error,
}

fn hint(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied {
        " (entering a namespace needs root or CAP_SYS_ADMIN)"
    } else {
        ""
    }
}

/// `/run/netns/NAME` for a name as `ip netns` uses it; a path is taken as given.
pub fn netns_path(name: &str) -> PathBuf {
    if name.contains('/') {
        PathBuf::from(name)
    } else {
        PathBuf::from("/run/netns").join(name)
    }
}

/// Which namespace a name stands for now: the nsfs inode its `/run/netns` entry is bound to.
/// `ip netns del` removes the entry while anyone holding the namespace keeps it alive, and
/// `ip netns add` of the same name binds a new namespace there: a socket opened earlier reads
/// the old one, so a long-running reader compares this before each read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetnsId {
    dev: u64,
    ino: u64,
}

/// The namespace `name` is bound to now; an error when the entry is missing or is not (yet, or
/// any more) a namespace: `ip netns add` creates the file before it binds the namespace on it.
pub fn netns_id(name: &str) -> io::Result<NetnsId> {
    let path = netns_path(name);
    let file = File::open(&path)?;
    // SAFETY: fstatfs writes into the zeroed struct we own; `file` keeps the fd open.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &raw mut fs) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // NSFS_MAGIC; the field's type differs between libc targets.
    #[allow(clippy::unnecessary_cast)]
    if fs.f_type as i64 != 0x6e73_6673 {
        return Err(io::Error::other("not bound to a network namespace"));
    }
    let m = file.metadata()?;
    Ok(NetnsId {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// Runs `f` on a thread that has entered the network namespace `name`.
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
    on_netns_thread(name, false, f)
}

/// Runs `f` as [`in_netns`] does, on a thread that also has a mount namespace of its own with
/// sysfs mounted afresh on /sys, as `ip netns exec` does: sysfs shows the network devices of
/// the namespace that mounted it, so /sys/class/net then lists that namespace's devices.
/// Needs CAP_SYS_ADMIN. The host's mounts are untouched: the thread's mount namespace
/// receives no propagation back to them (a slave) and ends with the thread; `f`'s result must
/// hold no open files from there, or that sysfs outlives it.
pub fn in_netns_with_sysfs<T: Send>(
    name: &str,
    f: impl FnOnce() -> T + Send,
) -> Result<T, NetnsError> {
    on_netns_thread(name, true, f)
}

fn on_netns_thread<T: Send>(
    name: &str,
    own_sysfs: bool,
    f: impl FnOnce() -> T + Send,
) -> Result<T, NetnsError> {
    let path = netns_path(name);
    let err = |source| NetnsError {
        name: name.to_owned(),
        path: path.display().to_string(),
        source,
    };
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            enter(&path)?;
            if own_sysfs {
                mount_own_sysfs()?;
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

/// Moves the calling thread into the network namespace at `path`.
pub fn enter(path: &Path) -> io::Result<()> {
    let file = File::open(path)?;
    // SAFETY: setns only reads the fd, which `file` keeps open for the call.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives the calling thread a mount namespace of its own and mounts sysfs on /sys in it.
fn mount_own_sysfs() -> io::Result<()> {
    let check = |r: libc::c_int| {
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    // SAFETY: unshare and mount with constant, NUL-terminated arguments; they change only this
    // thread's mount namespace (unshare gives it a copy of the host's before anything else).
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        // From here on nothing mounted or unmounted reaches the host's namespace.
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ))?;
        // The host's sysfs stays mounted beneath; detaching it is only tidier.
        libc::umount2(c"/sys".as_ptr(), libc::MNT_DETACH);
        // Read-only: only read here, and a container may allow no other.
        check(libc::mount(
            c"sysfs".as_ptr(),
            c"/sys".as_ptr(),
            c"sysfs".as_ptr(),
            libc::MS_RDONLY,
            std::ptr::null(),
        ))
    }
}
