//! Addresses: `rdma_bind_addr`, `rdma_listen`, `rdma_resolve_addr` and
//! `rdma_resolve_route`. An address names a device: the open context (or a
//! udp device opened on it) whose link has that IP.

use super::event::libc_errno::{EADDRINUSE, EADDRNOTAVAIL, EINVAL, ENODEV};
use super::event::{CmEvent, CmEventType, ConnParam};
use super::id::{cm_err, CmId, CmaState, IdState, Route};
use super::registry::{self, Bound};
use crate::context::Context;
use crate::device::Device;
use crate::error::Error;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use uroce_transport::cm::ip::flow_label_of_ports;
use uroce_transport::engine::Gid;

/// Hop limit of rdma_cm's RoCE routes (the GRH's, the IPv4 TTL).
const HOP_LIMIT: u8 = 64;

impl CmId {
    /// `rdma_bind_addr`: takes `addr` (port 0: a free one) on the device
    /// with that IP; the wildcard address binds no device yet (a listener on
    /// it hears every device).
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<(), Error> {
        if self.state().cma != CmaState::Idle {
            return Err(cm_err("rdma_bind_addr", EINVAL, "the ID is bound already"));
        }
        self.bind(addr, "rdma_bind_addr")
    }

    fn bind(&self, addr: SocketAddr, verb: &'static str) -> Result<(), Error> {
        let ctx = match addr.ip().is_unspecified() {
            true => None,
            false => Some(device_with(addr.ip(), verb)?),
        };
        // The devices whose links reserve the port, their CM started: a
        // REQ to the port now comes to this process, whose CM answers it
        // (a REJ until the ID listens, as the kernel's), not the dropped
        // packet of a device whose QP1 has not started.
        let reserving = match &ctx {
            Some(c) => {
                registry::start_cm(c)?;
                vec![c.clone()]
            }
            None => registry::all_devices()?,
        };
        // Where the search for a free ephemeral port starts: at random, as
        // the kernel's, so that processes sharing an address (each with
        // its own table of ports) seldom try the same one first.
        let mut pick = match &ctx {
            Some(c) => c.driver().lock().engine.random_psn(),
            None => random_u32(),
        };
        let mut tries = 0;
        let (port, reserved) = loop {
            let port = registry::bind(self.0.ps, addr, self.0.key, Arc::downgrade(&self.0), pick)?;
            let sid = self.0.ps.service_id(port);
            match reserve(&reserving, sid) {
                Ok(()) => break (port, reserving.iter().map(|c| (c.clone(), sid)).collect()),
                Err(err) => {
                    registry::unbind(self.0.key);
                    if err.kind() != std::io::ErrorKind::AddrInUse {
                        return Err(Error::Os { verb, err });
                    }
                }
            }
            tries += 1;
            if addr.port() != 0 || tries == EPHEMERAL_TRIES {
                let what = format!("port {port} of {} is bound by another program sharing the address", addr.ip());
                return Err(cm_err(verb, EADDRINUSE, what));
            }
            pick = random_u32();
        };
        let mut st = self.state();
        st.src = Some(SocketAddr::new(addr.ip(), port));
        st.cma = CmaState::AddrBound;
        st.reserved = reserved;
        if let Some(ctx) = ctx {
            attach(self, &mut st, ctx);
        }
        Ok(())
    }

