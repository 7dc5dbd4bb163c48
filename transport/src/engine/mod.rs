//! The queue-pair engine, sans-IO: RC (requester, completer, responder), UC and UD
//! queue pairs as an RNIC (and the kernel's rxe) runs them.
//!
//! The engine never reads a clock, sleeps or touches a socket. It takes
//! commands (`create_qp`, `modify_qp`, `post_send`, `post_recv`, ...), received
//! packets ([`Engine::handle_packet`]) and the time (`now`), and gives:
//! - packets to send, each a RoCEv2 UDP payload (BTH .. ICRC) with the GID it
//!   goes to and its UDP source port ([`Engine::poll_transmit`]); the ICRC
//!   bytes are left zero for the link layer, which knows the IP header;
//! - work completions, per CQ ([`Engine::poll_cq`]);
//! - asynchronous events ([`Engine::poll_event`]);
//! - the next deadline ([`Engine::poll_timeout`]).
//!
//! # Calling order
//! After any input (a command, a packet, [`Engine::handle_timeout`] when the
//! deadline has passed), call `poll_transmit` until it returns `None`, then
//! drain `poll_cq` and `poll_event`, then read `poll_timeout` and call
//! `handle_timeout` once that time has come. Completions and events may appear
//! during transmission (a UD send completes when its packet leaves), so drain
//! them after the transmit loop.
//!
//! Memory is registered with the engine ([`Engine::reg_mr`]) with its bytes
//! behind [`MrStorage`]; every access is checked (key, PD, bounds, access
//! flags) and a failed check is a completion status or a NAK, never a panic.

mod attr;
mod auth;
pub use auth::{marked_authenticated, sealed_parts, Sealed, AUTH_MARK, AUTH_TRAILER_LEN};
mod completer;
mod counters;
mod cq;
mod emit;
mod mcast;
mod memory;
mod qp;
mod requester;
mod window;
pub use requester::MAX_UNACKED_PSNS;
mod responder;
mod srq;
mod state;
mod status;
mod time;
mod timer;
mod wr;

pub use attr::{AddressVector, ModifyError, Mtu, QpAttr, QpAttrMask, QpState, QpType};
pub use counters::{Counter, Counters};
pub use cq::{CqHandle, CqRing};
pub use mcast::{McastChange, MAX_MCAST_GRP, MAX_MCAST_QP_ATTACH, MULTICAST_QPN};
pub use memory::{AtomicOp, MrKeys, MrStorage, Pd};
pub use qp::{flow_label_of_qps, flow_label_to_udp_sport, ud_udp_sport, QpCap, QpInitAttr};
pub use srq::{SrqAttr, SrqHandle};
pub use state::{required_mask, MAX_RD_ATOMIC};
pub use status::WcStatus;
pub use time::{ack_timeout, rnr_timer, Instant};
pub use window::{MwBind, MwType};
pub use wr::{
    AccessFlags, Gid, NetworkHdr, RecvWr, SendFlags, SendWr, SgList, Sge, UdDest, WcFlags, WcOpcode, WorkCompletion,
    WrOp,
};

use crate::wire::{Bth, RocePacket, RoceRepr, Transport};
use crate::Psn;
use crate::Seed;
use core::fmt;
use cq::Cq;
use memory::{Mr, MrTable};
use qp::{Qp, QpTable};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use srq::Srq;
use std::collections::{BTreeMap, VecDeque};
use timer::{Timer, TimerIndex};

/// The longest packet the engine emits: BTH, the largest header set, 4096
/// bytes of data, pad, the authenticated mode's tag and ICRC. Buffers given
/// to `poll_transmit` need this.
pub const MAX_PACKET_LEN: usize = 12 + 28 + 16 + 8 + 4096 + AUTH_TRAILER_LEN + 4;

/// The 40 bytes in front of the data of every UD receive.
pub const GRH_LEN: usize = 40;

/// The longest message, 2^31 bytes (IBTA 9.4.4; the port's `max_msg_sz`; a
/// responder refuses RETH lengths above it, as rxe does).
pub const MAX_MSG_SZ: u32 = 1 << 31;

/// A UC QP that refused this many WRITEs for their R_Key, range or rights
/// goes to ERR at the next (IBTA drops them silently; an RC QP goes to ERR
/// at the first). A correct peer never sends one; 64 tolerates a few
/// honest races with deregistration and stops a key search at the start.
pub const UC_RKEY_VIOLATION_LIMIT: u32 = 64;

/// The default [`EngineConfig::max_inflight_psns`]: 4 MiB of 4 KiB packets.
pub const DEFAULT_MAX_INFLIGHT_PSNS: u32 = 1024;

/// Engine-wide settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Seeds every random choice: QP numbers, keys, initial PSNs and the
    /// CM's comm IDs ([`Engine::derive_seed`]). Applications give
    /// [`Seed::Secret`]; [`Seed::Fixed`] is for runs that must repeat.
    pub seed: Seed,
    /// The port's active MTU; UD messages above it are not sent (as rxe).
    pub port_mtu: Mtu,
    /// The GID of this port, index 0 in the GID table.
    pub gid: Gid,
    /// At most this many request PSNs unacknowledged across all RC QPs (on
    /// top of each QP's window of 128): about what the receive buffers on
    /// the path hold. Past it, a burst of many QPs overflows the receiver's
    /// socket buffer and every QP pays a go-back-N retransmit.
    pub max_inflight_psns: u32,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            seed: Seed::Fixed(0),
            port_mtu: Mtu::Mtu1024,
            gid: Gid::default(),
            max_inflight_psns: DEFAULT_MAX_INFLIGHT_PSNS,
        }
    }
}

