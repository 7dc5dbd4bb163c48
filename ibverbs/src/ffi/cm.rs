//! librdmacm on uroce's rdma_cm: event channels, IDs, addresses and routes,
//! the QP of an ID, and the connection calls. As librdmacm's, each call
//! returns 0, or -1 with errno set. `id->verbs` is the C context of the
//! device the ID uses: the drop-in opens each configured device once for
//! rdma_cm (as librdmacm opens its own contexts), so an address names one.

use super::abi::*;
use super::cm_abi::*;
use super::cm_exit::disconnect_at_exit;
use super::cm_sync::await_if_sync;
use super::device::{c_context_for, is_device_ip, open_devices_for_cm};
use super::handles::{unused, Live};
use super::memory::{UrocePd, PDS};
use super::qp::{create_qp_with, fill_c_attr, sync_state, UroceQp, QPS};
use super::{guard, null_on_err, refused, set_errno, symver};
use crate::explain::explain;
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::ptr;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use uroce_verbs::rdma_cm::{CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use uroce_verbs::QpState;

/// An event channel as C holds it.
#[repr(C)]
pub struct UroceEventChannel {
    ch: RdmaEventChannel,
    pub inner: EventChannel,
    /// IDs that report to it.
    users: AtomicUsize,
    /// Threads inside `rdma_get_cm_event` on it.
    pub readers: AtomicUsize,
}

impl UroceEventChannel {
    /// The `struct rdma_event_channel` C holds.
    pub fn as_c(&self) -> *mut RdmaEventChannel {
        ptr::from_ref(&self.ch).cast_mut()
    }
}

/// An ID as C holds it. The C struct is in an `UnsafeCell`: the library
/// writes fields of it (`verbs`, `qp`, the route) that the program reads.
#[repr(C)]
pub struct UroceCmId {
    id: UnsafeCell<RdmaCmId>,
    pub inner: CmId,
    pub channel: Mutex<&'static UroceEventChannel>,
    /// Made without a channel (`rdma_create_id(NULL, ...)`, `rdma_create_ep`,
    /// `rdma_get_request`): its calls wait for their events on a channel of
    /// its own.
    sync: AtomicBool,
    /// A passive endpoint's QP template: what `rdma_get_request` gives each
    /// connection (`rdma_create_ep` with QP attributes).
    pub ep: Mutex<Option<(*mut IbvPd, IbvQpInitAttr)>>,
    /// The CQs and channels `rdma_create_qp` made for the ID (none given),
    /// which `rdma_destroy_qp` destroys.
    made: Mutex<Vec<Made>>,
    /// Multicast groups joined, with the `context` each join gave (what
    /// MULTICAST_JOIN hands back in `param.ud.private_data`).
    pub joins: Mutex<Vec<(std::net::IpAddr, usize)>>,
}

/// An object the library made for an ID.
#[derive(Clone, Copy)]
enum Made {
    Cq(*mut IbvCq),
    Channel(*mut IbvCompChannel),
}

pub static EVENT_CHANNELS: Live = Live::new();

/// The addresses of the last channels destroyed (addresses only: nothing
/// is kept alive), so that `rdma_get_cm_event` can tell a thread that
/// reads a channel another thread just destroyed from a bad pointer.
static DESTROYED_CHANNELS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
const DESTROYED_KEPT: usize = 64;

/// Whether `channel` is one of the last channels destroyed.
pub fn recently_destroyed(channel: *const RdmaEventChannel) -> bool {
    DESTROYED_CHANNELS.lock().unwrap_or_else(|e| e.into_inner()).contains(&(channel as usize))
}
pub static CM_IDS: Live = Live::new();

/// librdmacm's convention: 0, or -1 with errno.
pub fn cm_status(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// A librdmacm call: `f`, its panic kept from C, its result as [`cm_status`].
pub fn cm_call(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    guard(-1, || cm_status(f()))
}

/// A new event channel, as C holds it (a synchronous ID's is its own,
/// destroyed with it).
pub fn new_channel() -> Result<&'static UroceEventChannel, c_int> {
    open_devices_for_cm();
    let inner = EventChannel::new().map_err(refused("rdma_create_event_channel"))?;
    let ch = RdmaEventChannel { fd: inner.as_raw_fd() };
    let (users, readers) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let raw = EVENT_CHANNELS.adopt(Box::new(UroceEventChannel { ch, inner, users, readers }));
    // SAFETY: just adopted; it lives until released.
    Ok(unsafe { &*raw })
}

#[no_mangle]
pub extern "C" fn rdma_create_event_channel() -> *mut RdmaEventChannel {
    guard(ptr::null_mut(), || null_on_err(new_channel().map(|c| c.as_c())))
}
symver!(rdma_create_event_channel, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_destroy_event_channel(channel: *mut RdmaEventChannel) {
    guard((), || {
        // librdmacm's is void: a channel IDs still use is left in place.
        let busy = |c: &UroceEventChannel| unused(&c.users, "rdma_destroy_event_channel", "IDs");
        if let Ok(c) = EVENT_CHANNELS.release(channel.cast::<UroceEventChannel>(), busy) {
            let mut destroyed = DESTROYED_CHANNELS.lock().unwrap_or_else(|e| e.into_inner());
            if destroyed.len() == DESTROYED_KEPT {
                destroyed.remove(0);
            }
            destroyed.push(channel as usize);
            drop(destroyed);
            if c.readers.load(Ordering::Acquire) > 0 {
                // A thread blocks reading it (rping's CM thread at exit): on
                // the kernel's descriptor it would block on, not see the end
                // of the socket, so the library's end stays open.
                Box::leak(c);
            }
        }
    })
}
symver!(rdma_destroy_event_channel, "RDMACM_1.0");

impl UroceCmId {
    /// A C ID for `inner`, reporting to `channel`, with the program's `context`.
    pub fn adopt(inner: CmId, channel: &'static UroceEventChannel, context: *mut c_void, sync: bool) -> *mut RdmaCmId {
        // SAFETY: all-zero is a valid rdma_cm_id (NULL pointers, zero numbers).
        let mut id: RdmaCmId = unsafe { core::mem::zeroed() };
        id.channel = channel.as_c();
        id.context = context;
        (id.ps, id.qp_type) = match inner.port_space() {
            PortSpace::Udp => (RDMA_PS_UDP, IBV_QPT_UD),
            PortSpace::Ipoib => (RDMA_PS_IPOIB, IBV_QPT_UD),
            _ => (RDMA_PS_TCP, IBV_QPT_RC),
        };
        channel.users.fetch_add(1, Ordering::AcqRel);
        let (channel, ep, made) = (Mutex::new(channel), Mutex::new(None), Mutex::new(Vec::new()));
        let sync = AtomicBool::new(sync);
        let joins = Mutex::new(Vec::new());
        let raw = CM_IDS.adopt(Box::new(UroceCmId { id: UnsafeCell::new(id), inner, channel, sync, ep, made, joins }));
        // SAFETY: just adopted, alive.
        unsafe { &*raw }.refresh();
        raw.cast()
    }

    /// The pointer C holds.
    pub fn as_c(&self) -> *mut RdmaCmId {
        self.id.get()
    }

    /// Brings the fields programs read (`verbs`, `port_num`, the route's
    /// addresses and GIDs, `qp->state`) up to date with the ID.
    pub fn refresh(&self) {
        let c = self.as_c();
        let verbs = self.inner.context().and_then(|ctx| c_context_for(&ctx)).unwrap_or(ptr::null_mut());
        let (src, dst) = (self.inner.local_addr(), self.inner.peer_addr());
        // SAFETY: c is this live ID's C struct; programs read these fields,
        // only the library writes them.
        unsafe {
            // An ID on a device holds the device's PD from then on, as
            // librdmacm's do (programs register memory on `id->pd`).
            if !verbs.is_null() && (*c).pd.is_null() {
                (*c).pd = default_pd(verbs).unwrap_or(ptr::null_mut());
            }
            (*c).verbs = verbs;
            (*c).port_num = if verbs.is_null() { 0 } else { 1 };
            if let Some(a) = src {
                (*c).route.addr.src = storage_of(a);
                (*c).route.addr.ibaddr.sgid = gid_of_ip(a.ip());
            }
            if let Some(a) = dst {
                (*c).route.addr.dst = storage_of(a);
                (*c).route.addr.ibaddr.dgid = gid_of_ip(a.ip());
            }
            (*c).route.addr.ibaddr.pkey = 0xffff_u16.to_be();
            (*c).route.num_paths = i32::from(dst.is_some());
            sync_state((*c).qp);
        }
    }

    /// Whether its calls wait for their events.
    pub fn is_sync(&self) -> bool {
        self.sync.load(Ordering::Acquire)
    }

    /// Whether its calls wait for their events (a synchronous ID has a
    /// channel of its own) or leave them on its channel for the program.
    pub fn set_sync(&self, sync: bool) {
        self.sync.store(sync, Ordering::Release);
    }

    /// The channel its events go to.
    pub fn channel(&self) -> &'static UroceEventChannel {
        *self.channel.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Its events go to `to` from now on (`rdma_migrate_id`).
    pub fn migrate(&self, to: &'static UroceEventChannel) {
        let from = std::mem::replace(&mut *self.channel.lock().unwrap_or_else(|p| p.into_inner()), to);
        to.users.fetch_add(1, Ordering::AcqRel);
        from.users.fetch_sub(1, Ordering::AcqRel);
        self.inner.migrate(&to.inner);
        // SAFETY: the ID's C struct is live; its fields are the library's to write.
        unsafe { (*self.as_c()).channel = to.as_c() };
    }

    fn qp(&self) -> *mut IbvQp {
        // SAFETY: reads a field of this live ID's C struct.
        unsafe { (*self.as_c()).qp }
    }

    /// The port of one end (`src` or `dst` of the route), in network order.
    fn port(&self, of: impl FnOnce(&RdmaAddr) -> &libc::sockaddr_storage) -> u16 {
        // SAFETY: reads a field of this live ID's C struct, which the library filled (or zeroed).
        let storage = of(unsafe { &(*self.as_c()).route.addr });
        // SAFETY: as above: a sockaddr_storage of a known family, or AF_UNSPEC.
        unsafe { socket_addr_of(ptr::from_ref(storage).cast()) }.map_or(0, |a| a.port().to_be())
    }
}

/// Whether C's ID connects UD QPs (RDMA_PS_UDP, RDMA_PS_IPOIB).
pub fn is_ud(i: &UroceCmId) -> bool {
    // SAFETY: reads a field of this live ID's C struct, which only the library writes.
    unsafe { (*i.as_c()).qp_type == IBV_QPT_UD }
}

/// The live ID C passed.
pub fn id_of(id: *mut RdmaCmId) -> Result<&'static UroceCmId, c_int> {
    CM_IDS.get(id.cast::<UroceCmId>()).ok_or(libc::EINVAL)
}

fn create_id(
    channel: *mut RdmaEventChannel,
    out: *mut *mut RdmaCmId,
    context: *mut c_void,
    ps: c_int,
) -> Result<(), c_int> {
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    let space = match ps {
        RDMA_PS_TCP => PortSpace::Tcp,
        RDMA_PS_UDP => PortSpace::Udp,
        RDMA_PS_IPOIB => PortSpace::Ipoib,
        // The kernel's answers: a port space it has and uroce lacks is
        // not supported; one that does not exist is invalid.
        _ => {
            let what = format!("port space {ps:#x}: uroce's rdma_cm serves RDMA_PS_TCP, RDMA_PS_UDP and RDMA_PS_IPOIB");
            explain("rdma_create_id", &what);
            return Err(if ps == RDMA_PS_IB { libc::EOPNOTSUPP } else { libc::EINVAL });
        }
    };
    let sync = channel.is_null();
    let ch = match sync {
        true => new_channel()?,
        false => EVENT_CHANNELS.get(channel.cast::<UroceEventChannel>()).ok_or(libc::EINVAL)?,
    };
    let inner = ch.inner.create_id(space).map_err(refused("rdma_create_id"))?;
    disconnect_at_exit();
    let id = UroceCmId::adopt(inner, ch, context, sync);
    // SAFETY: out is the caller's out-pointer (checked non-NULL).
    unsafe { *out = id };
    Ok(())
}

#[no_mangle]
pub extern "C" fn rdma_create_id(
    channel: *mut RdmaEventChannel,
    id: *mut *mut RdmaCmId,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    cm_call(|| create_id(channel, id, context, ps))
}
symver!(rdma_create_id, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_destroy_id(id: *mut RdmaCmId) -> c_int {
    cm_call(|| {
        CM_IDS.release(id.cast::<UroceCmId>(), |_| Ok(())).map(|i| {
            let ch = i.channel();
            // Its events not yet read go with it, as the kernel drops them:
            // a thread polling the channel must not wake for them.
            ch.inner.retract_events_of(&i.inner);
            ch.users.fetch_sub(1, Ordering::AcqRel);
            if i.is_sync() {
                drop(i); // its events hold it; the channel goes after
                rdma_destroy_event_channel(ch.as_c());
            }
        })
    })
}
symver!(rdma_destroy_id, "RDMACM_1.0");

/// The socket address C passed, any address; `None` for NULL,
/// EAFNOSUPPORT for another family.
pub fn any_addr_arg(sa: *const libc::sockaddr, verb: &str) -> Result<Option<SocketAddr>, c_int> {
    if sa.is_null() {
        return Ok(None);
    }
    // SAFETY: the program passes a socket address of the family it names.
    let addr = unsafe { socket_addr_of(sa) }.ok_or_else(|| {
        explain(verb, "only AF_INET and AF_INET6 addresses are served");
        libc::EAFNOSUPPORT
    })?;
    Ok(Some(addr))
}

/// The socket address C passed, the wildcard or a device's; `None` for
/// NULL, EAFNOSUPPORT for another family, EADDRNOTAVAIL for an address
/// no device has.
fn addr_arg(sa: *const libc::sockaddr, verb: &str) -> Result<Option<SocketAddr>, c_int> {
    let Some(addr) = any_addr_arg(sa, verb)? else { return Ok(None) };
    if !addr.ip().is_unspecified() && !is_device_ip(addr.ip()) {
        explain(verb, &format!("{} is no uroce device's address: add udp:{} to UROCE_DEVICES", addr.ip(), addr.ip()));
        return Err(libc::EADDRNOTAVAIL);
    }
    Ok(Some(addr))
}

#[no_mangle]
pub extern "C" fn rdma_bind_addr(id: *mut RdmaCmId, addr: *mut libc::sockaddr) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        let a = addr_arg(addr, "rdma_bind_addr")?.ok_or(libc::EINVAL)?;
        i.inner.bind_addr(a).map_err(refused("rdma_bind_addr"))?;
        i.refresh();
        Ok(())
    })
}
symver!(rdma_bind_addr, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_listen(id: *mut RdmaCmId, backlog: c_int) -> c_int {
    cm_call(|| id_of(id).and_then(|i| i.inner.listen(backlog).map_err(refused("rdma_listen"))))
}
symver!(rdma_listen, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_resolve_addr(
    id: *mut RdmaCmId,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        let src = addr_arg(src, "rdma_resolve_addr")?;
        // SAFETY: the program passes a socket address of the family it names.
        let dst = unsafe { socket_addr_of(dst) }.ok_or(libc::EINVAL)?;
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        i.inner.resolve_addr(src, dst, timeout).map_err(refused("rdma_resolve_addr"))?;
        i.refresh();
        await_if_sync(i, CmEventType::AddrResolved)
    })
}
symver!(rdma_resolve_addr, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_resolve_route(id: *mut RdmaCmId, timeout_ms: c_int) -> c_int {
    cm_call(|| {
        id_of(id).and_then(|i| {
            let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
            i.inner.resolve_route(timeout).map_err(refused("rdma_resolve_route"))?;
            i.refresh();
            await_if_sync(i, CmEventType::RouteResolved)
        })
    })
}
symver!(rdma_resolve_route, "RDMACM_1.0");

/// `rdma_create_qp`: a NULL `pd` is the device's default PD, a NULL CQ one
/// the library makes for the ID (with a completion channel, `cq_context`
/// the ID), as librdmacm does.
pub fn create_qp(id: *mut RdmaCmId, pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> Result<(), c_int> {
    let i = id_of(id)?;
    // SAFETY: attr is NULL or the caller's struct ibv_qp_init_attr.
    let caller = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
    // Made from a copy, and only the capabilities written back, as
    // librdmacm does: the caller's attributes stay theirs to use again (a
    // server's one template for every connection), the CQs made for this
    // ID not left in them.
    let mut copy = *caller;
    create_id_qp(i, pd, &mut copy, None, "rdma_create_qp")?;
    caller.cap = copy.cap;
    Ok(())
}

/// `rdma_create_qp_ex`: as `rdma_create_qp`, with the extended attributes
/// of `ibv_create_qp_ex` (the `ibv_wr_*` builders of `send_ops_flags`,
/// which perftest asks for with `-R` on the devices it uses them on). As
/// librdmacm, the PD, CQs and SRQ the QP was made with are written into
/// `attr`; XRC, RSS, TSO and creation flags answer EOPNOTSUPP.
#[no_mangle]
pub extern "C" fn rdma_create_qp_ex(id: *mut RdmaCmId, attr: *mut IbvQpInitAttrEx) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        // SAFETY: attr is NULL or the caller's struct ibv_qp_init_attr_ex.
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        let send_ops = super::qp_ex::served_send_ops("rdma_create_qp_ex", a)?;
        // SAFETY: reads fields of this live ID's C struct.
        let (verbs, id_pd) = unsafe { ((*i.as_c()).verbs, (*i.as_c()).pd) };
        let pd = match a.comp_mask & IBV_QP_INIT_ATTR_PD != 0 && !a.pd.is_null() {
            true => a.pd,
            false => id_pd,
        };
        if !pd.is_null() && PDS.get(pd.cast::<UrocePd>()).is_some_and(|p| p.c_context() != verbs) {
            explain("rdma_create_qp_ex", "attr.pd is of another device than the ID's");
            return Err(libc::EINVAL);
        }
        // ibv_qp_init_attr_ex begins with the members of ibv_qp_init_attr.
        // SAFETY: that prefix of the caller's struct, borrowed from `a`
        // (which is not used until the prefix's last use).
        let prefix = unsafe { &mut *ptr::from_mut(a).cast::<IbvQpInitAttr>() };
        let made_pd = create_id_qp(i, pd, prefix, send_ops, "rdma_create_qp_ex")?;
        a.pd = made_pd;
        a.comp_mask |= IBV_QP_INIT_ATTR_PD;
        Ok(())
    })
}
symver!(rdma_create_qp_ex, "RDMACM_1.0");

