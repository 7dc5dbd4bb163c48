//! Completion channels, the async event descriptor and rdma_cm's event channel
//! are real descriptors: readable exactly while an event waits (poll/epoll),
//! one record per event with none merged, still right when the application
//! sets O_NONBLOCK on them.

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;
use uroce_verbs::rdma_cm::{CmEventType, EventChannel, PortSpace};
use uroce_verbs::testing::connect_pair;
use uroce_verbs::*;

const T: Duration = Duration::from_secs(10);

/// Whether `fd` is readable within `ms` milliseconds.
fn readable(fd: BorrowedFd<'_>, ms: u16) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(ms)).unwrap() == 1
}

struct Loop {
    _net: TestNet,
    ctx: Context,
    pd: Pd,
    channel: CompChannel,
    cq: Cq,
    a: Qp,
    b: Qp,
}

/// Two QPs of one context connected to each other; `a` completes on a CQ
/// with a completion channel.
fn looped() -> Loop {
    let net = TestNet::new();
    let ctx = Device::open(&net.udp(1)).unwrap();
    let pd = ctx.alloc_pd();
    let channel = ctx.create_comp_channel().unwrap();
    let cq = ctx.create_cq(64, Some(&channel)).unwrap();
    let plain = ctx.create_cq(64, None).unwrap();
    let a = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
    let b = pd.create_qp(&QpInit::rc(&plain, &plain)).unwrap();
    connect_pair(&a, &b);
    Loop { _net: net, ctx, pd, channel, cq, a, b }
}

fn write_once(l: &Loop, mr: &Mr, wr_id: u64) {
    let op = WrOp::RdmaWrite { remote_addr: mr.addr() + 64, rkey: mr.rkey() };
    l.a.post_send(&SendWr::new(wr_id, op, vec![mr.sge(0, 8)])).unwrap();
}

#[test]
fn a_completion_channel_has_one_record_per_event() {
    let l = looped();
    let mr = l.pd.reg_mr(128, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    assert!(!readable(l.channel.as_fd(), 0), "readable with no event");

    // Two events, each from its own arming, before either is taken.
    for wr_id in 1..=2 {
        l.cq.req_notify(false).unwrap();
        write_once(&l, &mr, wr_id);
        assert_eq!(l.cq.wait_one(T).unwrap().wr_id, wr_id);
    }
    assert!(readable(l.channel.as_fd(), 0));
    fcntl(l.channel.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
    assert!(l.channel.get_cq_event(T).is_ok(), "first event");
    assert!(readable(l.channel.as_fd(), 0), "the second event was merged into the first");
    assert!(l.channel.get_cq_event(T).is_ok(), "second event");
    assert!(!readable(l.channel.as_fd(), 0), "readable after both events were taken");
    assert!(l.channel.try_get_cq_event().is_none());

    // Unarmed, a completion raises no event.
    write_once(&l, &mr, 3);
    assert_eq!(l.cq.wait_one(T).unwrap().wr_id, 3);
    assert!(!readable(l.channel.as_fd(), 50), "an unarmed CQ raised an event");
    let _ = &l.b;
}

#[test]
fn the_async_descriptor_is_readable_while_an_event_waits() {
    let l = looped();
    assert!(!readable(l.ctx.async_fd(), 0), "readable with no event");
    // A WRITE past the end of the region: b's responder moves to error and
    // raises IBV_EVENT_QP_ACCESS_ERR; a's request completes in error.
    let mr = l.pd.reg_mr(128, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let op = WrOp::RdmaWrite { remote_addr: mr.addr() + 124, rkey: mr.rkey() };
    l.a.post_send(&SendWr::new(9, op, vec![mr.sge(0, 8)])).unwrap();
    assert_eq!(l.cq.wait_one(T).unwrap().status, WcStatus::RemAccessErr);
    assert!(readable(l.ctx.async_fd(), 5000), "no async record");
    assert_eq!(l.ctx.get_async_event(T).unwrap(), Event::QpAccessError { qpn: l.b.qp_num() });
}

#[test]
fn an_rdma_cm_event_channel_is_readable_while_an_event_waits() {
    let net = TestNet::new();
    let _device = Device::open(&net.udp(1)).unwrap();
    let ch = EventChannel::new().unwrap();
    assert!(!readable(ch.as_fd(), 0));
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let dst: SocketAddr = format!("{}:7471", net.ip(1)).parse().unwrap();
    id.resolve_addr(None, dst, T).unwrap();
    assert!(readable(ch.as_fd(), 5000), "no record for ADDR_RESOLVED");
    assert_eq!(ch.get_cm_event(T).unwrap().event, CmEventType::AddrResolved);
    assert!(!readable(ch.as_fd(), 0), "readable after the only event was taken");
}
