//! Completion queues: `ibv_create_cq`, `ibv_resize_cq`, `ibv_destroy_cq`, and the inline
//! `ibv_poll_cq` / `ibv_req_notify_cq`, which C calls through the context's
//! ops. Polling reads the CQ's ring without the driver's lock.

use super::abi::{IbvCompChannel, IbvContext, IbvCq, IbvCqEx, IbvWc};
use super::channel::{UroceChannel, CHANNELS};
use super::device::context_of;
use super::handles::{unused, Live};
use super::{guard, null_on_err, refused, symver};
use crate::explain::explain;
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::ptr;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use uroce_verbs::{Cq, NetworkHdr, WcFlags, WcStatus, WorkCompletion};

/// A CQ as C holds it: an `ibv_cq_ex` (whose first member is the
/// `ibv_cq`), in an `UnsafeCell` as the library writes fields the program
/// reads (the events acknowledged, the polled completion's status and id).
#[repr(C)]
pub struct UroceCq {
    cq: UnsafeCell<IbvCqEx>,
    pub inner: Cq,
    /// QPs that use it: while any does, it cannot be destroyed (EBUSY).
    pub users: AtomicUsize,
    channel: Option<&'static UroceChannel>,
    /// Completion events `ibv_get_cq_event` handed out, and those acked:
    /// `ibv_destroy_cq` waits until they are equal, as rdma-core's does.
    pub events_delivered: AtomicU32,
    events_acked: AtomicU32,
    /// The completion `ibv_start_poll` / `ibv_next_poll` took, which the
    /// `ibv_wc_read_*` calls read.
    pub current: Mutex<WorkCompletion>,
}

pub static CQS: Live = Live::new();

/// The C CQ of each uroce CQ, by `Cq::id`: a channel's event names the
/// uroce CQ, `ibv_get_cq_event` answers the C one.
fn by_id() -> std::sync::MutexGuard<'static, HashMap<usize, usize>> {
    static BY_ID: OnceLock<Mutex<HashMap<usize, usize>>> = OnceLock::new();
    BY_ID.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// The live C CQ whose uroce CQ has identity `id`.
pub fn cq_by_id(id: usize) -> Option<&'static UroceCq> {
    let ptr = *by_id().get(&id)?;
    CQS.get(ptr as *const UroceCq)
}

impl UroceCq {
    /// The pointer C holds.
    pub fn as_c(&self) -> *mut IbvCq {
        self.cq.get().cast()
    }

    /// Takes up to `out.len()` completions, oldest first; how many.
    pub fn take(&self, out: &mut [WorkCompletion]) -> usize {
        let n = self.inner.poll(out);
        explain_failures(&out[..n]);
        n
    }

    /// The C CQ as the extended one.
    pub fn as_c_ex(&self) -> *mut IbvCqEx {
        self.cq.get()
    }

    /// The `cq_context` the program gave `ibv_create_cq`.
    pub fn cq_context(&self) -> *mut c_void {
        // SAFETY: reads a field of this live CQ's C struct, set at creation.
        unsafe { (*self.as_c()).cq_context }
    }

    /// `ibv_ack_cq_events`: `nevents` more events acknowledged.
    pub fn ack(&self, nevents: u32) {
        let acked = self.events_acked.fetch_add(nevents, Ordering::AcqRel).wrapping_add(nevents);
        // `cq->comp_events_completed` is the program's to read: keep it true.
        // SAFETY: a field of this live CQ's C struct (no reference is made).
        let field = unsafe { ptr::addr_of_mut!((*self.as_c()).comp_events_completed) };
        // SAFETY: the field of this live CQ, as an atomic (C reads it under
        // the CQ's mutex, which nothing here holds; a u32 store is atomic).
        unsafe { AtomicU32::from_ptr(field) }.store(acked, Ordering::Release);
    }
}