/// The QP of ID `i` from `a` (the CQs, SRQ and capabilities it ends up
/// with written into it): on `pd`, or the device's default PD for NULL;
/// the ID's SRQ and CQs where `a` names none, CQs made for the ID where
/// neither does. Returns the PD. EINVAL for an ID with a QP already, or
/// CQs other than those the ID has.
fn create_id_qp(
    i: &UroceCmId,
    pd: *mut IbvPd,
    a: &mut IbvQpInitAttr,
    send_ops: Option<u64>,
    verb: &'static str,
) -> Result<*mut IbvPd, c_int> {
    // SAFETY: reads fields of this live ID's C struct.
    let (verbs, has_qp, id_send_cq, id_recv_cq) =
        unsafe { ((*i.as_c()).verbs, !(*i.as_c()).qp.is_null(), (*i.as_c()).send_cq, (*i.as_c()).recv_cq) };
    if verbs.is_null() {
        explain(verb, "the ID has no device yet: bind or resolve an address first");
        return Err(libc::EINVAL);
    }
    let other = |given: *mut IbvCq, has: *mut IbvCq| !given.is_null() && !has.is_null() && given != has;
    if has_qp || other(a.send_cq, id_send_cq) || other(a.recv_cq, id_recv_cq) {
        explain(verb, "the ID has a QP already, or the CQs given are not the ID's");
        return Err(libc::EINVAL);
    }
    let pd = if pd.is_null() { default_pd(verbs)? } else { pd };
    if a.srq.is_null() {
        // The ID's SRQ (rdma_create_srq), as librdmacm takes it.
        // SAFETY: reads a field of this live ID's C struct.
        a.srq = unsafe { (*i.as_c()).srq }.cast();
    }
    let (mut send_channel, mut recv_channel) = (ptr::null_mut(), ptr::null_mut());
    if a.send_cq.is_null() {
        (a.send_cq, send_channel) = i.make_cq(verbs, a.cap.max_send_wr)?;
    }
    if a.recv_cq.is_null() {
        (a.recv_cq, recv_channel) = i.make_cq(verbs, a.cap.max_recv_wr)?;
    }
    let made = create_qp_with(pd, a, send_ops, |p, init| i.inner.create_qp(p, init).map_err(refused(verb)));
    let qp = made.inspect_err(|_| i.destroy_made())?;
    // SAFETY: the ID's C struct is live and its fields are the library's to write.
    unsafe {
        let c = i.as_c();
        (*c).qp = qp;
        (*c).pd = pd;
        ((*c).send_cq, (*c).send_cq_channel) = (a.send_cq, send_channel);
        ((*c).recv_cq, (*c).recv_cq_channel) = (a.recv_cq, recv_channel);
        (*c).srq = a.srq.cast();
        (*c).qp_type = a.qp_type;
    }
    sync_state(qp);
    Ok(pd)
}

