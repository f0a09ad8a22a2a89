//! LibreQoS's own classifier, read: the LPM trie `map_ip_to_cpu_and_tc` its eBPF programs look
//! each packet's subscriber address up in (the TC program then sets `skb->priority` to the
//! class found, and the XDP one sends the packet to the CPU found).
//!
//! The map is opened read-only (`BPF_OBJ_GET` with `BPF_F_RDONLY`: tcmon never writes it), its
//! type and key and value sizes checked against LibreQoS's layout before any look-up, and each
//! look-up is one `BPF_MAP_LOOKUP_ELEM` (aya's [`LpmTrie`]). The layout, as LibreQoS's
//! `lpm.h` declares it (all fields in host byte order but the address):
//!
//! ```text
//! key   (20 B): u32 prefixlen | 16 B address, IPv6; IPv4 as ff*12 then its 4 bytes
//! value (24 B): u32 cpu | u32 tc_handle (major << 16 | minor) | u64 circuit hash | u64 device hash
//! ```
//!
//! An IPv4 `/24` is stored with prefix length 96 + 24; a single address of either family with
//! 128. A look-up asks for the longest prefix holding the address at 128 bits, as LibreQoS's
//! programs do.

use std::io;
use std::net::IpAddr;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Map, MapData, MapType};
use tcmon_core::Handle;

/// Where LibreQoS pins the map (libbpf's pin-by-name under the default bpffs).
pub const PIN: &str = "/sys/fs/bpf/map_ip_to_cpu_and_tc";

/// The key's bytes: the prefix length (4) and the address (16).
pub const KEY_BYTES: u32 = 20;
/// The value's bytes: cpu (4), class (4), circuit hash (8), device hash (8).
pub const VALUE_BYTES: u32 = 24;

/// The bpffs magic number (`statfs`'s `f_type`), from linux/magic.h.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
/// `BPF_F_RDONLY`: the descriptor may look up, never update.
const BPF_F_RDONLY: u32 = 1 << 3;
/// `BPF_OBJ_GET`'s command number.
const BPF_OBJ_GET: libc::c_long = 7;

/// What LibreQoS's map says of an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// The CPU LibreQoS's XDP program sends the subscriber's packets to.
    pub cpu: u32,
    /// The class its TC program puts in `skb->priority`; `0:0` for an address LibreQoS keeps
    /// in its map but does not shape.
    pub class: Handle,
    /// LibreQoS's hashes of the circuit's and the device's IDs (its own hasher's; they name
    /// nothing tcmon can look up, and are shown as they are).
    pub circuit_hash: u64,
    pub device_hash: u64,
}

/// Why the map cannot be read: each says what to look at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("no bpffs is mounted at {}: LibreQoS pins its maps on one", dir.display())]
    NoBpffs { dir: PathBuf },
    #[error("{} is not pinned: lqosd is not running, or pins its maps elsewhere", path.display())]
    NotPinned { path: PathBuf },
    #[error("{} is not on a bpffs", path.display())]
    NotOnBpffs { path: PathBuf },
    #[error("reading {} needs root (CAP_BPF, or CAP_SYS_ADMIN): {reason}", path.display())]
    Permission { path: PathBuf, reason: String },
    #[error("{} is not a map (a pinned program or link?)", path.display())]
    NotAMap { path: PathBuf },
    #[error("{} is a {found} map, not the LPM trie LibreQoS's is", path.display())]
    WrongType { path: PathBuf, found: String },
    #[error(
        "{} has {key} B keys and {value} B values where LibreQoS's layout has {KEY_BYTES} and \
         {VALUE_BYTES} (another LibreQoS version?): not read",
        path.display()
    )]
    Sizes { path: PathBuf, key: u32, value: u32 },
    #[error("read {}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
}

/// LibreQoS's map, opened read-only and checked.
#[derive(Debug)]
pub struct IpMap {
    path: PathBuf,
    trie: LpmTrie<MapData, [u8; 16], [u8; VALUE_BYTES as usize]>,
}