/// `ibv_create_cq`, and `ibv_create_cq_ex` with `fill_ex` filling in the
/// polling calls.
pub fn create_cq(
    ctx: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
    fill_ex: Option<fn(&mut IbvCqEx)>,
) -> Result<*mut IbvCq, c_int> {
    let c = context_of(ctx).ok_or(libc::EINVAL)?;
    if comp_vector != 0 {
        // A uroce context has one completion vector (num_comp_vectors is 1).
        explain("ibv_create_cq", &format!("completion vector {comp_vector}: the context has one, 0"));
        return Err(libc::EINVAL);
    }
    let channel_ref = match channel.is_null() {
        true => None,
        false => Some(CHANNELS.get(channel.cast::<UroceChannel>()).ok_or(libc::EINVAL)?),
    };
    let max = c.ctx.query_device().max_cqe as c_int;
    if !(1..=max).contains(&cqe) {
        explain("ibv_create_cq", &format!("{cqe} entries: give 1 to {max}"));
        return Err(libc::EINVAL);
    }
    let inner = c.ctx.create_cq(cqe as usize, channel_ref.map(|ch| &ch.inner)).map_err(refused("ibv_create_cq"))?;
    // SAFETY: all-zero is a valid IbvCqEx (NULL pointers and slots, zero
    // counts, an unlocked mutex and an initialized condition variable).
    let mut cq: IbvCqEx = unsafe { core::mem::zeroed() };
    cq.base.context = ctx;
    cq.base.cq_context = cq_context;
    cq.base.handle = CQS.next_handle();
    cq.base.cqe = inner.cqe() as c_int;
    cq.base.channel = channel;
    if let Some(fill) = fill_ex {
        fill(&mut cq);
    }
    if let Some(ch) = channel_ref {
        ch.users.fetch_add(1, Ordering::AcqRel);
    }
    let id = inner.id();
    let boxed = Box::new(UroceCq {
        cq: UnsafeCell::new(cq),
        current: Mutex::new(WorkCompletion::default()),
        inner,
        users: AtomicUsize::new(0),
        channel: channel_ref,
        events_delivered: AtomicU32::new(0),
        events_acked: AtomicU32::new(0),
    });
    let raw = CQS.adopt(boxed);
    by_id().insert(id, raw as usize);
    Ok(raw.cast())
}