/// `rdma_create_srq`: an SRQ on `pd` (NULL: the ID's PD, or the device's
/// default PD, as for `rdma_create_qp`) that the ID's QP, made after it,
/// takes its receives from (`srq_on_id`).
#[no_mangle]
pub extern "C" fn rdma_create_srq(id: *mut RdmaCmId, pd: *mut IbvPd, attr: *mut IbvSrqInitAttr) -> c_int {
    cm_call(|| srq_on_id("rdma_create_srq", id_of(id)?, pd, attr).map(|_| ()))
}
symver!(rdma_create_srq, "RDMACM_1.0");

/// `rdma_create_srq_ex`: as librdmacm, the type must be given and the PD
/// is the ID's when none is (written back into `attr`); a BASIC SRQ is
/// made as by `rdma_create_srq`. XRC and tag-matching SRQs, and the XRC
/// domain and CQ they take, answer EOPNOTSUPP, as rxe's kernel does.
#[no_mangle]
pub extern "C" fn rdma_create_srq_ex(id: *mut RdmaCmId, attr: *mut IbvSrqInitAttrEx) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        // SAFETY: attr is NULL or points at the caller's struct ibv_srq_init_attr_ex.
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 {
            explain("rdma_create_srq_ex", "comp_mask lacks IBV_SRQ_INIT_ATTR_TYPE");
            return Err(libc::EINVAL);
        }
        if a.comp_mask & !(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD) != 0 || a.srq_type != IBV_SRQT_BASIC {
            explain("rdma_create_srq_ex", "uroce makes BASIC SRQs only (no XRC or tag matching), as rxe");
            return Err(libc::EOPNOTSUPP);
        }
        let given = if a.comp_mask & IBV_SRQ_INIT_ATTR_PD != 0 { a.pd } else { ptr::null_mut() };
        // The BASIC prefix of the struct is a struct ibv_srq_init_attr.
        let pd = srq_on_id("rdma_create_srq_ex", i, given, attr.cast::<IbvSrqInitAttr>())?;
        // SAFETY: as above; the SRQ is made, so the caller's struct is written back.
        let a = unsafe { &mut *attr };
        a.pd = pd;
        a.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
        Ok(())
    })
}
symver!(rdma_create_srq_ex, "RDMACM_1.0");