/// An asynchronous event (`enum ibv_event_type`, the ones this engine raises).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// IBV_EVENT_QP_REQ_ERR: the responder saw an invalid request and moved to ERR.
    QpRequestError { qpn: u32 },
    /// IBV_EVENT_QP_ACCESS_ERR: the responder saw an access violation and moved to ERR.
    QpAccessError { qpn: u32 },
    /// IBV_EVENT_QP_FATAL: the QP failed for a local reason and moved to ERR.
    QpFatal { qpn: u32 },
    /// IBV_EVENT_SQ_DRAINED: an SQD QP has no outstanding send WR left.
    SqDrained { qpn: u32 },
    /// IBV_EVENT_QP_LAST_WQE_REACHED: a QP on an SRQ went to ERR.
    QpLastWqeReached { qpn: u32, srq: SrqHandle },
    /// IBV_EVENT_CQ_ERR: a CQ overflowed; it takes no more completions.
    CqError { cq: CqHandle },
    /// IBV_EVENT_SRQ_LIMIT_REACHED.
    SrqLimitReached { srq: SrqHandle },
}

/// What a received packet came with from the layer below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxMeta {
    pub src_gid: Gid,
    pub dst_gid: Gid,
    /// The link did not check the packet's ICRC, because it carries the
    /// authenticated mode's mark ([`AUTH_MARK`]), whose MAC stands in for
    /// the ICRC: the engine takes such a packet only if its QP holds a key
    /// and the tag matches, and counts it in `auth_bad_mac` otherwise.
    pub icrc_skipped: bool,
}

/// One packet `poll_transmit` wrote into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written at the start of the buffer, ICRC (zero) included.
    pub len: usize,
    pub dest_gid: Gid,
    pub src_port: u16,
    /// The QP that sent it.
    pub qpn: u32,
    /// An ACK or NAK alone (no data, no atomic result): its sender may hold
    /// it briefly to send it with the next packet.
    pub ack_only: bool,
}

/// Why a command was refused. Failures of a posted WR are completions instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    NoSuchQp(u32),
    NoSuchCq(CqHandle),
    /// A resize smaller than the completions (or receives) waiting in the
    /// queue (rxe: EINVAL).
    QueueTooSmall {
        asked: usize,
        waiting: usize,
    },
    NoSuchSrq(SrqHandle),
    NoSuchPd(Pd),
    NoSuchMr(u32),
    NoSuchMw(u32),
    /// Deregistering a region a memory window is bound to (rxe: EINVAL).
    MrHasWindows(u32),
    /// Attaching to a GID that is no multicast one.
    NotMulticast(Gid),
    /// A port's groups, or a group's QPs, are at their limit (rxe: ENOMEM).
    McastLimit(&'static str),
    /// Detaching a QP that is not attached to the group.
    NotAttached {
        qpn: u32,
        gid: Gid,
    },
    /// Posting is not allowed in this state (e.g. post_send before RTS).
    InvalidState {
        qpn: u32,
        state: QpState,
        verb: &'static str,
    },
    QueueFull {
        qpn: u32,
        verb: &'static str,
    },
    TooManySge {
        given: usize,
        max: u32,
    },
    InlineTooLong {
        given: usize,
        max: u32,
    },
    /// The operation does not exist on this QP type (e.g. READ on UC).
    InvalidOperation {
        qp_type: QpType,
        op: &'static str,
    },
    /// A UD send without a destination.
    MissingUdDest,
    /// Registration asked remote write or atomic without local write.
    InvalidAccess(AccessFlags),
    /// The GSI QP (QP1) exists already: an engine has one.
    GsiQpExists,
    /// The authenticated mode is for RC and UC QPs only.
    AuthNotForUd,
    Modify(ModifyError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Error::NoSuchQp(q) => write!(f, "no QP number 0x{q:06x}"),
            Error::NoSuchCq(c) => write!(f, "no CQ {}", c.0),
            Error::QueueTooSmall { asked, waiting } => {
                write!(f, "{asked} entries hold fewer than the {waiting} waiting: poll (or consume) them first")
            }
            Error::NoSuchSrq(s) => write!(f, "no SRQ {}", s.0),
            Error::NoSuchPd(p) => write!(f, "no PD {}", p.0),
            Error::NoSuchMr(k) => write!(f, "no MR with key 0x{k:08x}"),
            Error::NoSuchMw(k) => write!(f, "no memory window with rkey 0x{k:08x}"),
            Error::NotMulticast(g) => {
                write!(f, "{g} is not a multicast GID (an IPv6 ff00::/8 or IPv4 224.0.0.0/4 address)")
            }
            Error::McastLimit(what) => write!(f, "{what}"),
            Error::NotAttached { qpn, gid } => write!(f, "QP 0x{qpn:06x} is not attached to {gid}"),
            Error::MrHasWindows(k) => {
                write!(f, "MR 0x{k:08x} has memory windows bound to it: invalidate, unbind or free them first")
            }
            Error::InvalidState { qpn, state, verb } => write!(f, "{verb}: QP 0x{qpn:06x} is in state {state}"),
            Error::QueueFull { qpn, verb } => write!(f, "{verb}: queue of QP 0x{qpn:06x} is full"),
            Error::TooManySge { given, max } => write!(f, "{given} scatter/gather entries, at most {max}"),
            Error::InlineTooLong { given, max } => write!(f, "{given} bytes inline, at most {max}"),
            Error::InvalidOperation { qp_type, op } => write!(f, "{op} is not an operation of a {qp_type:?} QP"),
            Error::MissingUdDest => write!(f, "a UD send needs a destination (address handle, QPN, Q_Key)"),
            Error::InvalidAccess(a) => write!(f, "access {a:?}: remote write or atomic needs local write"),
            Error::GsiQpExists => write!(f, "QP1 (the GSI QP) exists already"),
            Error::AuthNotForUd => write!(f, "the authenticated mode is for RC and UC QPs, not UD"),
            Error::Modify(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ModifyError> for Error {
    fn from(e: ModifyError) -> Error {
        Error::Modify(e)
    }
}

/// The engine's state besides its QPs, which every QP reaches (regions, CQs,
/// SRQs, counters, events, timers, the in-flight budget).
pub(crate) struct EngineState {
    pub mrs: MrTable,
    pub cqs: BTreeMap<CqHandle, Cq>,
    pub srqs: BTreeMap<SrqHandle, Srq>,
    pub counters: Counters,
    pub events: VecDeque<Event>,
    pub port_mtu: Mtu,
    /// QPs that lost a completion to an overflowed CQ: they go to ERR.
    pub cq_lost: Vec<u32>,
    /// Request PSNs unacknowledged across all RC QPs (each QP's `inflight`).
    pub inflight: u32,
    /// `EngineConfig::max_inflight_psns`.
    pub inflight_budget: u32,
    /// Every QP's next timer deadline.
    pub timers: TimerIndex,
    /// Inline data buffers of completed WRs, for the next inline posts.
    pub inline_bufs: spare::InlineBufs,
}

impl EngineState {
    pub fn complete(&mut self, cq: CqHandle, wc: WorkCompletion) {
        let recv = matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm);
        if recv && wc.status == WcStatus::Success {
            self.counters.inc(Counter::RdmaRecvs);
        }
        if let Some(q) = self.cqs.get_mut(&cq) {
            if let Err(ev) = q.push(cq, wc) {
                self.events.extend(ev);
                self.cq_lost.push(wc.qp_num);
            }
        }
    }

    /// Takes the completions of QP `qpn` out of its send and receive CQs:
    /// a QP destroyed or reset leaves none behind (see [`cq`]).
    pub fn purge_completions(&mut self, qpn: u32, send_cq: CqHandle, recv_cq: CqHandle) {
        let cqs = if send_cq == recv_cq { &[send_cq][..] } else { &[send_cq, recv_cq][..] };
        for cq in cqs {
            if let Some(q) = self.cqs.get_mut(cq) {
                q.purge_qp(qpn);
            }
        }
    }
}

/// Whether a packet for `qp` may act on it: RC and UC packets only from the
/// peer the QP was connected to (the GID of its address vector) and to the
/// GID it was connected from, as rxe's `check_addr`. Without it any process
/// that can send UDP to port 4791 from its own address could inject into a
/// connection whose QPN and PSN it learned (ReDMArk's A1, which on rxe needs
/// root to spoof the source). UD takes datagrams from anyone, by its nature.
fn from_peer(qp: &Qp, meta: &RxMeta, gid_table: &[Option<Gid>]) -> bool {
    if qp.qp_type() == QpType::Ud {
        return true;
    }
    meta.src_gid == qp.attr.ah_attr.dgid && own_gid(qp, gid_table) == Some(meta.dst_gid)
}

/// `data` without its tag if `qp` is in the authenticated mode and the tag
/// is good; `data` itself for other QPs; `None`, counted, for a bad tag or
/// a replay. Called only for packets from the QP's peer (the others are
/// dropped as from a bad source anyway).
fn authenticated<'a>(qp: &mut Qp, counters: &mut Counters, meta: &RxMeta, data: &'a [u8]) -> Option<&'a [u8]> {
    let (qp_type, from, to) = (qp.qp_type(), (meta.src_gid, qp.attr.dest_qp_num), (meta.dst_gid, qp.qpn));
    let Some(auth) = qp.auth.as_mut() else { return Some(data) };
    match auth.open(data, from, to, qp_type) {
        Ok(inner) => Some(inner),
        Err(auth::Refused::BadMac) => {
            counters.inc(Counter::AuthBadMac);
            None
        }
        Err(auth::Refused::Replay) => {
            counters.inc(Counter::AuthReplay);
            None
        }
    }
}

