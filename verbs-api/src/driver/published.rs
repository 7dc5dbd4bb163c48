//! A device's counters across processes, where `uroce devinfo -v` reads them.
//!
//! The kernel rxe keeps its counters per device, for the device's lifetime,
//! in sysfs (`hw_counters`). A uroce device lives inside each process that
//! opens it, so each driver publishes its counters to a file in a private
//! runtime directory (`UROCE_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/uroce`,
//! else `/tmp/uroce-UID`, made mode 0700 and refused if another user owns
//! it): while open, at most once a second from its progress rounds; at
//! close, added into the device's file of closed contexts. A reader sums
//! them all: the device's counts since the directory was made (a reboot
//! empties `XDG_RUNTIME_DIR`), up to a second behind for running programs.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How often an open device rewrites its file.
pub(super) const PUBLISH_EVERY_NS: u64 = 1_000_000_000;

/// One counter: its name (`--stats`'s) and value.
pub type Stat = (&'static str, u64);

/// Where one open device publishes.
pub(crate) struct Publisher {
    device: String,
    dir: PathBuf,
    /// This context's file while it is open.
    live: PathBuf,
    last: Vec<Stat>,
}

impl Publisher {
    /// The publisher of `device`, or `None` (logged) when there is no
    /// usable runtime directory: counting goes on, unpublished.
    pub fn new(device: &str) -> Option<Publisher> {
        static OPENED: AtomicU64 = AtomicU64::new(0);
        let dir = match runtime_dir() {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!("uroce: the device's counters are not published: {e}");
                return None;
            }
        };
        let n = OPENED.fetch_add(1, Ordering::Relaxed);
        let live = dir.join(format!("{}-{}-{n}.live", std::process::id(), file_safe(device)));
        Some(Publisher { device: device.to_string(), dir, live, last: Vec::new() })
    }

    /// Rewrites this context's file with `stats`, if they changed.
    pub fn publish(&mut self, stats: Vec<Stat>) {
        if stats == self.last {
            return;
        }
        let text = render(&self.device, &stats);
        let tmp = self.live.with_extension("tmp");
        // Written aside and renamed, so a reader never sees half a file.
        if let Err(e) = fs::write(&tmp, text).and_then(|()| fs::rename(&tmp, &self.live)) {
            tracing::debug!("uroce: publishing the counters to {}: {e}", self.live.display());
        }
        self.last = stats;
    }

    /// The device closes: its counts go into the file of closed contexts
    /// (under a lock, as other processes may close at the same moment) and
    /// its live file goes.
    pub fn close(self, stats: Vec<Stat>) {
        if stats.iter().any(|&(_, v)| v > 0) {
            let path = self.dir.join(format!("closed-{}.counters", file_safe(&self.device)));
            if let Err(e) = add_into(&path, &self.device, &stats) {
                tracing::debug!("uroce: adding the counters to {}: {e}", path.display());
            }
        }
        let _ = fs::remove_file(&self.live);
    }
}

/// The counters of `device` summed over every context that published them
/// (open or closed), in the order they were first seen, and how many open
/// contexts in running processes published.
pub fn device_counters(device: &str) -> io::Result<(Vec<(String, u64)>, usize)> {
    let dir = runtime_dir()?;
    let mut sums: Vec<(String, u64)> = Vec::new();
    let mut open = 0;
    for entry in fs::read_dir(&dir)? {
        let path = entry?.path();
        let is_live = path.extension().is_some_and(|e| e == "live");
        if !is_live && path.extension().is_none_or(|e| e != "counters") {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else { continue };
        let Some(stats) = parse(&text).filter(|(d, _)| d == device).map(|(_, s)| s) else { continue };
        if is_live && pid_of(&path).is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists()) {
            open += 1;
        }
        for (name, value) in stats {
            add_to(&mut sums, &name, value);
        }
    }
    Ok((sums, open))
}

/// The private runtime directory, made if missing.
fn runtime_dir() -> io::Result<PathBuf> {
    let uid = fs::metadata("/proc/self")?.uid();
    let dir = match std::env::var_os("UROCE_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            Some(d) => PathBuf::from(d).join("uroce"),
            None => std::env::temp_dir().join(format!("uroce-{uid}")),
        },
    };
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    // In a shared /tmp another user may have made it first: use only a
    // real directory of our own that nobody else may write to.
    let meta = fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        let why = format!("{} is not a private directory of this user (uid {uid})", dir.display());
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    }
    Ok(dir)
}

/// Adds `stats` into the file at `path` (made if missing), holding its lock.
fn add_into(path: &Path, device: &str, stats: &[Stat]) -> io::Result<()> {
    let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut sums: Vec<(String, u64)> = parse(&text).map(|(_, s)| s).unwrap_or_default();
    for &(name, value) in stats {
        add_to(&mut sums, name, value);
    }
    let sums: Vec<(&str, u64)> = sums.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    rewrite(&mut file, &render(device, &sums))
}

/// Adds `value` to counter `name` of `sums` (a new one goes last).
fn add_to(sums: &mut Vec<(String, u64)>, name: &str, value: u64) {
    match sums.iter_mut().find(|(n, _)| n == name) {
        Some((_, sum)) => *sum = sum.saturating_add(value),
        None => sums.push((name.to_string(), value)),
    }
}

fn rewrite(file: &mut File, text: &str) -> io::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(text.as_bytes())
}

/// The file's text: the device, then a counter a line.
fn render(device: &str, stats: &[(&str, u64)]) -> String {
    let mut text = format!("device {device}\n");
    for (name, value) in stats {
        text.push_str(&format!("{name} {value}\n"));
    }
    text
}

/// The device and counters of a file's text; `None` if it is not one.
fn parse(text: &str) -> Option<(String, Vec<(String, u64)>)> {
    let mut lines = text.lines();
    let device = lines.next()?.strip_prefix("device ")?.to_string();
    let stats = lines
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect();
    Some((device, stats))
}

/// The pid at the start of a live file's name.
fn pid_of(path: &Path) -> Option<u32> {
    path.file_name()?.to_str()?.split('-').next()?.parse().ok()
}

/// `device` as part of a file name (device names hold ':' and '/').
fn file_safe(device: &str) -> String {
    device.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect()
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_file_reads_back_as_written() {
        let text = render("udp:127.0.0.1", &[("sent_pkts", 3), ("rcvd_bad_src", 0)]);
        let (device, stats) = parse(&text).unwrap();
        assert_eq!(device, "udp:127.0.0.1");
        assert_eq!(stats, [("sent_pkts".to_string(), 3), ("rcvd_bad_src".to_string(), 0)]);
        assert_eq!(parse("not a counters file"), None);
        assert_eq!(file_safe("udp:fe80::1%eth0"), "udp_fe80__1_eth0");
        assert_eq!(pid_of(Path::new("/x/4242-udp_127.0.0.1-0.live")), Some(4242));
    }
}