/// An SRQ for ID `i` on `pd`, else the ID's PD, else the device's default
/// one: the ID holds it (`id->srq`) and the PD if it had none, as
/// librdmacm's. Returns the PD used.
fn srq_on_id(verb: &str, i: &UroceCmId, pd: *mut IbvPd, attr: *mut IbvSrqInitAttr) -> Result<*mut IbvPd, c_int> {
    // SAFETY: reads fields of this live ID's C struct.
    let (verbs, id_pd) = unsafe { ((*i.as_c()).verbs, (*i.as_c()).pd) };
    if verbs.is_null() {
        explain(verb, "the ID has no device yet: bind or resolve an address first");
        return Err(libc::EINVAL);
    }
    let pd = match (pd.is_null(), id_pd.is_null()) {
        (false, _) => pd,
        (true, false) => id_pd,
        (true, true) => default_pd(verbs)?,
    };
    let srq = super::srq::create_srq(pd, attr)?;
    // SAFETY: the ID's C struct is live and its fields are the library's to write.
    unsafe {
        (*i.as_c()).srq = srq;
        if id_pd.is_null() {
            (*i.as_c()).pd = pd;
        }
    }
    Ok(pd)
}

/// `rdma_destroy_srq`: the ID's SRQ, if it has one (after its QP).
#[no_mangle]
pub extern "C" fn rdma_destroy_srq(id: *mut RdmaCmId) {
    guard((), || {
        if let Ok(i) = id_of(id) {
            // SAFETY: the ID's C struct is live and its fields are the library's to write.
            let srq = unsafe { std::mem::replace(&mut (*i.as_c()).srq, ptr::null_mut()) };
            if !srq.is_null() {
                let _ = super::srq::ibv_destroy_srq(srq);
            }
        }
    })
}
symver!(rdma_destroy_srq, "RDMACM_1.0");

