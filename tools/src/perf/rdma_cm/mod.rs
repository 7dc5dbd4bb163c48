//! perftest's `-R` (and `-z`) over uroce's rdma_cm (`perftest_communication.c`
//! of 4.5): the out-of-band exchange over an rdma_cm RC connection on the
//! test's port, SENDs of the same bytes the TCP exchange carries (the
//! `pingpong_dest`s in binary, big-endian); with `-R` the test's QPs are
//! rdma_cm's too, one connection each, on the same port once the exchange's
//! listener is gone.

mod comm;
mod qps;
mod ud;

pub use comm::CmComm;
pub use qps::{connect_qps, TestConns};

use super::exchange::Comm;
use super::params::{Params, Verb};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;
use uroce_verbs::rdma_cm::{CmEvent, CmEventType, CmId, ConnParam, EventChannel};
use uroce_verbs::Context;

/// A wait for the peer gives up after this long (perftest waits forever).
const WAIT: Duration = Duration::from_secs(60);

/// Waits up to [`WAIT`] for the next event on `ch`.
fn next_event(ch: &EventChannel) -> Result<CmEvent, String> {
    ch.get_cm_event(WAIT).map_err(|e| format!("{e}: the peer did not answer"))
}

/// perftest's complaint about an event it did not expect.
fn unexpected(ev: &CmEvent, what: &str) -> String {
    format!("{what} {} ({ev})", ev.event.code())
}

/// The connection parameters perftest gives its rdma_cm connections.
fn conn_param(p: &Params, verb: Verb) -> ConnParam {
    let reads = if matches!(verb, Verb::Read | Verb::Atomic) { p.out_reads.min(255) as u8 } else { 0 };
    ConnParam {
        responder_resources: reads,
        initiator_depth: reads,
        retry_count: p.retry_count,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

/// This end's IPv4 address: perftest's rdma_cm speaks AF_INET only.
pub fn local_ip(ctx: &Context) -> Result<IpAddr, String> {
    ctx.link_info()
        .ipv4
        .map(IpAddr::V4)
        .ok_or_else(|| format!("{} has no IPv4 address for rdma_cm", ctx.link_info().name))
}

/// The server's address (`check_add_port` with AF_INET).
fn server_addr(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.find(SocketAddr::is_ipv4))
        .ok_or_else(|| "Problem in resolving basic address and port".to_string())
}

/// Resolves the address and route of `id` from this device to `dst`.
fn resolve(ch: &EventChannel, id: &CmId, ctx: &Context, dst: SocketAddr) -> Result<(), String> {
    let src = SocketAddr::new(local_ip(ctx)?, 0);
    id.resolve_addr(Some(src), dst, Duration::from_millis(2000))
        .map_err(|e| format!("rdma_resolve_addr failed: {e}"))?;
    let ev = next_event(ch)?;
    if ev.event != CmEventType::AddrResolved {
        return Err(unexpected(&ev, "unexpected CM event"));
    }
    id.resolve_route(Duration::from_millis(2000)).map_err(|e| format!("rdma_resolve_route failed: {e}"))?;
    let ev = next_event(ch)?;
    if ev.event != CmEventType::RouteResolved {
        return Err(unexpected(&ev, "unexpected CM event"));
    }
    Ok(())
}

/// The exchange over rdma_cm: as the client of `host`, or as the server.
pub fn comm(ctx: &Context, host: Option<&str>, port: u16, p: &Params) -> Result<Comm, String> {
    Ok(match host {
        Some(h) => Comm::over_messages(Box::new(CmComm::connect(ctx, h, port, p)?), true, format!("{h}:{port}")),
        None => {
            let cm = CmComm::accept(ctx, port, p)?;
            let peer = cm.peer();
            Comm::over_messages(Box::new(cm), false, peer)
        }
    })
}
