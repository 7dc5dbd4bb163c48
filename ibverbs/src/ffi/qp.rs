//! Queue pairs: `ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_destroy_qp`, and the inline `ibv_post_send` / `ibv_post_recv`, which
//! C calls through the context's ops. RC, UC and UD, each with its own
//! receive queue or an SRQ's.

use super::abi::*;
use super::ah::ud_dest;
use super::cq::{UroceCq, CQS};
use super::handles::Live;
use super::memory::{UrocePd, PDS};
use super::qp_ex::{fill_wr_ops, WrBatch};
use super::srq::{UroceSrq, SRQS};
use super::{guard, null_on_err, refused, symver};
use crate::explain::explain;
use core::ffi::{c_int, c_void};
use core::ptr;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use uroce_verbs::{
    AccessFlags, AddressVector, Gid, Mtu, Pd, Qp, QpAttr, QpAttrMask, QpCap, QpInit, QpState, QpType, RecvWr,
    SendFlags, SendWr, SgList, Sge, WrOp,
};

/// A QP as C holds it: a `verbs_qp` (`ibv_qp_ex`, whose first member is
/// the `ibv_qp`), then uroce's.
#[repr(C)]
pub struct UroceQp {
    qp: IbvQpEx,
    /// `verbs_qp.comp_mask`: VERBS_QP_EX when made with `ibv_wr_*` builders.
    comp_mask: u32,
    _xrcd: *mut c_void,
    pub inner: Qp,
    /// The work requests `ibv_wr_*` are building, posted by `ibv_wr_complete`.
    pub batch: Mutex<WrBatch>,
    /// The queue sizes it was created with (`ibv_query_qp` answers them).
    cap: IbvQpCap,
    pd: &'static UrocePd,
    send_cq: &'static UroceCq,
    recv_cq: &'static UroceCq,
    srq: Option<&'static UroceSrq>,
}

pub static QPS: Live = Live::new();

/// `verbs_qp.comp_mask`: the QP's `ibv_qp_ex` is served (`ibv_qp_to_qp_ex`).
const VERBS_QP_EX: u32 = 1 << 1;

fn qp_type_of(t: c_int) -> Option<QpType> {
    match t {
        IBV_QPT_RC => Some(QpType::Rc),
        IBV_QPT_UC => Some(QpType::Uc),
        IBV_QPT_UD => Some(QpType::Ud),
        _ => None,
    }
}