/// Each device's PD for the QPs made without one (never freed, as
/// librdmacm keeps its own).
fn default_pd(verbs: *mut IbvContext) -> Result<*mut IbvPd, c_int> {
    static PDS_BY_CONTEXT: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
    let mut list = PDS_BY_CONTEXT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, pd)) = list.iter().find(|(c, _)| *c == verbs as usize) {
        return Ok(pd as *mut IbvPd);
    }
    let pd = super::memory::ibv_alloc_pd(verbs);
    if pd.is_null() {
        return Err(libc::ENOMEM);
    }
    list.push((verbs as usize, pd as usize));
    Ok(pd)
}

impl UroceCmId {
    /// A CQ of `entries` (at least 1) with a completion channel of its own,
    /// made for this ID: `cq_context` the ID, as librdmacm makes them.
    fn make_cq(&self, verbs: *mut IbvContext, entries: u32) -> Result<(*mut IbvCq, *mut IbvCompChannel), c_int> {
        let channel = super::channel::ibv_create_comp_channel(verbs);
        if channel.is_null() {
            return Err(libc::ENOMEM);
        }
        let cqe = c_int::try_from(entries.max(1)).map_err(|_| libc::EINVAL)?;
        let cq = super::cq::create_cq(verbs, cqe, self.as_c().cast(), channel, 0, None);
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.push(Made::Channel(channel));
        let cq = cq?;
        made.push(Made::Cq(cq));
        Ok((cq, channel))
    }

