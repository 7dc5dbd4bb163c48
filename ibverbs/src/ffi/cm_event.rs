//! rdma_cm's events: `rdma_get_cm_event` reads one record from
//! `channel->fd` (blocking unless the program set O_NONBLOCK, then -1 with
//! EAGAIN; a cancellation point, as rping's CM thread is cancelled there)
//! and hands out the event it names, with a new C ID for a connection
//! request; `rdma_ack_cm_event` frees it (its private data with it).

use super::abi::{IbvAhAttr, IBV_QPT_UD};
use super::channel::read_record;
use super::cm::{cm_call, recently_destroyed, UroceCmId, UroceEventChannel, CM_IDS, EVENT_CHANNELS};
use super::cm_abi::*;
use super::handles::Live;
use super::qp::c_ah_attr;
use super::{guard, set_errno, symver};
use core::ffi::{c_int, c_void};
use core::ptr;
use std::sync::atomic::Ordering;
use uroce_verbs::rdma_cm::{CmEvent, CmEventType, CmId};

/// An event as C holds it until acked, with the private data it points at.
#[repr(C)]
struct UroceCmEvent {
    ev: RdmaCmEvent,
    _private_data: Vec<u8>,
}

static CM_EVENTS: Live = Live::new();

/// The live C ID of `id`.
fn c_id_of(id: &CmId) -> Option<&'static UroceCmId> {
    CM_IDS.find(|i: &UroceCmId| i.inner.handle() == id.handle())
}

/// The C event of `e`: `None` if its ID is gone (the program destroyed it
/// after the event fired, so it is not reported). A connection request's
/// new ID reports to its listener's channel.
fn c_event_of(e: CmEvent) -> Option<*mut RdmaCmEvent> {
    explain_failure(&e);
    let listen = e.listen_id.as_ref().and_then(c_id_of);
    let id = match (e.event, listen) {
        // A connection request comes with a new ID, the listener's context its own.
        (CmEventType::ConnectRequest, Some(l)) => {
            let channel = l.channel();
            // SAFETY: reads a field of the live listener's C struct.
            let context = unsafe { (*l.as_c()).context };
            UroceCmId::adopt(e.id.clone(), channel, context, false)
        }
        (CmEventType::ConnectRequest, None) => return None,
        _ => {
            let i = c_id_of(&e.id)?;
            i.refresh();
            i.as_c()
        }
    };
    let private_data = e.param.private_data.clone();
    let data_ptr = if private_data.is_empty() { ptr::null() } else { private_data.as_ptr().cast::<c_void>() };
    let data_len = private_data.len().min(255) as u8;
    // SAFETY: id is a live C ID (adopted or found above); only the library writes its qp_type.
    let ud_id = unsafe { (*id).qp_type } == IBV_QPT_UD;
    // librdmacm's choice of view: REJECTED and DISCONNECTED are conn's even on UD IDs.
    let joined = e.event == CmEventType::MulticastJoin;
    let param = if joined || (ud_id && !matches!(e.event, CmEventType::Rejected | CmEventType::Disconnected)) {
        // SAFETY: all-zero is a valid ibv_ah_attr.
        let zero: IbvAhAttr = unsafe { core::mem::zeroed() };
        let ah_attr = match (e.event, e.group) {
            (CmEventType::Established, _) => e.id.address_vector().map_or(zero, |av| c_ah_attr(&av)),
            (CmEventType::MulticastJoin, Some(g)) => e.id.multicast_address_vector(g).map_or(zero, |av| c_ah_attr(&av)),
            _ => zero,
        };
        // librdmacm: a join's event carries the context the join gave.
        let context = match (joined, e.group, c_id_of(&e.id)) {
            (true, Some(g), Some(i)) => super::mcast::join_context(i, g).cast_const(),
            _ => data_ptr,
        };
        let ud = RdmaUdParam {
            private_data: context,
            private_data_len: if joined { 0 } else { data_len },
            ah_attr,
            qp_num: e.param.qp_num,
            qkey: e.param.qkey,
        };
        RdmaEventParam { ud }
    } else {
        let conn = RdmaConnParam {
            private_data: data_ptr,
            private_data_len: data_len,
            responder_resources: e.param.responder_resources,
            initiator_depth: e.param.initiator_depth,
            flow_control: e.param.flow_control.into(),
            retry_count: e.param.retry_count,
            rnr_retry_count: e.param.rnr_retry_count,
            srq: e.param.srq.into(),
            qp_num: e.param.qp_num,
        };
        // The union's tail beyond `conn` stays zero, as librdmacm's calloc'd event.
        // SAFETY: all-zero is a valid rdma_ud_param (NULL, zero numbers).
        let mut p = RdmaEventParam { ud: unsafe { core::mem::zeroed() } };
        p.conn = conn;
        p
    };
    let ev = RdmaCmEvent {
        id,
        listen_id: listen.map_or(ptr::null_mut(), |l| l.as_c()),
        event: e.event.code(),
        status: e.status,
        param,
    };
    // The Vec's bytes stay where they are when it moves into the box.
    Some(CM_EVENTS.adopt(Box::new(UroceCmEvent { ev, _private_data: private_data })).cast())
}