/// The packet and its headers, if they parse, are TVer 0 and carry the
/// port's P_Key (the membership bit aside: the only table entry is
/// 0xFFFF); counted otherwise.
fn parse_checked<'a>(data: &'a [u8], counters: &mut Counters) -> Option<(RocePacket<&'a [u8]>, RoceRepr)> {
    // `parse` checks the lengths (after it, no accessor of `pkt` panics).
    let pkt = RocePacket::new_unchecked(data);
    let Ok(repr) = RoceRepr::parse(&pkt) else {
        counters.inc(Counter::RcvdMalformed);
        return None;
    };
    if repr.bth.opcode.info().is_none() || repr.bth.tver != 0 {
        counters.inc(Counter::RcvdMalformed);
        return None;
    }
    if repr.bth.pkey & 0x7fff != 0x7fff {
        counters.inc(Counter::BadPkey);
        return None;
    }
    Some((pkt, repr))
}

/// The GID QP `qp` was connected from (its `sgid_index`).
fn own_gid(qp: &Qp, gid_table: &[Option<Gid>]) -> Option<Gid> {
    gid_table.get(usize::from(qp.attr.ah_attr.sgid_index)).copied().flatten()
}

/// The engine: every QP, CQ, SRQ and memory region of one device port.
pub struct Engine {
    config: EngineConfig,
    rng: ChaCha20Rng,
    sh: EngineState,
    qps: QpTable,
    pds: Vec<Pd>,
    next_handle: u32,
    /// Which QP sends next.
    sched: sched::TxSchedule,
    /// The port's GIDs by index (`sgid_index`); entry 0 is `config.gid`.
    gid_table: Vec<Option<Gid>>,
    /// Live QPs in the authenticated mode: while 0, its checks cost nothing.
    auth_qps: usize,
    /// Multicast groups and their QPs.
    mcast: mcast::McastGroups,
}