    /// Destroys the CQs and channels made for the ID, CQs first.
    fn destroy_made(&self) {
        let made = std::mem::take(&mut *self.made.lock().unwrap_or_else(|p| p.into_inner()));
        for m in made.iter().rev() {
            match *m {
                Made::Cq(cq) => drop(super::cq::ibv_destroy_cq(cq)),
                Made::Channel(ch) => drop(super::channel::ibv_destroy_comp_channel(ch)),
            }
        }
    }
}

#[no_mangle]
pub extern "C" fn rdma_create_qp(id: *mut RdmaCmId, pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> c_int {
    cm_call(|| create_qp(id, pd, attr))
}
symver!(rdma_create_qp, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_destroy_qp(id: *mut RdmaCmId) {
    guard((), || {
        if let Ok(i) = id_of(id) {
            let qp = i.qp();
            if QPS.get(qp.cast::<UroceQp>()).is_some() {
                let _ = super::qp::ibv_destroy_qp(qp);
            }
            i.destroy_made();
            // SAFETY: the ID's C struct is live; its fields are the library's to write.
            unsafe {
                let c = i.as_c();
                (*c).qp = ptr::null_mut();
                ((*c).send_cq, (*c).send_cq_channel) = (ptr::null_mut(), ptr::null_mut());
                ((*c).recv_cq, (*c).recv_cq_channel) = (ptr::null_mut(), ptr::null_mut());
            }
        }
    })
}
symver!(rdma_destroy_qp, "RDMACM_1.0");

/// C's connection parameters as uroce's.
fn conn_param_of(p: &RdmaConnParam) -> ConnParam {
    let private_data = match (p.private_data.is_null(), p.private_data_len) {
        (false, n) if n > 0 => {
            // SAFETY: private_data points at private_data_len bytes (rdma_cma.h).
            unsafe { core::slice::from_raw_parts(p.private_data.cast::<u8>(), n.into()) }.to_vec()
        }
        _ => Vec::new(),
    };
    ConnParam {
        private_data,
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        flow_control: p.flow_control != 0,
        retry_count: p.retry_count,
        rnr_retry_count: p.rnr_retry_count,
        srq: p.srq != 0,
        qp_num: p.qp_num,
        ..ConnParam::default()
    }
}

/// What a connect with no parameters asks (librdmacm allows NULL): the
/// device's limits for READs and atomics, and retries without end on RNR
/// and 7 on loss, as rdma_client expects of it.
fn default_conn_param() -> ConnParam {
    ConnParam {
        responder_resources: uroce_verbs::rdma_cm::RDMA_MAX_RESP_RES,
        initiator_depth: uroce_verbs::rdma_cm::RDMA_MAX_INIT_DEPTH,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

#[no_mangle]
pub extern "C" fn rdma_connect(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        // SAFETY: param is NULL or the caller's struct rdma_conn_param.
        let p = unsafe { param.as_ref() }.map_or_else(default_conn_param, conn_param_of);
        i.inner.connect(&p).map_err(refused("rdma_connect"))?;
        i.refresh();
        await_if_sync(i, CmEventType::Established)
    })
}
symver!(rdma_connect, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_accept(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        // SAFETY: param is NULL or the caller's struct rdma_conn_param.
        let p = unsafe { param.as_ref() }.map(conn_param_of);
        i.inner.accept(p.as_ref()).map_err(refused("rdma_accept"))?;
        i.refresh();
        if is_ud(i) {
            // librdmacm: the passive side of UD hears no ESTABLISHED.
            return Ok(());
        }
        await_if_sync(i, CmEventType::Established)
    })
}
symver!(rdma_accept, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_reject(id: *mut RdmaCmId, private_data: *const c_void, len: u8) -> c_int {
    cm_call(|| {
        id_of(id).and_then(|i| {
            let data = match private_data.is_null() {
                true => &[][..],
                // SAFETY: private_data points at len bytes (rdma_cma.h).
                false => unsafe { core::slice::from_raw_parts(private_data.cast::<u8>(), len.into()) },
            };
            i.inner.reject(data).map_err(refused("rdma_reject"))
        })
    })
}
symver!(rdma_reject, "RDMACM_1.0");

/// A call on an ID that may move its QP: the call, then `qp->state` and the
/// ID's fields brought up to date.
fn on_id(id: *mut RdmaCmId, call: impl FnOnce(&CmId) -> Result<(), uroce_verbs::Error>, verb: &str) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        let r = call(&i.inner).map_err(refused(verb));
        i.refresh();
        r
    })
}