#[no_mangle]
pub extern "C" fn ibv_create_cq(
    ctx: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq {
    guard(ptr::null_mut(), || null_on_err(create_cq(ctx, cqe, cq_context, channel, comp_vector, None)))
}
symver!(ibv_create_cq, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int {
    guard(libc::EIO, || {
        let Some(c) = CQS.get(cq.cast::<UroceCq>()) else { return libc::EINVAL };
        // As rdma-core: every event handed out must be acked first (a
        // program that never acks waits here, as it would there).
        while c.events_acked.load(Ordering::Acquire) != c.events_delivered.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let busy = |c: &UroceCq| unused(&c.users, "ibv_destroy_cq", "QPs");
        match CQS.release(cq.cast::<UroceCq>(), busy) {
            Ok(c) => {
                by_id().remove(&c.inner.id());
                if let Some(ch) = c.channel {
                    ch.users.fetch_sub(1, Ordering::AcqRel);
                }
                0
            }
            Err(e) => e,
        }
    })
}
symver!(ibv_destroy_cq, "IBVERBS_1.1");

/// `ibv_resize_cq`: the CQ holds `cqe` entries from now on, its waiting
/// completions kept; `cq->cqe` says so, as rxe's provider writes it back.
/// EINVAL, and nothing changed, when more completions wait than `cqe`.
#[no_mangle]
pub extern "C" fn ibv_resize_cq(cq: *mut IbvCq, cqe: c_int) -> c_int {
    guard(libc::EIO, || {
        let Some(c) = CQS.get(cq.cast::<UroceCq>()) else { return libc::EINVAL };
        let Ok(entries) = usize::try_from(cqe) else {
            explain("ibv_resize_cq", &format!("{cqe} entries: give a positive number"));
            return libc::EINVAL;
        };
        if let Err(e) = c.inner.resize(entries) {
            return refused("ibv_resize_cq")(e);
        }
        // SAFETY: a field of this live CQ's C struct, which the program
        // reads; written while the call it made is under way, as rdma-core
        // does (no reference is made).
        unsafe { ptr::addr_of_mut!((*c.as_c()).cqe).write(cqe) };
        0
    })
}
symver!(ibv_resize_cq, "IBVERBS_1.1");

/// Says why each failed completion failed and what to do (flushes, which
/// follow the failure that caused them, are left quiet).
fn explain_failures(wcs: &[WorkCompletion]) {
    if !crate::explain::enabled() {
        return;
    }
    for wc in wcs.iter().filter(|w| !matches!(w.status, WcStatus::Success | WcStatus::WrFlushErr)) {
        let why = uroce_verbs::completion_advice(wc.status).unwrap_or("see the status");
        explain("ibv_poll_cq", &format!("wr_id {} on QP {:#08x}: {}: {why}", wc.wr_id, wc.qp_num, wc.status));
    }
}

/// The C form of a completion.
pub fn to_c(wc: &WorkCompletion) -> IbvWc {
    IbvWc {
        wr_id: wc.wr_id,
        status: wc.status as u32,
        opcode: wc.opcode as u32,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        // The union of verbs.h: `imm_data` in network order, or
        // `invalidated_rkey` (WITH_INV) in host order, as rxe gives it.
        imm_data: match wc.wc_flags.contains(WcFlags::WITH_INV) {
            true => wc.imm_data,
            false => wc.imm_data.to_be(),
        },
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: wc.wc_flags.0,
        pkey_index: wc.pkey_index,
        slid: 0,
        sl: roce_packet_type(wc.network_hdr),
        dlid_path_bits: 0,
    }
}

/// What mlx5 reports in a UD receive's `sl` on RoCE: the datagram's L3
/// header type from its CQE (1 IPv6, 2 IPv4). UCX's UD transport reads it
/// to find the destination address in the GRH area, and without it drops
/// every IPv4 datagram as misaddressed (UCX 1.13, Debian 12's).
fn roce_packet_type(hdr: NetworkHdr) -> u8 {
    match hdr {
        NetworkHdr::None => 0,
        NetworkHdr::Ipv6 => 1,
        NetworkHdr::Ipv4 => 2,
    }
}

/// `ops.poll_cq`: up to `n` completions into `out`; their count, or a
/// negative errno.
pub extern "C" fn poll_cq(cq: *mut IbvCq, n: c_int, out: *mut IbvWc) -> c_int {
    guard(-libc::EIO, || {
        // SAFETY: the program passes a CQ of its context, as rdma-core requires.
        let Some(c) = (unsafe { CQS.on_data_path(cq.cast::<UroceCq>()) }) else { return -libc::EINVAL };
        if n < 0 || (n > 0 && out.is_null()) {
            return -libc::EINVAL;
        }
        // A few at a time through a buffer on the stack: no allocation per poll.
        let mut buf = [WorkCompletion::default(); 16];
        let mut done = 0usize;
        while done < n as usize {
            let want = (n as usize - done).min(buf.len());
            let got = c.take(&mut buf[..want]);
            for (i, wc) in buf[..got].iter().enumerate() {
                // SAFETY: out holds n entries (the caller's array) and done + i < n.
                unsafe { out.add(done + i).write(to_c(wc)) };
            }
            done += got;
            if got < want {
                break;
            }
        }
        done as c_int
    })
}

/// `ops.req_notify_cq`: arms the CQ's completion event.
pub extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the program passes a CQ of its context, as rdma-core requires.
        let Some(c) = (unsafe { CQS.on_data_path(cq.cast::<UroceCq>()) }) else { return libc::EINVAL };
        c.inner.req_notify(solicited_only != 0).map_or_else(|e| e.errno(), |_| 0)
    })
}