/// What a region may be registered with: remote writes and atomics change
/// its bytes, so they need LOCAL_WRITE too (IBTA, as rxe checks).
fn check_access(access: AccessFlags) -> Result<(), Error> {
    let remote_changes = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
    match !(access & remote_changes).is_empty() && !access.contains(AccessFlags::LOCAL_WRITE) {
        true => Err(Error::InvalidAccess(access)),
        false => Ok(()),
    }
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        Engine {
            config,
            rng: config.seed.rng(),
            sh: EngineState {
                mrs: MrTable::default(),
                cqs: BTreeMap::new(),
                srqs: BTreeMap::new(),
                counters: Counters::default(),
                events: VecDeque::new(),
                port_mtu: config.port_mtu,
                cq_lost: Vec::new(),
                inflight: 0,
                inflight_budget: config.max_inflight_psns.max(1),
                timers: TimerIndex::default(),
                inline_bufs: spare::InlineBufs::default(),
            },
            qps: QpTable::default(),
            pds: Vec::new(),
            next_handle: 1,
            sched: sched::TxSchedule::default(),
            gid_table: vec![Some(config.gid)],
            auth_qps: 0,
            mcast: Default::default(),
        }
    }

    /// The port's whole GID table (index: a QP's `sgid_index`), which RC
    /// and UC packets must be addressed to; until it is given, the table
    /// is `config.gid` alone.
    pub fn set_gid_table(&mut self, table: Vec<Option<Gid>>) {
        self.gid_table = table;
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle - 1
    }

    /// A random 24-bit PSN from the engine's seed, for `sq_psn`/`rq_psn`.
    pub fn random_psn(&mut self) -> u32 {
        self.rng.gen::<u32>() & Psn::MASK
    }

    /// A random page-aligned I/O virtual address for a region of `len`
    /// bytes, for regions whose address is the library's to choose: a peer
    /// that learns it learns nothing of the process's memory layout
    /// (ReDMArk's V4: consecutive regions at guessable heap addresses).
    pub fn random_iova(&mut self, len: u64) -> u64 {
        loop {
            // Below 2^63 and page-aligned, so that `iova + len` never wraps
            // and alignment within the region is the buffer's own.
            let a = self.rng.gen::<u64>() >> 1 & !0xfff;
            if a != 0 && a.checked_add(len).is_some() {
                return a;
            }
        }
    }

    /// A seed for another generator of this port (the CM's), drawn from the
    /// engine's stream: as secret, or as reproducible, as the engine's.
    pub fn derive_seed(&mut self) -> Seed {
        self.config.seed.derive(&mut self.rng)
    }

    pub fn alloc_pd(&mut self) -> Pd {
        let pd = Pd(self.handle());
        self.pds.push(pd);
        pd
    }

    /// Frees a PD (`ibv_dealloc_pd`; the caller keeps it while regions,
    /// windows, SRQs or QPs use it).
    pub fn dealloc_pd(&mut self, pd: Pd) -> Result<(), Error> {
        let i = self.pds.iter().position(|p| *p == pd).ok_or(Error::NoSuchPd(pd))?;
        self.pds.swap_remove(i);
        Ok(())
    }

    /// Registers `storage` as the bytes at virtual addresses `addr..addr + len`.
    pub fn reg_mr(
        &mut self,
        pd: Pd,
        addr: u64,
        storage: Box<dyn MrStorage>,
        access: AccessFlags,
    ) -> Result<MrKeys, Error> {
        if !self.pds.contains(&pd) {
            return Err(Error::NoSuchPd(pd));
        }
        check_access(access)?;
        // All 32 bits random (rxe: a sequential index and 8 random bits), so
        // that one key tells nothing of another; 0 is left out, as a key a
        // careless peer might send.
        let key = loop {
            let k = self.rng.gen::<u32>();
            if k != 0 && self.sh.mrs.key_is_free(k) {
                break k;
            }
        };
        self.sh.mrs.insert(key, Mr { pd, addr, access, valid: true, storage });
        Ok(MrKeys { lkey: key, rkey: key })
    }

    /// `ibv_rereg_mr` of the PD and access: the region keeps its keys and
    /// memory; what peers and work requests may do with it changes at once.
    pub fn rereg_mr(&mut self, lkey: u32, pd: Pd, access: AccessFlags) -> Result<(), Error> {
        if !self.pds.contains(&pd) {
            return Err(Error::NoSuchPd(pd));
        }
        check_access(access)?;
        match self.sh.mrs.modify(lkey, pd, access) {
            true => Ok(()),
            false => Err(Error::NoSuchMr(lkey)),
        }
    }

    /// `ibv_dereg_mr`; refused while a memory window is bound to the region.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<Box<dyn MrStorage>, Error> {
        self.sh.mrs.remove(lkey).map(|m| m.storage)
    }

    /// Deregisters the region after unbinding every window bound to it
    /// (their keys reach nothing from now on): for owners whose release
    /// cannot fail, as a dropped handle.
    pub fn dereg_mr_unbinding(&mut self, lkey: u32) -> Result<Box<dyn MrStorage>, Error> {
        self.sh.mrs.unbind_windows_on(lkey);
        self.dereg_mr(lkey)
    }

    /// `ibv_alloc_mw`: an unbound memory window of `pd` (see
    /// `engine/window.rs` for the rules). Its rkey, which names it.
    pub fn alloc_mw(&mut self, pd: Pd, kind: MwType) -> Result<u32, Error> {
        if !self.pds.contains(&pd) {
            return Err(Error::NoSuchPd(pd));
        }
        let rng = &mut self.rng;
        Ok(self.sh.mrs.alloc_window(pd, kind, || rng.gen::<u32>()))
    }

    /// `ibv_dealloc_mw` of the window with any rkey it had: bound or not,
    /// its keys reach nothing from now on.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), Error> {
        match self.sh.mrs.dealloc_window(rkey) {
            true => Ok(()),
            false => Err(Error::NoSuchMw(rkey)),
        }
    }

    /// The current rkey of the window with any rkey it had (each bind
    /// changes its key byte).
    pub fn mw_rkey(&self, rkey: u32) -> Option<u32> {
        self.sh.mrs.window_rkey(rkey)
    }

    /// The bytes of a region, to read what peers wrote.
    pub fn mr(&self, lkey: u32) -> Option<&dyn MrStorage> {
        self.sh.mrs.get(lkey).map(|m| &*m.storage)
    }

    pub fn mr_mut(&mut self, lkey: u32) -> Option<&mut (dyn MrStorage + 'static)> {
        self.sh.mrs.get_mut(lkey).map(|m| &mut *m.storage)
    }

    /// Creates a CQ holding at most `cqe` completions.
    pub fn create_cq(&mut self, cqe: usize) -> CqHandle {
        let h = CqHandle(self.handle());
        self.sh.cqs.insert(h, Cq::new(cqe.max(1)));
        h
    }

    /// Destroys a CQ and the completions waiting in it (`ibv_destroy_cq`;
    /// the caller keeps it while QPs use it). Pollers holding its ring keep
    /// the ring's memory until they let go of it.
    pub fn destroy_cq(&mut self, cq: CqHandle) -> Result<(), Error> {
        self.sh.cqs.remove(&cq).map(|_| ()).ok_or(Error::NoSuchCq(cq))
    }

    /// Makes `cq` hold at most `cqe` completions (`ibv_resize_cq`); those
    /// waiting stay, in order. Refused when more than `cqe` wait.
    pub fn resize_cq(&mut self, cq: CqHandle, cqe: usize) -> Result<(), Error> {
        let q = self.sh.cqs.get_mut(&cq).ok_or(Error::NoSuchCq(cq))?;
        q.resize(cqe.max(1)).map_err(|waiting| Error::QueueTooSmall { asked: cqe, waiting })
    }

    pub fn create_srq(&mut self, pd: Pd, attr: SrqAttr) -> Result<SrqHandle, Error> {
        if !self.pds.contains(&pd) {
            return Err(Error::NoSuchPd(pd));
        }
        let h = SrqHandle(self.handle());
        self.sh.srqs.insert(h, Srq { pd, attr, queue: VecDeque::new() });
        Ok(h)
    }

    /// Destroys an SRQ and drops its posted receives (`ibv_destroy_srq`;
    /// the caller keeps it alive while QPs use it).
    pub fn destroy_srq(&mut self, srq: SrqHandle) -> Result<(), Error> {
        self.sh.srqs.remove(&srq).map(|_| ()).ok_or(Error::NoSuchSrq(srq))
    }

    /// An SRQ's attributes (`ibv_query_srq`): its limit reads 0 once the
    /// limit event has fired, until it is armed again.
    pub fn srq_attr(&self, srq: SrqHandle) -> Result<SrqAttr, Error> {
        self.sh.srqs.get(&srq).map(|s| s.attr).ok_or(Error::NoSuchSrq(srq))
    }

    /// Arms (or disarms, with 0) the SRQ limit event.
    pub fn modify_srq_limit(&mut self, srq: SrqHandle, limit: u32) -> Result<(), Error> {
        let s = self.sh.srqs.get_mut(&srq).ok_or(Error::NoSuchSrq(srq))?;
        s.attr.srq_limit = limit;
        Ok(())
    }

    /// Makes `srq` take at most `max_wr` receives (`ibv_modify_srq` with
    /// IBV_SRQ_MAX_WR); those posted stay, in order. Refused when more than
    /// `max_wr` are posted.
    pub fn resize_srq(&mut self, srq: SrqHandle, max_wr: u32) -> Result<(), Error> {
        let s = self.sh.srqs.get_mut(&srq).ok_or(Error::NoSuchSrq(srq))?;
        let waiting = s.queue.len();
        if waiting > max_wr as usize {
            return Err(Error::QueueTooSmall { asked: max_wr as usize, waiting });
        }
        s.attr.max_wr = max_wr;
        Ok(())
    }

    pub fn post_srq_recv(&mut self, srq: SrqHandle, wr: RecvWr) -> Result<(), Error> {
        let s = self.sh.srqs.get_mut(&srq).ok_or(Error::NoSuchSrq(srq))?;
        if s.queue.len() as u32 >= s.attr.max_wr {
            return Err(Error::QueueFull { qpn: 0, verb: "post_srq_recv" });
        }
        if wr.sg_list.len() as u32 > s.attr.max_sge {
            return Err(Error::TooManySge { given: wr.sg_list.len(), max: s.attr.max_sge });
        }
        s.queue.push_back(wr);
        Ok(())
    }

    /// Creates a QP in RESET with a QP number drawn from the seed.
    pub fn create_qp(&mut self, init: QpInitAttr) -> Result<u32, Error> {
        self.check_init(&init)?;
        // QPNs 0 and 1 are special; rxe's pool starts at 0x11.
        let qpn = loop {
            let q = self.rng.gen_range(0x11..=Psn::MASK);
            if !self.qps.contains_key(&q) {
                break q;
            }
        };
        self.qps.insert(qpn, Qp::new(qpn, init));
        Ok(qpn)
    }

    /// Creates QP1, the General Services Interface QP that carries CM MADs:
    /// a UD QP with the fixed QP number 1 (RoCE has no QP0). Its user moves it
    /// to RTS with Q_Key 0x80010000 like any UD QP.
    pub fn create_gsi_qp(&mut self, init: QpInitAttr) -> Result<u32, Error> {
        const GSI_QPN: u32 = 1;
        if init.qp_type != QpType::Ud {
            return Err(Error::InvalidOperation { qp_type: init.qp_type, op: "QP1 (the GSI QP is UD)" });
        }
        if self.qps.contains_key(&GSI_QPN) {
            return Err(Error::GsiQpExists);
        }
        self.check_init(&init)?;
        self.qps.insert(GSI_QPN, Qp::new(GSI_QPN, init));
        Ok(GSI_QPN)
    }

    /// The PD, CQs and SRQ a new QP names exist.
    fn check_init(&self, init: &QpInitAttr) -> Result<(), Error> {
        if !self.pds.contains(&init.pd) {
            return Err(Error::NoSuchPd(init.pd));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !self.sh.cqs.contains_key(&cq) {
                return Err(Error::NoSuchCq(cq));
            }
        }
        if let Some(s) = init.srq {
            if !self.sh.srqs.contains_key(&s) {
                return Err(Error::NoSuchSrq(s));
            }
        }
        Ok(())
    }

    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), Error> {
        let qp = self.qps.remove(&qpn).ok_or(Error::NoSuchQp(qpn))?;
        self.sh.purge_completions(qpn, qp.init.send_cq, qp.init.recv_cq);
        self.sh.inflight -= qp.req.counted_inflight;
        self.sh.timers.remove(qpn, &qp.timers);
        self.sched.forget(qpn);
        self.sh.mrs.release_windows_of(qpn);
        self.mcast.detach_all(qpn);
        self.auth_qps -= usize::from(qp.auth.is_some());
        Ok(())
    }

    /// `ibv_attach_mcast`: UD QP `qpn` receives the datagrams sent to the
    /// multicast GID `gid` (attaching twice changes nothing). The link must
    /// join the group: see [`Engine::poll_mcast_change`].
    pub fn attach_mcast(&mut self, qpn: u32, gid: Gid) -> Result<(), Error> {
        let qp = self.qps.get(&qpn).ok_or(Error::NoSuchQp(qpn))?;
        if qp.qp_type() != QpType::Ud {
            return Err(Error::InvalidOperation { qp_type: qp.qp_type(), op: "attach_mcast" });
        }
        self.mcast.attach(qpn, gid).map_err(|e| match e {
            mcast::AttachError::NotMulticast => Error::NotMulticast(gid),
            mcast::AttachError::TooManyGroups => Error::McastLimit("the port has MAX_MCAST_GRP (8192) groups"),
            mcast::AttachError::GroupFull => Error::McastLimit("the group has MAX_MCAST_QP_ATTACH (56) QPs"),
        })
    }

    /// `ibv_detach_mcast`.
    pub fn detach_mcast(&mut self, qpn: u32, gid: Gid) -> Result<(), Error> {
        match self.mcast.detach(qpn, gid) {
            true => Ok(()),
            false => Err(Error::NotAttached { qpn, gid }),
        }
    }

    /// The next change of the groups the link must make (join a group when
    /// its first QP attached, leave it when the last went).
    pub fn poll_mcast_change(&mut self) -> Option<McastChange> {
        self.mcast.poll_change()
    }

    /// `ibv_query_qp`. `sq_psn` and `rq_psn` are the live ones (the next PSN
    /// to send, the next one expected), as rxe and RNICs report them. In
    /// SQD, `sq_draining` says whether messages already started are still
    /// waiting for their acknowledgements.
    pub fn query_qp(&self, qpn: u32) -> Option<QpAttr> {
        self.qps.get(&qpn).map(|q| {
            let mut attr = q.attr;
            attr.cur_qp_state = attr.qp_state;
            if !matches!(attr.qp_state, QpState::Reset | QpState::Init) {
                attr.rq_psn = q.resp.psn.value();
            }
            if !matches!(attr.qp_state, QpState::Reset | QpState::Init | QpState::Rtr) {
                attr.sq_psn = q.req.psn.value();
            }
            attr.sq_draining = attr.qp_state == QpState::Sqd && q.req.wqes.iter().any(|w| w.started);
            attr
        })
    }

    pub fn qp_type(&self, qpn: u32) -> Option<QpType> {
        self.qps.get(&qpn).map(|q| q.qp_type())
    }

    /// `ibv_modify_qp`: checks the transition and mask, applies the attributes.
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr, mask: QpAttrMask) -> Result<(), Error> {
        let qp = self.qps.get_mut(&qpn).ok_or(Error::NoSuchQp(qpn))?;
        let to = state::check_modify(qp.qp_type(), qp.state(), attr, mask)?;
        modify::apply(qp, &mut self.sh, attr, mask, to);
        if let Some(auth) = qp.auth.as_mut() {
            let psn = |bit: QpAttrMask, p: u32| mask.contains(bit).then(|| Psn::new(p));
            auth.restart(psn(QpAttrMask::SQ_PSN, attr.sq_psn), psn(QpAttrMask::RQ_PSN, attr.rq_psn));
        }
        self.settle(qpn);
        Ok(())
    }

    /// Puts QP `qpn` in the authenticated mode (uroce's own; see
    /// `engine/auth.rs`): every packet it sends carries a MAC under `key`,
    /// and every packet it takes must. Both ends of the connection need the
    /// same key; interop with rxe or an RNIC needs it off. Set in RESET or
    /// INIT, before the PSNs (RTR, RTS).
    pub fn set_qp_auth_key(&mut self, qpn: u32, key: [u8; 32]) -> Result<(), Error> {
        let qp = self.qps.get_mut(&qpn).ok_or(Error::NoSuchQp(qpn))?;
        if qp.qp_type() == QpType::Ud {
            return Err(Error::AuthNotForUd);
        }
        if !matches!(qp.state(), QpState::Reset | QpState::Init) {
            return Err(Error::InvalidState { qpn, state: qp.state(), verb: "set_qp_auth_key" });
        }
        let psns = (Psn::new(qp.attr.sq_psn), Psn::new(qp.attr.rq_psn));
        let nonce_start = self.rng.gen::<u64>();
        let first_key = qp.auth.replace(auth::Auth::new(key, nonce_start, psns.0, psns.1)).is_none();
        self.auth_qps += usize::from(first_key);
        Ok(())
    }

    /// `ibv_post_send`. Errors are the ones `ibv_post_send` returns; a WR that
    /// fails later (a bad lkey, a remote error) fails in its completion.
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), Error> {
        self.post_send_inline(qpn, wr, None)
    }

    /// `ibv_post_send` with the data of an inline WR (`SendFlags::INLINE`)
    /// that the caller gathered from its own memory at post time: that data
    /// is copied (into a buffer a completed inline WR gave back, so a stream
    /// of inline posts allocates nothing) and sent, and the SGEs, which need
    /// name no region, only give its length (their sum must be its length),
    /// as an RNIC ignores an inline SGE's lkey. `None`: as
    /// [`Engine::post_send`].
    pub fn post_send_inline(&mut self, qpn: u32, wr: SendWr, inline: Option<&[u8]>) -> Result<(), Error> {
        let qp = self.qps.get_mut(&qpn).ok_or(Error::NoSuchQp(qpn))?;
        let r = requester::post(qp, &mut self.sh, wr, inline.map(requester::InlineData::Lent));
        self.settle(qpn);
        r
    }

    /// `ibv_wr_complete`: posts a batch of WRs (each with the data of an
    /// inline one, as in [`Engine::post_send_inline`]) all or none: if one is
    /// refused, those before it are taken back and its error returned. (On a
    /// QP in the error state each WR is flushed as it is posted, as rxe
    /// does, so a refusal there leaves the earlier ones flushed.)
    pub fn post_send_batch(&mut self, qpn: u32, wrs: Vec<(SendWr, Option<Vec<u8>>)>) -> Result<(), Error> {
        let qp = self.qps.get_mut(&qpn).ok_or(Error::NoSuchQp(qpn))?;
        let before = qp.req.wqes.len();
        let mut r = Ok(());
        for (wr, inline) in wrs {
            r = requester::post(qp, &mut self.sh, wr, inline.map(requester::InlineData::Owned));
            if r.is_err() {
                // Nothing of this batch has been sent: sending happens in settle.
                qp.req.wqes.truncate(before);
                break;
            }
        }
        self.settle(qpn);
        r
    }

    /// `ibv_post_recv`.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), Error> {
        let qp = self.qps.get_mut(&qpn).ok_or(Error::NoSuchQp(qpn))?;
        if qp.init.srq.is_some() {
            return Err(Error::InvalidOperation { qp_type: qp.qp_type(), op: "post_recv on a QP with an SRQ" });
        }
        if qp.state() == QpState::Reset {
            return Err(Error::InvalidState { qpn, state: qp.state(), verb: "post_recv" });
        }
        if wr.sg_list.len() as u32 > qp.init.cap.max_recv_sge {
            return Err(Error::TooManySge { given: wr.sg_list.len(), max: qp.init.cap.max_recv_sge });
        }
        if qp.rq.len() as u32 >= qp.init.cap.max_recv_wr {
            return Err(Error::QueueFull { qpn, verb: "post_recv" });
        }
        if qp.state() == QpState::Err {
            qp.complete_recv_error(&mut self.sh, &wr, WcStatus::WrFlushErr);
        } else {
            qp.rq.push_back(wr);
        }
        self.settle(qpn);
        Ok(())
    }

    /// Takes in one received RoCEv2 UDP payload (BTH .. ICRC). The ICRC was
    /// checked below; malformed or unexpected packets are dropped.
    pub fn handle_packet(&mut self, now: Instant, meta: RxMeta, data: &[u8]) {
        // The QP is looked up once, from the BTH alone: an authenticated
        // QP's tag is checked before anything parses the rest.
        let Ok(bth) = Bth::new_checked(data) else { return self.sh.counters.inc(Counter::RcvdMalformed) };
        let dest = bth.dest_qp();
        if dest == MULTICAST_QPN && !meta.icrc_skipped {
            return self.handle_multicast(&meta, data);
        }
        let mut qp = self.qps.get_mut(&dest);
        let peer = qp.as_deref().is_some_and(|qp| from_peer(qp, &meta, &self.gid_table));
        // A packet whose ICRC nobody checked has only a MAC to vouch for it.
        if meta.icrc_skipped && !(peer && qp.as_deref().is_some_and(|qp| qp.auth.is_some())) {
            return self.sh.counters.inc(Counter::AuthBadMac);
        }
        let data = match qp.as_deref_mut().filter(|_| peer && self.auth_qps > 0) {
            Some(q) => match authenticated(q, &mut self.sh.counters, &meta, data) {
                Some(inner) => inner,
                None => return,
            },
            None => data,
        };
        let counters = &mut self.sh.counters;
        let Some((pkt, repr)) = parse_checked(data, counters) else { return };
        let op = repr.bth.opcode;
        let Some(qp) = qp else { return counters.inc(Counter::RcvdUnknownQpn) };
        let matches = matches!(
            (op.transport(), qp.qp_type()),
            (Transport::Rc, QpType::Rc) | (Transport::Uc, QpType::Uc) | (Transport::Ud, QpType::Ud)
        );
        if !matches {
            return counters.inc(Counter::RcvdMalformed);
        }
        if !peer {
            return counters.inc(Counter::RcvdBadSrc);
        }
        counters.inc(Counter::RcvdPkts);
        let payload = pkt.payload();
        if op.is_response() {
            completer::on_response(qp, &mut self.sh, now, &repr, payload);
        } else {
            responder::on_request(qp, &mut self.sh, &meta, &repr, payload);
        }
        // `settle`, with the QP at hand rather than looked up again.
        qp.sync(&mut self.sh);
        self.sched.activate(qp);
        self.fail_qps_that_lost_completions();
    }

    /// A datagram to the multicast QPN: a copy for each QP attached to its
    /// destination GID (each checks its Q_Key as for any datagram). None
    /// attached: dropped and counted.
    fn handle_multicast(&mut self, meta: &RxMeta, data: &[u8]) {
        let Some((pkt, repr)) = parse_checked(data, &mut self.sh.counters) else { return };
        let (repr, payload) = (&repr, pkt.payload());
        if repr.bth.opcode.transport() != Transport::Ud {
            return self.sh.counters.inc(Counter::RcvdMalformed);
        }
        let members = self.mcast.members(meta.dst_gid);
        if members.is_empty() {
            return self.sh.counters.inc(Counter::McastNoGroup);
        }
        self.sh.counters.inc(Counter::McastRcvd);
        for &qpn in members.iter() {
            let Some(qp) = self.qps.get_mut(&qpn) else { continue };
            self.sh.counters.inc(Counter::RcvdPkts);
            responder::on_request(qp, &mut self.sh, meta, repr, payload);
            qp.sync(&mut self.sh);
            self.sched.activate(qp);
        }
        self.fail_qps_that_lost_completions();
    }

    /// The engine-wide bookkeeping after any input reached QP `qpn` (a verb,
    /// a packet): its counts and timer deadline synced, a chance to send, and
    /// QPs whose completions an overflowed CQ lost failed.
    fn settle(&mut self, qpn: u32) {
        if let Some(qp) = self.qps.get_mut(&qpn) {
            qp.sync(&mut self.sh);
            self.sched.activate(qp);
        }
        self.fail_qps_that_lost_completions();
    }

    /// Runs the timers due at `now` (only the QPs the timer index files as due).
    pub fn handle_timeout(&mut self, now: Instant) {
        let due = self.sh.timers.take_due(now);
        for &qpn in &due {
            let Some(qp) = self.qps.get_mut(&qpn) else { continue };
            let retransmit = qp.timers.take_expired(Timer::Retransmit, now);
            if retransmit {
                completer::on_retransmit_timeout(qp, &mut self.sh);
            }
            // An expired RNR timer only lets the requester send again.
            if qp.timers.take_expired(Timer::RnrRetry, now) || retransmit {
                self.sched.activate(qp);
            }
            qp.sync(&mut self.sh);
            // Filed early (the index is lazy) or not: now where its timers are.
            self.sh.timers.refile(qpn, &mut qp.timers);
        }
        self.sh.timers.return_due(due);
        self.fail_qps_that_lost_completions();
    }

    /// A QP whose completion an overflowed CQ lost goes to ERR with a QP
    /// fatal event: its user can no longer learn what happened to its work.
    fn fail_qps_that_lost_completions(&mut self) {
        while let Some(qpn) = self.sh.cq_lost.pop() {
            if let Some(qp) = self.qps.get_mut(&qpn).filter(|q| q.state() != QpState::Err) {
                self.sh.events.push_back(Event::QpFatal { qpn });
                qp.enter_error(&mut self.sh);
                qp.sync(&mut self.sh);
                self.sched.activate(qp);
            }
        }
    }

    /// Writes the next packet to send into `buf` (at least [`MAX_PACKET_LEN`]
    /// bytes). Responses go before new requests of the same QP.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        assert!(buf.len() >= MAX_PACKET_LEN, "poll_transmit needs a buffer of MAX_PACKET_LEN bytes");
        debug_assert!(
            self.qps.values().all(|q| q.req.counted_inflight == q.inflight() && TimerIndex::is_current(&q.timers)),
            "an unsynced QP"
        );
        debug_assert_eq!(self.sh.inflight, self.qps.values().map(|q| q.req.counted_inflight).sum::<u32>());
        let tx = self.sched.poll(&mut self.qps, &mut self.sh, now, buf);
        self.fail_qps_that_lost_completions();
        Some(self.seal_and_count(tx?, buf))
    }

    /// The next ACK, NAK or atomic answer QP `qpn` still owes its peer, to
    /// send before the QP is destroyed. An RNIC's ACK leaves with the
    /// completion of the message it acknowledges; a program that destroys
    /// its QP as soon as it sees that completion (ibv_rc_pingpong after its
    /// last message) must not leave the peer retrying into RETRY_EXC_ERR.
    /// READ responses still to send are not owed: the QP goes away
    /// mid-answer, as an RNIC's would.
    pub fn poll_owed_ack(&mut self, qpn: u32, buf: &mut [u8]) -> Option<Transmit> {
        assert!(buf.len() >= MAX_PACKET_LEN, "poll_owed_ack needs a buffer of MAX_PACKET_LEN bytes");
        let qp = self.qps.get_mut(&qpn)?;
        let tx = responder::poll_owed_ack(qp, &mut self.sh, buf);
        qp.sync(&mut self.sh);
        Some(self.seal_and_count(tx?, buf))
    }

    /// Seals `tx` (in `buf`) for an authenticated QP and counts it sent.
    fn seal_and_count(&mut self, mut tx: Transmit, buf: &mut [u8]) -> Transmit {
        if self.auth_qps > 0 {
            if let Some(qp) = self.qps.get_mut(&tx.qpn) {
                let from = (own_gid(qp, &self.gid_table).unwrap_or_default(), qp.qpn);
                let to = (tx.dest_gid, qp.attr.dest_qp_num);
                if let Some(auth) = qp.auth.as_mut() {
                    tx.len = auth.seal(buf, tx.len, from, to);
                }
            }
        }
        self.sh.counters.inc(Counter::SentPkts);
        tx
    }

    /// The oldest completion of `cq`.
    #[must_use]
    pub fn poll_cq(&mut self, cq: CqHandle) -> Option<WorkCompletion> {
        self.sh.cqs.get_mut(&cq)?.pop()
    }

    /// The ring `cq`'s completions wait in, to poll without the engine.
    pub fn cq_ring(&self, cq: CqHandle) -> Option<CqRing> {
        self.sh.cqs.get(&cq).map(|q| q.ring())
    }

    /// Completions waiting in `cq`.
    pub fn cq_len(&self, cq: CqHandle) -> usize {
        self.sh.cqs.get(&cq).map_or(0, |q| q.len())
    }

    /// Completions queued in `cq` since it was created (0 for no such CQ):
    /// an arm (`ibv_req_notify_cq`) fires for the next one, not for those
    /// already waiting.
    pub fn cq_pushed(&self, cq: CqHandle) -> u64 {
        self.sh.cqs.get(&cq).map_or(0, |q| q.pushed())
    }

    /// Whether `cq` overflowed (and takes no more completions).
    pub fn cq_overflowed(&self, cq: CqHandle) -> bool {
        self.sh.cqs.get(&cq).is_some_and(|q| q.is_overflowed())
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.sh.events.pop_front()
    }

    /// When `handle_timeout` must next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sh.timers.next()
    }

    /// Request PSNs unacknowledged across all RC QPs (held to
    /// [`EngineConfig::max_inflight_psns`]).
    pub fn inflight_psns(&self) -> u32 {
        self.sh.inflight
    }

    /// Request PSNs of RC QP `qpn` sent and not yet acknowledged (0 for
    /// another type, a QP that does not send, or no such QP).
    pub fn qp_inflight_psns(&self, qpn: u32) -> u32 {
        self.qps.get(&qpn).map_or(0, |qp| qp.inflight())
    }

    pub fn counters(&self) -> &Counters {
        &self.sh.counters
    }

    /// Receive WRs waiting on an SRQ.
    pub fn srq_len(&self, srq: SrqHandle) -> usize {
        self.sh.srqs.get(&srq).map_or(0, |s| s.queue.len())
    }
}

mod modify;
mod sched;
mod spare;

#[cfg(all(test, feature = "sim"))]
mod test {
    use super::attr::{Mtu, QpType};
    use crate::sim::{create_endpoint, LinkConfig, QpOptions, Sim};

    /// The authenticated mode costs a received packet nothing once no live
    /// QP holds a key: a key set twice counts once, a destroyed QP's goes.
    #[test]
    fn authenticated_qps_count_live_keyed_qps() {
        let mut sim = Sim::new(3, LinkConfig::clean());
        let e = &mut sim.engines[0];
        let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
        let (a, b) = (create_endpoint(e, &o, None, None).qpn, create_endpoint(e, &o, None, None).qpn);
        e.set_qp_auth_key(a, [1; 32]).unwrap();
        e.set_qp_auth_key(a, [2; 32]).unwrap();
        e.set_qp_auth_key(b, [1; 32]).unwrap();
        assert_eq!(e.auth_qps, 2);
        e.destroy_qp(a).unwrap();
        e.destroy_qp(b).unwrap();
        assert_eq!(e.auth_qps, 0);
    }
}