/// With `UROCE_EXPLAIN`, one line for an event that reports a failure
/// (a REJECTED event's reason in words): programs often print only the
/// event's name.
fn explain_failure(e: &CmEvent) {
    use CmEventType::*;
    if matches!(e.event, AddrError | RouteError | ConnectError | Unreachable | Rejected | MulticastError) {
        crate::explain::explain("rdma_get_cm_event", &format!("{e}"));
    }
}

/// How long a read of a channel another thread destroyed waits before it
/// fails. One second was too short on a machine busy with other work:
/// rping's main thread had not exited by then (CI, 2026-11-29).
const LATE_READER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

#[no_mangle]
pub extern "C-unwind" fn rdma_get_cm_event(channel: *mut RdmaEventChannel, event: *mut *mut RdmaCmEvent) -> c_int {
    // Counted in as a reader, under the lock `rdma_destroy_event_channel`
    // releases it with, for the whole call: a channel destroyed while a
    // thread is in here is kept (its descriptor open, as the kernel keeps a
    // file a thread reads), never freed between two of its reads.
    let enter = |c: &UroceEventChannel| {
        c.readers.fetch_add(1, Ordering::AcqRel);
    };
    let live =
        if event.is_null() { None } else { EVENT_CHANNELS.get_entered(channel.cast::<UroceEventChannel>(), enter) };
    let Some(ch) = live else {
        if !event.is_null() && recently_destroyed(channel) {
            // Another thread destroyed it before this call: rping's CM
            // thread loops back here as its main thread tears down and
            // returns. librdmacm's read of the closed descriptor would fail
            // with EBADF, and rping would exit(-1) before main's exit(0);
            // waiting first lets the process end as it meant to.
            // (Not a cancellation point: the sleep runs with it off.)
            guard((), || std::thread::sleep(LATE_READER_GRACE));
            set_errno(libc::EBADF);
            return -1;
        }
        set_errno(libc::EINVAL);
        return -1;
    };
    // SAFETY: reads the fd field of the live channel's C struct.
    let fd = unsafe { (*channel).fd };
    let result = loop {
        // The read runs outside `guard` with no lock taken: a thread may be
        // cancelled in it (rping cancels its CM thread there; unwound, hence
        // "C-unwind", through no destructor; a cancelled reader stays
        // counted, and the channel is then kept when destroyed).
        let mut record = [0u8; 8];
        match read_record(fd, &mut record) {
            8 => {}
            0 => {
                set_errno(libc::ENODEV); // the channel was destroyed
                break -1;
            }
            _ => break -1, // read()'s errno: EAGAIN, EINTR, ...
        }
        let made = guard(None, || ch.inner.event_of_record(&record).and_then(c_event_of));
        if let Some(e) = made {
            // SAFETY: event is the caller's out-pointer (checked non-NULL).
            unsafe { *event = e };
            break 0;
        }
        // Its ID is gone (an event read as its ID was destroyed): the next.
    };
    ch.readers.fetch_sub(1, Ordering::AcqRel);
    result
}
symver!(rdma_get_cm_event, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_ack_cm_event(event: *mut RdmaCmEvent) -> c_int {
    cm_call(|| CM_EVENTS.release(event.cast::<UroceCmEvent>(), |_| Ok(())).map(drop))
}
symver!(rdma_ack_cm_event, "RDMACM_1.0");