#[no_mangle]
pub extern "C" fn rdma_disconnect(id: *mut RdmaCmId) -> c_int {
    on_id(id, CmId::disconnect, "rdma_disconnect")
}
symver!(rdma_disconnect, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_establish(id: *mut RdmaCmId) -> c_int {
    on_id(id, CmId::establish, "rdma_establish")
}
symver!(rdma_establish, "RDMACM_1.2");

fn state_of(v: c_int) -> Option<QpState> {
    [QpState::Init, QpState::Rtr, QpState::Rts].into_iter().find(|s| *s as c_int == v)
}

#[no_mangle]
pub extern "C" fn rdma_init_qp_attr(id: *mut RdmaCmId, attr: *mut IbvQpAttr, mask: *mut c_int) -> c_int {
    cm_call(|| {
        let i = id_of(id)?;
        if attr.is_null() || mask.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: attr and mask are the caller's (checked non-NULL).
        let (a, m) = unsafe { (&mut *attr, &mut *mask) };
        let state = state_of(a.qp_state).ok_or_else(|| {
            explain("rdma_init_qp_attr", "qp_state: INIT, RTR or RTS");
            libc::EINVAL
        })?;
        let (e, e_mask) = i.inner.init_qp_attr(state).map_err(refused("rdma_init_qp_attr"))?;
        fill_c_attr(a, &e);
        *m = e_mask.0 as c_int;
        Ok(())
    })
}
symver!(rdma_init_qp_attr, "RDMACM_1.2");

#[no_mangle]
pub extern "C" fn rdma_get_src_port(id: *mut RdmaCmId) -> u16 {
    guard(0, || id_of(id).map_or(0, |i| i.port(|a| &a.src)))
}
symver!(rdma_get_src_port, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_get_dst_port(id: *mut RdmaCmId) -> u16 {
    guard(0, || id_of(id).map_or(0, |i| i.port(|a| &a.dst)))
}
symver!(rdma_get_dst_port, "RDMACM_1.0");