impl IpMap {
    /// Opens the map pinned at `path` read-only, after checking it is LibreQoS's layout.
    pub fn open(path: &Path) -> Result<IpMap, MapError> {
        let owned = || path.to_owned();
        match std::fs::symlink_metadata(path) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let dir = path.parent().unwrap_or(Path::new("/"));
                return Err(if on_bpffs(dir).unwrap_or(false) {
                    MapError::NotPinned { path: owned() }
                } else {
                    MapError::NoBpffs {
                        dir: dir.to_owned(),
                    }
                });
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(MapError::Permission {
                    path: owned(),
                    reason: e.to_string(),
                })
            }
            Err(e) => {
                return Err(MapError::Read {
                    path: owned(),
                    reason: e.to_string(),
                })
            }
        }
        if !on_bpffs(path).map_err(|e| MapError::Read {
            path: owned(),
            reason: e.to_string(),
        })? {
            return Err(MapError::NotOnBpffs { path: owned() });
        }
        let fd = obj_get_rdonly(path).map_err(|e| match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => MapError::Permission {
                path: owned(),
                reason: e.to_string(),
            },
            // the kernel refuses a read-only descriptor of a program or a link
            Some(libc::EINVAL) => MapError::NotAMap { path: owned() },
            _ => MapError::Read {
                path: owned(),
                reason: e.to_string(),
            },
        })?;
        let data = MapData::from_fd(fd).map_err(|e| MapError::Read {
            path: owned(),
            reason: e.to_string(),
        })?;
        let info = data.info().map_err(|e| MapError::Read {
            path: owned(),
            reason: e.to_string(),
        })?;
        match info.map_type() {
            Ok(MapType::LpmTrie) => {}
            Ok(t) => {
                return Err(MapError::WrongType {
                    path: owned(),
                    found: format!("{t:?}"),
                })
            }
            Err(_) => {
                return Err(MapError::WrongType {
                    path: owned(),
                    found: "unknown".into(),
                })
            }
        }
        let (key, value) = (info.key_size(), info.value_size());
        if (key, value) != (KEY_BYTES, VALUE_BYTES) {
            return Err(MapError::Sizes {
                path: owned(),
                key,
                value,
            });
        }
        // aya checks the sizes again (a mismatch would be its error, never a panic)
        let trie = LpmTrie::try_from(Map::LpmTrie(data)).map_err(|e| MapError::Read {
            path: owned(),
            reason: e.to_string(),
        })?;
        Ok(IpMap {
            path: owned(),
            trie,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The longest prefix holding `ip`, as LibreQoS's programs look it up; `None` when no
    /// prefix holds it.
    pub fn lookup(&self, ip: IpAddr) -> Result<Option<Mapping>, MapError> {
        match self.trie.get(&Key::new(128, key(ip)), 0) {
            Ok(v) => Ok(Some(decode(&v))),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(MapError::Read {
                path: self.path.clone(),
                reason: e.to_string(),
            }),
        }
    }
}

/// An address as LibreQoS's key holds it: IPv6 as it is, IPv4 in the last 4 bytes after 12 of
/// `0xff` (LibreQoS's own encoding, not the `::ffff:0:0/96` mapping).
pub fn key(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V6(v6) => v6.octets(),
        IpAddr::V4(v4) => {
            let mut k = [0xff; 16];
            k[12..].copy_from_slice(&v4.octets());
            k
        }
    }
}

/// The prefix length LibreQoS stores for a prefix of `ip`'s family: IPv4's are counted from
/// bit 96 of the key.
pub fn prefix_len(ip: IpAddr, len: u8) -> u32 {
    match ip {
        IpAddr::V4(_) => 96 + u32::from(len.min(32)),
        IpAddr::V6(_) => u32::from(len.min(128)),
    }
}

/// A value's fields, in host byte order as the kernel stores them.
pub fn decode(v: &[u8; VALUE_BYTES as usize]) -> Mapping {
    let u32_at = |i: usize| u32::from_ne_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
    let u64_at = |i: usize| {
        let mut b = [0; 8];
        b.copy_from_slice(&v[i..i + 8]);
        u64::from_ne_bytes(b)
    };
    Mapping {
        cpu: u32_at(0),
        class: Handle(u32_at(4)),
        circuit_hash: u64_at(8),
        device_hash: u64_at(16),
    }
}

/// A value as LibreQoS writes it (for tests that fill a map of their own).
pub fn encode(m: &Mapping) -> [u8; VALUE_BYTES as usize] {
    let mut v = [0; VALUE_BYTES as usize];
    v[0..4].copy_from_slice(&m.cpu.to_ne_bytes());
    v[4..8].copy_from_slice(&m.class.0.to_ne_bytes());
    v[8..16].copy_from_slice(&m.circuit_hash.to_ne_bytes());
    v[16..24].copy_from_slice(&m.device_hash.to_ne_bytes());
    v
}