fn cap_of(c: &IbvQpCap) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `ibv_create_qp`, and `ibv_create_qp_ex` with `send_ops` (the
/// `ibv_wr_*` operations asked for, checked by the caller) when it asked for
/// builders.
pub fn create_qp(pd: *mut IbvPd, attr: *mut IbvQpInitAttr, send_ops: Option<u64>) -> Result<*mut IbvQp, c_int> {
    create_qp_with(pd, attr, send_ops, |pd, init| pd.create_qp(init).map_err(refused("ibv_create_qp")))
}

/// [`create_qp`] with the uroce QP made by `make` (rdma_cm's
/// `rdma_create_qp` makes it through the ID).
pub fn create_qp_with(
    pd: *mut IbvPd,
    attr: *mut IbvQpInitAttr,
    send_ops: Option<u64>,
    make: impl FnOnce(&Pd, &QpInit) -> Result<Qp, c_int>,
) -> Result<*mut IbvQp, c_int> {
    let p = PDS.get(pd.cast::<UrocePd>()).ok_or(libc::EINVAL)?;
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: attr points at the caller's struct ibv_qp_init_attr.
    let a = unsafe { &mut *attr };
    let qp_type = qp_type_of(a.qp_type).ok_or_else(|| {
        explain("ibv_create_qp", &format!("QP type {}: uroce serves RC (2), UC (3) and UD (4)", a.qp_type));
        libc::EOPNOTSUPP
    })?;
    let srq = match a.srq.is_null() {
        true => None,
        false => Some(SRQS.get(a.srq.cast::<UroceSrq>()).ok_or(libc::EINVAL)?),
    };
    let send_cq = CQS.get(a.send_cq.cast::<UroceCq>()).ok_or(libc::EINVAL)?;
    let recv_cq = CQS.get(a.recv_cq.cast::<UroceCq>()).ok_or(libc::EINVAL)?;
    let mut init = QpInit::new(qp_type, &send_cq.inner, &recv_cq.inner);
    init.cap = cap_of(&a.cap);
    // What the QP is given goes back to the caller, as rdma-core's
    // providers write it (the engine grants the same).
    a.cap.max_inline_data = init.cap.granted().max_inline_data;
    init.srq = srq.map(|s| s.inner.clone());
    if srq.is_some() {
        // The QP has no receive queue of its own (the kernel reports zeros).
        a.cap.max_recv_wr = 0;
        a.cap.max_recv_sge = 0;
        init.cap.max_recv_wr = 0;
        init.cap.max_recv_sge = 0;
    }
    init.sq_sig_all = a.sq_sig_all != 0;
    let inner = make(&p.inner, &init)?;
    // SAFETY: all-zero is a valid IbvQp (NULL pointers, zero numbers, an
    // unlocked mutex, an initialized condition variable).
    let mut qp: IbvQp = unsafe { core::mem::zeroed() };
    qp.context = p.c_context();
    qp.qp_context = a.qp_context;
    qp.pd = pd;
    qp.send_cq = a.send_cq;
    qp.recv_cq = a.recv_cq;
    qp.srq = a.srq;
    qp.handle = QPS.next_handle();
    qp.qp_num = inner.qp_num();
    qp.state = QpState::Reset as c_int;
    qp.qp_type = a.qp_type;
    for users in [&p.users, &send_cq.users, &recv_cq.users].into_iter().chain(srq.map(|s| &s.users)) {
        users.fetch_add(1, Ordering::AcqRel);
    }
    // SAFETY: all-zero is a valid IbvQpEx (NULL slots, zero numbers).
    let mut qp_ex: IbvQpEx = unsafe { core::mem::zeroed() };
    qp_ex.qp_base = qp;
    if send_ops.is_some() {
        fill_wr_ops(&mut qp_ex);
    }
    let q = UroceQp {
        qp: qp_ex,
        comp_mask: if send_ops.is_some() { VERBS_QP_EX } else { 0 },
        _xrcd: ptr::null_mut(),
        inner,
        batch: Mutex::new(WrBatch::default()),
        cap: a.cap,
        pd: p,
        send_cq,
        recv_cq,
        srq,
    };
    Ok(QPS.adopt(Box::new(q)).cast())
}

#[no_mangle]
pub extern "C" fn ibv_create_qp(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> *mut IbvQp {
    guard(ptr::null_mut(), || null_on_err(create_qp(pd, attr, None)))
}
symver!(ibv_create_qp, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int {
    guard(libc::EIO, || match QPS.release(qp.cast::<UroceQp>(), |_| Ok(())) {
        Ok(q) => {
            for users in [&q.pd.users, &q.send_cq.users, &q.recv_cq.users].into_iter().chain(q.srq.map(|s| &s.users)) {
                users.fetch_sub(1, Ordering::AcqRel);
            }
            0
        }
        Err(e) => e,
    })
}
symver!(ibv_destroy_qp, "IBVERBS_1.1");

fn state_of(v: c_int) -> Option<QpState> {
    [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Err]
        .into_iter()
        .find(|s| *s as c_int == v)
}

/// The engine's attributes from C's, for the fields `mask` names.
fn attr_of(a: &IbvQpAttr) -> QpAttr {
    let mut out = QpAttr { qp_state: state_of(a.qp_state).unwrap_or_default(), ..QpAttr::default() };
    out.cur_qp_state = state_of(a.cur_qp_state).unwrap_or_default();
    out.path_mtu = Mtu::from_enum(a.path_mtu as u8).unwrap_or_default();
    out.qkey = a.qkey;
    out.rq_psn = a.rq_psn;
    out.sq_psn = a.sq_psn;
    out.dest_qp_num = a.dest_qp_num;
    out.qp_access_flags = AccessFlags(a.qp_access_flags);
    out.pkey_index = a.pkey_index;
    out.port_num = a.port_num;
    let g = &a.ah_attr.grh;
    out.ah_attr = AddressVector {
        dgid: Gid(g.dgid.0),
        sgid_index: g.sgid_index,
        flow_label: g.flow_label,
        hop_limit: g.hop_limit,
        traffic_class: g.traffic_class,
        port_num: a.ah_attr.port_num,
    };
    out.timeout = a.timeout;
    out.retry_cnt = a.retry_cnt;
    out.rnr_retry = a.rnr_retry;
    out.min_rnr_timer = a.min_rnr_timer;
    out.max_rd_atomic = a.max_rd_atomic;
    out.max_dest_rd_atomic = a.max_dest_rd_atomic;
    out.en_sqd_async_notify = a.en_sqd_async_notify != 0;
    out
}

/// `IBV_QP_RATE_LIMIT`: the one mask bit past the engine's that rdma-core
/// defines for RoCE QPs; packet pacing is not served.
const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

#[no_mangle]
pub extern "C" fn ibv_modify_qp(qp: *mut IbvQp, attr: *mut IbvQpAttr, mask: c_int) -> c_int {
    guard(libc::EIO, || {
        let Some(q) = QPS.get(qp.cast::<UroceQp>()) else { return libc::EINVAL };
        if attr.is_null() {
            return libc::EINVAL;
        }
        if mask & IBV_QP_RATE_LIMIT != 0 {
            explain("ibv_modify_qp", "IBV_QP_RATE_LIMIT: packet pacing is not served");
            return libc::EOPNOTSUPP;
        }
        // SAFETY: attr points at the caller's struct ibv_qp_attr.
        let a = unsafe { &*attr };
        let result = q.inner.modify(&attr_of(a), QpAttrMask(mask as u32)).map_err(refused("ibv_modify_qp"));
        if result.is_ok() {
            sync_state(qp);
        }
        result.map_or_else(|e| e, |_| 0)
    })
}
symver!(ibv_modify_qp, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_query_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    _mask: c_int,
    init_attr: *mut IbvQpInitAttr,
) -> c_int {
    guard(libc::EIO, || {
        let Some(q) = QPS.get(qp.cast::<UroceQp>()) else { return libc::EINVAL };
        if attr.is_null() || init_attr.is_null() {
            return libc::EINVAL;
        }
        let e = q.inner.query();
        let cap = q.cap;
        // SAFETY: attr and init_attr point at the caller's structs; all-zero is valid for both.
        let (a, i) = unsafe {
            ptr::write_bytes(attr, 0, 1);
            ptr::write_bytes(init_attr, 0, 1);
            (&mut *attr, &mut *init_attr)
        };
        fill_c_attr(a, &e);
        a.cap = cap;
        i.qp_context = q.qp.qp_base.qp_context;
        i.send_cq = q.qp.qp_base.send_cq;
        i.recv_cq = q.qp.qp_base.recv_cq;
        i.srq = q.qp.qp_base.srq;
        i.cap = cap;
        i.qp_type = q.qp.qp_base.qp_type;
        0
    })
}
symver!(ibv_query_qp, "IBVERBS_1.1");

/// An address vector as C's `ibv_ah_attr` (RoCE: always global, no LIDs).
pub fn c_ah_attr(av: &AddressVector) -> IbvAhAttr {
    IbvAhAttr {
        grh: IbvGlobalRoute {
            dgid: IbvGid(av.dgid.0),
            flow_label: av.flow_label,
            sgid_index: av.sgid_index,
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
        },
        dlid: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: av.port_num,
    }
}

/// Writes the engine's QP attributes into C's (`cap` aside: the caller's).
pub fn fill_c_attr(a: &mut IbvQpAttr, e: &QpAttr) {
    a.qp_state = e.qp_state as c_int;
    a.cur_qp_state = e.qp_state as c_int;
    a.path_mtu = e.path_mtu.to_enum().into();
    a.qkey = e.qkey;
    a.rq_psn = e.rq_psn;
    a.sq_psn = e.sq_psn;
    a.dest_qp_num = e.dest_qp_num;
    a.qp_access_flags = e.qp_access_flags.0;
    a.ah_attr = c_ah_attr(&e.ah_attr);
    a.pkey_index = e.pkey_index;
    a.port_num = e.port_num;
    a.timeout = e.timeout;
    a.retry_cnt = e.retry_cnt;
    a.rnr_retry = e.rnr_retry;
    a.min_rnr_timer = e.min_rnr_timer;
    a.max_rd_atomic = e.max_rd_atomic;
    a.max_dest_rd_atomic = e.max_dest_rd_atomic;
    a.sq_draining = e.sq_draining.into();
    a.en_sqd_async_notify = e.en_sqd_async_notify.into();
}

/// Keeps `qp->state`, which programs read directly, true after a change
/// (`ibv_modify_qp`, and rdma_cm's connect and accept).
pub fn sync_state(qp: *mut IbvQp) {
    if let Some(q) = QPS.get(qp.cast::<UroceQp>()) {
        let state = q.inner.state() as c_int;
        // SAFETY: qp is a live QP (checked); C reads this field, we write it.
        unsafe { ptr::addr_of_mut!((*qp).state).write(state) };
    }
}

/// The scatter/gather list of a C work request.
pub fn sges(list: *const IbvSge, n: c_int) -> Result<SgList, c_int> {
    Ok(sge_slice(list, n)?.iter().map(|s| Sge { addr: s.addr, length: s.length, lkey: s.lkey }).collect())
}

/// The caller's array of `n` SGEs (EINVAL for a negative count, or NULL with some).
fn sge_slice<'a>(list: *const IbvSge, n: c_int) -> Result<&'a [IbvSge], c_int> {
    match n {
        0 => Ok(&[]),
        _ if n < 0 || list.is_null() => Err(libc::EINVAL),
        // SAFETY: the caller's array of n ibv_sge (checked non-NULL), which it
        // holds for the call.
        _ => Ok(unsafe { core::slice::from_raw_parts(list, n as usize) }),
    }
}

/// Runs `f` on the data of an inline send, read from the program's memory
/// at post time as an RNIC does (an inline SGE's lkey is not looked at).
/// More than `max` bytes (the QP's `max_inline_data`) are refused with
/// EINVAL before any is read, as rxe refuses them. The bytes of a single
/// SGE are lent to `f` as they are (the engine copies them into a buffer it
/// reuses), so the common inline post allocates nothing; several SGEs are
/// gathered into one buffer first. The lending ends when `f` returns, while
/// the program still holds the memory (its post has not returned).
pub fn with_inline_data<R>(list: *const IbvSge, n: c_int, max: u32, f: impl FnOnce(&[u8]) -> R) -> Result<R, c_int> {
    let c = sge_slice(list, n)?;
    let total: u64 = c.iter().map(|s| u64::from(s.length)).sum();
    if total > u64::from(max) {
        explain("ibv_post_send", &format!("{total} bytes inline, past the QP's max_inline_data of {max}"));
        return Err(libc::EINVAL);
    }
    let bytes = |s: &IbvSge| {
        // SAFETY: an inline SGE names `length` readable bytes of the
        // program's memory at `addr`, which it holds until the post returns;
        // the slice lives only inside this call.
        unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, s.length as usize) }
    };
    let pieces = || c.iter().filter(|s| s.length > 0);
    let mut first_two = pieces();
    Ok(match (first_two.next(), first_two.next()) {
        (None, _) => f(&[]),
        (Some(only), None) => f(bytes(only)),
        (Some(_), Some(_)) => {
            let mut data = Vec::with_capacity(total as usize);
            pieces().for_each(|s| data.extend_from_slice(bytes(s)));
            f(&data)
        }
    })
}

impl UroceQp {
    /// The `ibv_qp_ex` of a QP made with builders (`ibv_qp_to_qp_ex`).
    pub fn qp_ex(&'static self) -> Option<*mut IbvQpEx> {
        (self.comp_mask & VERBS_QP_EX != 0).then(|| ptr::addr_of!(self.qp).cast_mut())
    }

    /// The most bytes an inline send may carry.
    pub fn max_inline(&self) -> u32 {
        self.cap.max_inline_data
    }

    /// `qp_type` of the C QP.
    pub fn qp_type(&self) -> c_int {
        self.qp.qp_base.qp_type
    }
}

/// One C send work request as the engine's, with the data of an inline one.
/// The `bool`: whether its data is inline (`with_inline_data` reads it).
fn send_wr_of(w: &IbvSendWr, q: &UroceQp) -> Result<(SendWr, bool), c_int> {
    let rkey = w.wr_8 as u32;
    let imm = u32::from_be(w.imm_data);
    let op = match w.opcode {
        IBV_WR_SEND => WrOp::Send,
        IBV_WR_SEND_WITH_IMM => WrOp::SendWithImm { imm },
        IBV_WR_SEND_WITH_INV => WrOp::SendWithInv { invalidate_rkey: w.imm_data },
        IBV_WR_RDMA_WRITE => WrOp::RdmaWrite { remote_addr: w.wr_0, rkey },
        IBV_WR_RDMA_WRITE_WITH_IMM => WrOp::RdmaWriteWithImm { remote_addr: w.wr_0, rkey, imm },
        IBV_WR_RDMA_READ => WrOp::RdmaRead { remote_addr: w.wr_0, rkey },
        IBV_WR_ATOMIC_CMP_AND_SWP => {
            WrOp::AtomicCmpSwp { remote_addr: w.wr_0, rkey: w.wr_24, compare: w.wr_8, swap: w.wr_16 }
        }
        IBV_WR_ATOMIC_FETCH_AND_ADD => WrOp::AtomicFetchAdd { remote_addr: w.wr_0, rkey: w.wr_24, add: w.wr_8 },
        IBV_WR_LOCAL_INV => WrOp::LocalInv { rkey: w.imm_data },
        IBV_WR_BIND_MW => super::window::bind_op_of(w)?,
        other => {
            explain("ibv_post_send", &format!("opcode {other} is not served"));
            return Err(libc::EINVAL);
        }
    };
    let ud = match q.qp_type() {
        // wr.ud: the AH at offset 0, remote_qpn and remote_qkey in the next word.
        IBV_QPT_UD => Some(ud_dest(w.wr_0 as usize as *const IbvAh, w.wr_8 as u32, (w.wr_8 >> 32) as u32)?),
        _ => None,
    };
    let flags = SendFlags(w.send_flags);
    let inline = flags.contains(SendFlags::INLINE) && op.carries_local_data();
    Ok((SendWr { wr_id: w.wr_id, sg_list: sges(w.sg_list, w.num_sge)?, op, flags, ud }, inline))
}

/// One C receive work request as the engine's.
pub fn recv_wr_of(w: &IbvRecvWr) -> Result<RecvWr, c_int> {
    Ok(RecvWr { wr_id: w.wr_id, sg_list: sges(w.sg_list, w.num_sge)? })
}

/// Posts the NULL-terminated chain of work requests from `wr` to `queue`
/// (a QP or an SRQ; `None`: C passed NULL) with `post`; on failure `*bad_wr`
/// is the first request not posted (those before it are), and its errno is
/// returned.
pub fn post_chain<Q, W>(
    queue: Option<&Q>,
    wr: *mut W,
    bad_wr: *mut *mut W,
    next: fn(&W) -> *mut W,
    post: impl Fn(&Q, &W) -> Result<(), c_int>,
) -> c_int {
    let fail = |at: *mut W, e: c_int| {
        if !bad_wr.is_null() {
            // SAFETY: bad_wr is the caller's out-pointer (checked non-NULL).
            unsafe { *bad_wr = at };
        }
        e
    };
    let Some(q) = queue else { return fail(wr, libc::EINVAL) };
    let mut at = wr;
    while !at.is_null() {
        // SAFETY: a node of the caller's NULL-terminated list.
        let w = unsafe { &*at };
        if let Err(e) = post(q, w) {
            return fail(at, e);
        }
        at = next(w);
    }
    0
}

/// `ops.post_send`: the chain from `wr`.
pub extern "C" fn post_send(qp: *mut IbvQp, wr: *mut IbvSendWr, bad_wr: *mut *mut IbvSendWr) -> c_int {
    guard(libc::EIO, || {
        let post = |q: &UroceQp, w: &IbvSendWr| {
            let (wr, inline) = send_wr_of(w, q)?;
            let post_with = |data: Option<&[u8]>| q.inner.post_send_inline(wr, data).map_err(refused("ibv_post_send"));
            match inline {
                true => with_inline_data(w.sg_list, w.num_sge, q.max_inline(), |data| post_with(Some(data)))?,
                false => post_with(None),
            }
        };
        post_chain(data_path_qp(qp), wr, bad_wr, |w| w.next, post)
    })
}

/// The QP C passed to a post verb.
pub fn data_path_qp(qp: *mut IbvQp) -> Option<&'static UroceQp> {
    // SAFETY: the program passes a QP of its context, as rdma-core requires.
    unsafe { QPS.on_data_path(qp.cast::<UroceQp>()) }
}

/// `ops.post_recv`: the chain from `wr`.
pub extern "C" fn post_recv(qp: *mut IbvQp, wr: *mut IbvRecvWr, bad_wr: *mut *mut IbvRecvWr) -> c_int {
    guard(libc::EIO, || {
        let post = |q: &UroceQp, w: &IbvRecvWr| q.inner.post_recv(&recv_wr_of(w)?).map_err(refused("ibv_post_recv"));
        post_chain(data_path_qp(qp), wr, bad_wr, |w| w.next, post)
    })
}
