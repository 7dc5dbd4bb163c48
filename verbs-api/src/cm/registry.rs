//! What the whole process shares: the open contexts (rdma_cm finds devices
//! by address), the agent of each context, the ports bound in each port
//! space and the listeners. Each table has its own lock, held only to read
//! or change the table: never while taking another lock.

use super::agent::Agent;
use super::id::IdInner;
use crate::context::{Context, Handle};
use crate::error::Error;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use uroce_transport::cm::PortSpace;
use uroce_transport::engine::Error as EngineError;
use uroce_transport::engine::Gid;

use super::event::libc_errno::{EADDRINUSE, EADDRNOTAVAIL};

static CONTEXTS: Mutex<Vec<Weak<Handle>>> = Mutex::new(Vec::new());
static AGENTS: Mutex<Vec<Weak<Agent>>> = Mutex::new(Vec::new());
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

/// The contexts still open, oldest first.
pub(crate) fn open_contexts() -> Vec<Context> {
    lock(&CONTEXTS).iter().filter_map(|w| w.upgrade().map(Context)).collect()
}

/// Whether the context's link has address `ip`.
pub(crate) fn has_ip(ctx: &Context, ip: IpAddr) -> bool {
    let info = ctx.link_info();
    // An IPv4-mapped address is the IPv4 address its GID goes to.
    match Gid::from_ip(ip).ip() {
        IpAddr::V4(v4) => info.ipv4 == Some(v4),
        IpAddr::V6(v6) => info.ipv6.contains(&v6),
    }
}

/// An open context with address `ip`.
pub(crate) fn context_with_ip(ip: IpAddr) -> Option<Context> {
    open_contexts().into_iter().find(|c| has_ip(c, ip))
}

/// The agent of `ctx`, started on first use (it registers the wildcard
/// listeners' services, so that they hear this device's REQs too).
pub(crate) fn agent_for(ctx: &Context) -> Result<Arc<Agent>, Error> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let agent = loop {
        {
            let mut agents = lock(&AGENTS);
            agents.retain(|w| w.strong_count() > 0);
            if let Some(a) = agents.iter().filter_map(Weak::upgrade).find(|a| Arc::ptr_eq(&a.ctx.0, &ctx.0)) {
                return Ok(a);
            }
            match Agent::start(ctx) {
                Ok(a) => {
                    agents.push(Arc::downgrade(&a));
                    break a;
                }
                // The context's previous agent is still letting its last MADs
                // leave (its drop): its QP1 goes in a moment.
                Err(Error::Engine { err: EngineError::GsiQpExists, .. }) if Instant::now() < deadline => {}
                Err(e) => return Err(e),
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    for l in listeners() {
        if l.addr.ip().is_unspecified() {
            agent.register_service(l.ps.service_id(l.addr.port()), l.key);
        }
    }
    Ok(agent)
}

/// An agent for every open context (for a wildcard listener).
pub(crate) fn all_agents() -> Result<Vec<Arc<Agent>>, Error> {
    open_contexts().iter().map(agent_for).collect()
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
