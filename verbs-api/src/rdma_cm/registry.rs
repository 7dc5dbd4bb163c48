//! What the whole process shares: the open contexts (rdma_cm finds devices
//! by address), the ports bound in each port space and the listeners. Each table has its own lock, held only to read
//! or change the table: never while taking another lock.

use super::id::IdInner;
use crate::context::{Context, ContextInner};
use crate::driver::Driver;
use crate::error::Error;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use uroce_transport::cm::PortSpace;
use uroce_transport::engine::Gid;

use super::event::libc_errno::{EADDRINUSE, EADDRNOTAVAIL};

static CONTEXTS: Mutex<Vec<Weak<ContextInner>>> = Mutex::new(Vec::new());
static PORTS: Mutex<Vec<Bound>> = Mutex::new(Vec::new());
static LISTENERS: Mutex<Vec<Bound>> = Mutex::new(Vec::new());
static NEXT_KEY: AtomicUsize = AtomicUsize::new(1);

/// An address an ID holds in a port space.
#[derive(Clone)]
pub(crate) struct Bound {
    pub ps: PortSpace,
    pub addr: SocketAddr,
    pub key: usize,
    pub id: Weak<IdInner>,
}

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A number naming one ID in these tables.
pub(crate) fn new_key() -> usize {
    NEXT_KEY.fetch_add(1, Ordering::Relaxed)
}

/// Called by `Device::open`: rdma_cm may use every context the process opens.
pub(crate) fn note_context(ctx: &Context) {
    let mut list = lock(&CONTEXTS);
    list.retain(|w| w.strong_count() > 0);
    list.push(Arc::downgrade(&ctx.0));
}

/// The contexts still open, oldest first (not a forked child's copies of
/// its parent's).
pub(crate) fn open_contexts() -> Vec<Context> {
    let open = lock(&CONTEXTS).iter().filter_map(|w| w.upgrade().map(Context)).collect::<Vec<_>>();
    open.into_iter().filter(|c| !c.driver().forked_away()).collect()
}

/// Whether a link has address `ip`.
pub(crate) fn has_ip(info: &uroce_stack::link::LinkInfo, ip: IpAddr) -> bool {
    // An IPv4-mapped address is the IPv4 address its GID goes to.
    match Gid::from_ip(ip).ip() {
        IpAddr::V4(v4) => info.ipv4 == Some(v4),
        IpAddr::V6(v6) => info.ipv6.contains(&v6),
    }
}

/// An open context with address `ip`.
pub(crate) fn context_with_ip(ip: IpAddr) -> Option<Context> {
    open_contexts().into_iter().find(|c| has_ip(c.link_info(), ip))
}

/// Starts rdma_cm on `ctx`'s device (QP1 and the CM) if it has not yet;
/// a first start registers the wildcard listeners' services, so that they
/// hear this device's REQs too.
pub(crate) fn start_cm(ctx: &Context) -> Result<(), Error> {
    let driver = ctx.driver();
    if driver.has_qp1() {
        return Ok(());
    }
    let wildcards: Vec<Bound> = listeners().into_iter().filter(|l| l.addr.ip().is_unspecified()).collect();
    driver.with_cm(|qp1, _| {
        for l in &wildcards {
            qp1.register_service(l.ps.service_id(l.addr.port()), l.key);
        }
    })
}

/// One open context of each device, rdma_cm started on each (for a wildcard listener).
pub(crate) fn all_devices() -> Result<Vec<Context>, Error> {
    let mut one_each: Vec<Context> = Vec::new();
    for ctx in open_contexts() {
        if !one_each.iter().any(|c| c.same_device(&ctx)) {
            start_cm(&ctx)?;
            one_each.push(ctx);
        }
    }
    Ok(one_each)
}

/// An open context on `driver`'s device, the oldest: what a connection
/// request's new ID uses.
pub(crate) fn context_on(driver: &Driver) -> Option<Context> {
    open_contexts().into_iter().find(|c| std::ptr::eq(c.driver(), driver))
}

/// Takes `addr` in port space `ps` for ID `key`; port 0 takes a free
/// ephemeral port. Fails as bind(2) does when another ID holds the port on
/// the same address (or either is the wildcard).
pub(crate) fn bind(ps: PortSpace, addr: SocketAddr, key: usize, id: Weak<IdInner>, pick: u32) -> Result<u16, Error> {
    let mut ports = lock(&PORTS);
    ports.retain(|b| b.id.strong_count() > 0);
    let clash = |port: u16| {
        ports.iter().any(|b| {
            b.ps == ps
                && b.addr.port() == port
                && (b.addr.ip() == addr.ip() || b.addr.ip().is_unspecified() || addr.ip().is_unspecified())
        })
    };
    let port = if addr.port() != 0 {
        if clash(addr.port()) {
            let what = format!("{addr} is in use in port space {ps:?}");
            return Err(Error::Cm { verb: "rdma_bind_addr", what, errno: EADDRINUSE });
        }
        addr.port()
    } else {
        // The kernel's ephemeral range, from a random start.
        let (low, high) = (32768u32, 60999u32);
        let span = high - low + 1;
        (0..span).map(|i| (low + (pick + i) % span) as u16).find(|&p| !clash(p)).ok_or_else(|| Error::Cm {
            verb: "rdma_bind_addr",
            what: "no free port in 32768..=60999".into(),
            errno: EADDRNOTAVAIL,
        })?
    };
    ports.push(Bound { ps, addr: SocketAddr::new(addr.ip(), port), key, id });
    Ok(port)
}

pub(crate) fn unbind(key: usize) {
    lock(&PORTS).retain(|b| b.key != key);
}

pub(crate) fn add_listener(b: Bound) {
    lock(&LISTENERS).push(b);
}

pub(crate) fn remove_listener(key: usize) {
    lock(&LISTENERS).retain(|b| b.key != key);
}

pub(crate) fn listeners() -> Vec<Bound> {
    let mut l = lock(&LISTENERS);
    l.retain(|b| b.id.strong_count() > 0);
    l.clone()
}