    /// `rdma_listen`: CONNECT_REQUEST events for REQs to the bound port (an
    /// unbound ID binds the IPv4 wildcard address, port 0, first).
    pub fn listen(&self, backlog: i32) -> Result<(), Error> {
        const VERB: &str = "rdma_listen";
        let _ = backlog;
        if self.state().cma == CmaState::Idle {
            self.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0), VERB)?;
        }
        let (src, ctx) = {
            let st = self.state();
            if st.cma != CmaState::AddrBound {
                return Err(cm_err(VERB, EINVAL, format!("the ID is in state {:?}, not bound", st.cma)));
            }
            (st.src.expect("bound"), st.ctx.clone())
        };
        let devices = match ctx {
            Some(c) => vec![c],
            None => registry::all_devices()?,
        };
        let service_id = self.0.ps.service_id(src.port());
        {
            let mut st = self.state();
            st.cma = CmaState::Listen;
            st.listen_devices = devices.clone();
        }
        registry::add_listener(Bound { ps: self.0.ps, addr: src, key: self.0.key, id: Arc::downgrade(&self.0) });
        for ctx in &devices {
            ctx.driver().with_cm(|qp1, _| qp1.register_service(service_id, self.0.key))?;
            if let Some(ch) = self.0.channel() {
                ch.note_context(ctx);
            }
        }
        Ok(())
    }

    /// `rdma_resolve_addr`: picks the device that reaches `dst` (the one
    /// with `src`'s IP when given) and reports ADDR_RESOLVED. There is no
    /// ARP to wait for: the answer is at once, `timeout` is not needed.
    pub fn resolve_addr(&self, src: Option<SocketAddr>, dst: SocketAddr, timeout: Duration) -> Result<(), Error> {
        const VERB: &str = "rdma_resolve_addr";
        let _ = timeout;
        let (cma, bound) = {
            let st = self.state();
            (st.cma, st.src)
        };
        match (cma, src) {
            (CmaState::Idle, Some(s)) => self.bind(s, VERB)?,
            (CmaState::Idle, None) => {
                let ctx = device_for(dst.ip(), VERB)?;
                let ip = device_ip(&ctx, dst.is_ipv4()).ok_or_else(|| no_family(&ctx, dst, VERB))?;
                self.bind(SocketAddr::new(ip, 0), VERB)?;
            }
            (CmaState::AddrBound, _) => {}
            (s, _) => return Err(cm_err(VERB, EINVAL, format!("the ID is in state {s:?}"))),
        }
        if self.state().ctx.is_none() {
            // Bound to the wildcard: the device that reaches dst decides the source.
            let ctx = device_for(dst.ip(), VERB)?;
            let ip = device_ip(&ctx, dst.is_ipv4()).ok_or_else(|| no_family(&ctx, dst, VERB))?;
            registry::start_cm(&ctx)?;
            let mut st = self.state();
            st.src = Some(SocketAddr::new(ip, bound.map_or(0, |b| b.port())));
            attach(self, &mut st, ctx);
        }
        let mut st = self.state();
        st.dst = Some(dst);
        st.cma = CmaState::AddrResolved;
        drop(st);
        self.report(CmEventType::AddrResolved);
        Ok(())
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS)`: the type of
    /// service of the route resolved next (its traffic class).
    pub fn set_tos(&self, tos: u8) {
        self.state().tos = tos;
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)`: the
    /// QP's local ACK timeout (4.096 us x 2^t), as the kernel's rdma_cm
    /// sets it in place of the one the connection's exchange gives.
    pub fn set_ack_timeout(&self, timeout: u8) {
        self.state().ack_timeout = Some(timeout);
    }

    /// `rdma_resolve_route`: the path on RoCE is the GIDs of the two IPs, the
    /// port's MTU and a flow label from the two ports (as the kernel derives
    /// it); ROUTE_RESOLVED at once.
    pub fn resolve_route(&self, timeout: Duration) -> Result<(), Error> {
        const VERB: &str = "rdma_resolve_route";
        let _ = timeout;
        let mut st = self.state();
        if st.cma != CmaState::AddrResolved {
            return Err(cm_err(VERB, EINVAL, format!("the ID is in state {:?}: resolve the address first", st.cma)));
        }
        let (src, dst, ctx) = (st.src.expect("resolved"), st.dst.expect("resolved"), st.ctx.clone().expect("resolved"));
        let sgid = Gid::from_ip(src.ip());
        st.route = Some(Route {
            sgid,
            sgid_index: gid_index(&ctx, sgid),
            dgid: Gid::from_ip(dst.ip()),
            path_mtu: ctx.query_port().active_mtu,
            flow_label: flow_label_of_ports(src.port(), dst.port()),
            hop_limit: HOP_LIMIT,
            traffic_class: st.tos,
        });
        st.cma = CmaState::RouteResolved;
        drop(st);
        self.report(CmEventType::RouteResolved);
        Ok(())
    }

    /// Queues an event with no parameters about this ID.
    pub(crate) fn report(&self, event: CmEventType) {
        if let Some(ch) = self.0.channel() {
            ch.push(CmEvent {
                id: self.clone(),
                listen_id: None,
                event,
                status: 0,
                param: ConnParam::default(),
                group: None,
            });
        }
    }
}