/// Whether `path` is on a bpffs.
fn on_bpffs(path: &Path) -> io::Result<bool> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a zeroed statfs is a valid out-buffer; `c` is a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the kernel writes at most one statfs.
    if unsafe { libc::statfs(c.as_ptr(), &raw mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)] // f_type's type is per-arch
    Ok(i64::from(st.f_type as i64) == BPF_FS_MAGIC)
}

/// `bpf_attr` as `BPF_OBJ_GET` reads it: the path, a descriptor (unused) and the file flags.
#[repr(C)]
struct ObjGetAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

/// `BPF_OBJ_GET` with `BPF_F_RDONLY` (aya's `from_pin` asks for read and write).
fn obj_get_rdonly(path: &Path) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let attr = ObjGetAttr {
        pathname: c.as_ptr() as u64,
        bpf_fd: 0,
        file_flags: BPF_F_RDONLY,
    };
    // SAFETY: `attr` is a valid bpf_attr prefix of the size given, and `c` outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET,
            &raw const attr,
            std::mem::size_of::<ObjGetAttr>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key's address bytes, as LibreQoS's `encode_ipv4`/`encode_ipv6` write them.
    #[test]
    fn keys_in_libreqos_encoding() {
        assert_eq!(
            key("100.64.0.1".parse().unwrap()),
            [
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff, // 96 bits of ff
                100, 64, 0, 1, // the IPv4 address, network order
            ]
        );
        assert_eq!(
            key("2001:db8::7".parse().unwrap()),
            [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]
        );
        // not the IPv4-mapped IPv6 form: ::ffff:100.64.0.1 is another key
        assert_ne!(
            key("::ffff:100.64.0.1".parse().unwrap()),
            key("100.64.0.1".parse().unwrap())
        );
        assert_eq!(prefix_len("100.64.1.0".parse().unwrap(), 24), 120);
        assert_eq!(prefix_len("100.64.0.1".parse().unwrap(), 32), 128);
        assert_eq!(prefix_len("2001:db8::".parse().unwrap(), 64), 64);
    }

    /// A value's 24 bytes, on this (little-endian) host.
    #[cfg(target_endian = "little")]
    #[test]
    fn values_decode_field_by_field() {
        let v: [u8; 24] = [
            2, 0, 0, 0, // cpu 2
            0x2f, 0x1a, 0x03, 0x00, // tc_handle 0x0003_1a2f: class 3:1a2f
            0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // circuit hash 0x1122334455667788
            0x01, 0, 0, 0, 0, 0, 0, 0x80, // device hash 0x8000000000000001
        ];
        let m = decode(&v);
        assert_eq!(
            m,
            Mapping {
                cpu: 2,
                class: Handle::new(3, 0x1a2f),
                circuit_hash: 0x1122_3344_5566_7788,
                device_hash: 0x8000_0000_0000_0001,
            }
        );
        assert_eq!(encode(&m), v);
    }

    /// Each way the map cannot be opened without a bpffs says so in its own words (the ones
    /// needing a bpffs are in tests/kernel/libreqos_map.rs).
    #[test]
    fn says_why_it_cannot_open() {
        let dir = std::env::temp_dir().join(format!("tcmon-lqmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("map_ip_to_cpu_and_tc");
        let e = IpMap::open(&missing).unwrap_err();
        assert_eq!(e, MapError::NoBpffs { dir: dir.clone() });
        assert_eq!(
            e.to_string(),
            format!(
                "no bpffs is mounted at {}: LibreQoS pins its maps on one",
                dir.display()
            )
        );
        let file = dir.join("a-file");
        std::fs::write(&file, "not a map").unwrap();
        let e = IpMap::open(&file).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{} is not on a bpffs", file.display())
        );
        let _ = std::fs::remove_dir_all(&dir);
        let e = MapError::Sizes {
            path: PIN.into(),
            key: 20,
            value: 16,
        };
        assert_eq!(
            e.to_string(),
            "/sys/fs/bpf/map_ip_to_cpu_and_tc has 20 B keys and 16 B values where LibreQoS's \
             layout has 20 and 24 (another LibreQoS version?): not read"
        );
    }
}
