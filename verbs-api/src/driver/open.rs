//! Opening a device: the first open in a process makes its driver (link,
//! engine, progress thread); later opens of the same device share it.

use super::{DeviceOwner, Driver};
use crate::context::{OpenOptions, Progress};
use crate::error::Error;
use std::sync::{Arc, Mutex, Weak};
use uroce_stack::link::{self, Capture, Impair, OpenedLink};
use uroce_transport::Seed;

/// The devices open in this process, by spec and network namespace.
static OPEN: Mutex<Vec<(Key, Weak<DeviceOwner>)>> = Mutex::new(Vec::new());

/// What names one device: its spec, in the network namespace the opening
/// thread was in (`packet:eth0` or `udp:10.0.0.1` names another interface or
/// address in another namespace).
#[derive(PartialEq, Eq)]
struct Key {
    spec: String,
    netns: String,
}

impl Key {
    /// `spec` in the calling thread's namespace (its `net:[INODE]`; empty
    /// where /proc cannot tell, as if every open were in one namespace).
    fn here(spec: &str) -> Key {
        Key { spec: spec.to_string(), netns: uroce_stack::link::netns::current().unwrap_or_default() }
    }
}

/// The driver of device `spec`: the one already open in this process (if
/// `opts` ask for nothing else than it was opened with), or a new one.
pub(crate) fn open_device(spec: &str, opts: &OpenOptions) -> Result<Arc<DeviceOwner>, Error> {
    // Held while opening, so that two threads opening one device share it.
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    open.retain(|(_, w)| w.strong_count() > 0);
    let key = Key::here(spec);
    if let Some(owner) = open.iter().filter(|(k, _)| *k == key).find_map(|(_, w)| w.upgrade()) {
        check_same_options(spec, &owner.driver.options, opts)?;
        return Ok(owner);
    }
    let link = open_link(spec, opts)?;
    let seed = match opts.seed {
        Some(n) => Seed::Fixed(n),
        None => secret_seed()?,
    };
    let driver = Arc::new(Driver::new(link, opts, seed)?);
    let thread = match opts.progress {
        Progress::Manual => None,
        _ => {
            let d = driver.clone();
            let spawned = std::thread::Builder::new().name("uroce-progress".into()).spawn(move || d.run());
            Some(spawned.map_err(|err| Error::Os { verb: "ibv_open_device", err })?)
        }
    };
    let owner = Arc::new(DeviceOwner { driver, thread: Mutex::new(thread), pid: std::process::id() });
    open.push((key, Arc::downgrade(&owner)));
    uroce_stack::fork::on_fork_child(let_go_after_fork);
    Ok(owner)
}

/// In a forked child: the devices open in the parent are the parent's. The
/// child lets go of their descriptors (its copy of a udp link's socket
/// would keep the parent's port bound after the parent closes it) and
/// forgets them, so that it opens its own; the handles it inherited stay
/// valid memory, and their driver moves no packets. (Runs between fork and
/// the child's first step: it only tries locks, which a parent's thread may
/// have held at the fork.)
extern "C" fn let_go_after_fork() {
    let Ok(mut open) = OPEN.try_lock() else { return };
    for (_, owner) in open.drain(..) {
        if let Some(o) = owner.upgrade() {
            o.driver.let_go_after_fork();
        }
    }
}

/// The link of `spec`, with the impairment and capture `opts` ask for.
fn open_link(spec: &str, opts: &OpenOptions) -> Result<OpenedLink, Error> {
    let OpenedLink { mut link, info } = link::open(spec).map_err(Error::Device)?;
    if let Some(cfg) = opts.impair {
        link = Box::new(Impair::new(link, cfg));
    }
    if let Some(path) = &opts.pcap {
        let captured =
            Capture::to_file(link, info.frame_type, path).map_err(|err| Error::Os { verb: "pcap capture", err })?;
        link = Box::new(captured);
    }
    Ok(OpenedLink { link, info })
}

/// Whether device `spec` (in the calling thread's namespace) is open in this process.
pub(crate) fn is_open(spec: &str) -> bool {
    let key = Key::here(spec);
    let open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    open.iter().any(|(k, w)| *k == key && w.strong_count() > 0)
}

/// A second open of a device shares its driver, whose progress mode, seed,
/// capture and impairment the first open chose: asking for others is an error.
fn check_same_options(spec: &str, first: &OpenOptions, now: &OpenOptions) -> Result<(), Error> {
    let differs = first.progress != now.progress
        || (now.seed.is_some() && now.seed != first.seed)
        || now.pcap != first.pcap
        || now.impair != first.impair
        || (now.max_inflight_psns.is_some() && now.max_inflight_psns != first.max_inflight_psns);
    if !differs {
        return Ok(());
    }
    let what = format!(
        "{spec} is open already in this process ({:?} progress{}{}), and its contexts share one driver: \
         open it with the same options, or open another device",
        first.progress,
        first.pcap.as_ref().map_or(String::new(), |p| format!(", capture to {}", p.display())),
        if first.impair.is_some() { ", impaired" } else { "" },
    );
    Err(Error::InvalidValue { verb: "ibv_open_device", what })
}

/// 256 bits from the operating system's CSPRNG: the engine's keys, QPNs,
/// PSNs and comm IDs follow from them, and nobody can guess them.
fn secret_seed() -> Result<Seed, Error> {
    let mut key = [0u8; 32];
    getrandom::getrandom(&mut key).map_err(|e| Error::Os { verb: "ibv_open_device (getrandom)", err: e.into() })?;
    Ok(Seed::Secret(key))
}