/// The ID uses `ctx` (whose driver serves its connection); its channel
/// drives the context if it is a manual-progress one.
fn attach(id: &CmId, st: &mut IdState, ctx: Context) {
    if let Some(ch) = id.0.channel() {
        ch.note_context(&ctx);
    }
    st.ctx = Some(ctx);
}

/// The device with address `ip`: an open context, or a udp device opened on it.
fn device_with(ip: IpAddr, verb: &'static str) -> Result<Context, Error> {
    if let Some(ctx) = registry::context_with_ip(ip) {
        return Ok(ctx);
    }
    Device::open(&format!("udp:{ip}")).map_err(|e| {
        cm_err(verb, ENODEV, format!("no uroce device has address {ip}, and opening udp:{ip} failed: {e}"))
    })
}

/// The device that reaches `dst`: an open one of the same family, loopback
/// ones for a loopback destination; on loopback, else, the first free
/// 127.0.0.x (as uroce's tools pick their device).
fn device_for(dst: IpAddr, verb: &'static str) -> Result<Context, Error> {
    let open = registry::open_contexts();
    let fits = |c: &&Context| device_ip(c, dst.is_ipv4()).is_some_and(|ip| ip.is_loopback() == dst.is_loopback());
    if let Some(c) = open.iter().find(fits) {
        return Ok(c.clone());
    }
    if let Some(c) = open.iter().find(|c| device_ip(c, dst.is_ipv4()).is_some()) {
        return Ok(c.clone());
    }
    if dst.is_loopback() && dst.is_ipv4() {
        if let Some(c) = (1..=16u8).find_map(|h| Device::open(&format!("udp:127.0.0.{h}")).ok()) {
            return Ok(c);
        }
    }
    Err(cm_err(
        verb,
        EADDRNOTAVAIL,
        format!("no uroce device reaches {dst}: open one (Device::open) or give a source address"),
    ))
}

/// The device's address of one family (IPv6: not link-local, if it has one).
fn device_ip(ctx: &Context, v4: bool) -> Option<IpAddr> {
    let info = ctx.link_info();
    if v4 {
        info.ipv4.map(IpAddr::V4)
    } else {
        info.ipv6.last().map(|v6| IpAddr::V6(*v6))
    }
}

fn no_family(ctx: &Context, dst: SocketAddr, verb: &'static str) -> Error {
    cm_err(verb, EADDRNOTAVAIL, format!("device {} has no address of {dst}'s family", ctx.link_info().name))
}

/// The index of `gid` in the device's GID table (1, the IPv4 GID, if absent).
pub(crate) fn gid_index(ctx: &Context, gid: Gid) -> u8 {
    ctx.link_info().gids.index_of(gid).map_or(1, |i| i as u8)
}

/// How many ephemeral ports a bind tries when processes sharing the
/// address hold the ones it picked.
const EPHEMERAL_TRIES: u32 = 16;

/// Reserves service `sid` on each of `devices`' links, or on none.
fn reserve(devices: &[Context], sid: u64) -> std::io::Result<()> {
    for (i, ctx) in devices.iter().enumerate() {
        if let Err(e) = ctx.driver().reserve_service(sid) {
            devices[..i].iter().for_each(|c| c.driver().release_service(sid));
            return Err(e);
        }
    }
    Ok(())
}

/// Four bytes from the OS's generator (0 if it has none to give).
fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    let _ = getrandom::getrandom(&mut b);
    u32::from_ne_bytes(b)
}
