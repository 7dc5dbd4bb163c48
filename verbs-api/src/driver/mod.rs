//! The driver of one open device: the one owner of its transport engine, its
//! link, its transmit batch and (once rdma_cm uses the device) QP1 with the
//! CM state machine, all in one [`Core`] behind one lock.
//!
//! Every handle reaches the device through that lock ([`Driver::lock`],
//! [`Driver::post`]): a verb takes it, changes the engine, sends what the
//! engine queued, and lets go. Progress (taking packets in, timers, QP1) runs
//! in rounds ([`Driver::round`]) on the progress thread, or on an application
//! thread that polls, each round taking the lock once per receive batch. The
//! lock is a leaf: nothing else is locked while it is held, and nothing the
//! application can drop lives inside it, so no user object is destroyed
//! under it. What a round produced for the layers above (completion channel
//! events, rdma_cm events) is handed out after it lets go. docs/ARCHITECTURE.md
//! draws the whole path.
//!
//! Several contexts opened on the same device in one process share its
//! driver: one engine, one link, one QPN space, so their QPs can be connected
//! to each other (rdma-core's tests do this). One lock rather than an owner
//! thread fed by a command queue: a post then costs one uncontended lock and
//! the send system call on the posting thread, where a command queue costs a
//! wake-up of the owner and a second thread's scheduling on every post (the
//! measurement is in docs/ARCHITECTURE.md).

mod activity;
mod event_routes;
mod event_wait;
mod fds;
mod mcast;
mod open;
mod progress;
mod published;
mod tx;

use crate::context::{OpenOptions, Progress};
use crate::cq::CqInner;
use crate::device::DeviceAttr;
use crate::error::Error;
use crate::rdma_cm::{Qp1, QP1_REFILL_EVERY};
use crate::CompChannel;
use activity::AppActivity;
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use tx::{AckHold, TxBatch, STREAM_INFLIGHT};
use uroce_stack::link::{Integrity, Link, LinkInfo, OpenedLink, RxBatch, SteerKey};
use uroce_transport::engine::{CqHandle, Engine, EngineConfig, Event, Gid, Instant, QpInitAttr, RxMeta, SrqHandle};

pub(crate) use event_routes::{AsyncQueue, EventObject, EventRoutes};
pub(crate) use event_wait::{EventWait, MAX_WAIT_BESIDE_LINK};
pub(crate) use open::{is_open, open_device};
pub(crate) use progress::LINK_WAIT;
pub use published::{device_counters, Stat};

/// Everything of one device that changes, under the driver's one lock.
pub(crate) struct Core {
    /// The transport engine: QPs, CQs, regions, the wire protocol.
    pub engine: Engine,
    link: Box<dyn Link>,
    /// What the link last received, handed to the engine as one batch.
    rx: RxBatch,
    /// When that batch was taken in (one clock read per batch).
    rx_at: Instant,
    /// Transmit buffers, reused by whichever thread sends.
    tx: TxBatch,
    /// Whether lone ACKs wait for the next request (delayed ACKs).
    ack_hold: AckHold,
    /// CQs armed with `req_notify`, fired when they hold a completion.
    armed: Vec<Armed>,
    /// QP1 and the CM, from rdma_cm's first use of the device.
    pub qp1: Option<Qp1>,
    /// The context each QP, CQ and SRQ belongs to, for its events.
    pub event_routes: EventRoutes,
    /// The services QP1 listens on and the ports bound IDs reserve, as
    /// claimed on the link.
    claimed_services: BTreeSet<u64>,
    /// The ports (as service IDs) bound IDs reserve, with how many IDs
    /// reserve each.
    reserved_services: BTreeMap<u64, usize>,
    /// The link's descriptors for a forked child (refreshed when a claim
    /// or a multicast change may have changed them).
    fds: Arc<fds::FdSnapshot>,
}

/// A CQ armed for one event on its channel.
struct Armed {
    cq: CqHandle,
    inner: Weak<CqInner>,
    channel: CompChannel,
    /// The CQ's count of completions when it was armed: the event is for
    /// the next one (as `ibv_req_notify_cq`'s), not for those waiting.
    pushed_at_arm: u64,
}

/// A completion channel event to deliver once the lock is let go.
pub(crate) struct Fired {
    channel: CompChannel,
    cq: Weak<CqInner>,
}

impl Fired {
    fn deliver(self) {
        self.channel.fire(self.cq);
    }
}

/// One open device. Handles hold it through a [`DeviceOwner`].
pub(crate) struct Driver {
    core: Mutex<Core>,
    /// The link's static facts, read once at open.
    pub info: LinkInfo,
    pub device_attr: DeviceAttr,
    /// What the first open asked for (its progress mode is the device's), to
    /// refuse a later open that asks otherwise.
    options: OpenOptions,
    epoch: std::time::Instant,
    /// The link's descriptor and the doorbell: what a blocking progress
    /// thread sleeps on.
    link_fd: Option<OwnedFd>,
    /// The link's multicast groups' descriptor, woken for as the link's.
    mcast_fd: Option<OwnedFd>,
    doorbell: EventFd,
    stop: AtomicBool,
    /// A forked child's copy of its parent's device (it moves no packets).
    forked_away: AtomicBool,
    /// The link's descriptors, for a forked child to let go of even when a
    /// thread of the parent held the lock at the fork.
    fds: Arc<fds::FdSnapshot>,
    /// What the application's threads did lately: the progress thread
    /// spins, dozes or sleeps by it.
    activity: AppActivity,
    /// Held while rdma_cm events are handed out, so that they go in order.
    dispatching: Mutex<()>,
    /// Where the counters go for `uroce devinfo -v` (`published`), and when
    /// (`now()`, ns) next.
    publisher: Mutex<Option<published::Publisher>>,
    next_publish_ns: AtomicU64,
}

impl Driver {
    fn new(opened: OpenedLink, opts: &OpenOptions, seed: uroce_transport::Seed) -> Result<Driver, Error> {
        let OpenedLink { link, info } = opened;
        let info_name = info.name.clone();
        let gid = info.gids.get(0).unwrap_or_default();
        let port_mtu = info.path_mtu;
        let max_inflight_psns = opts.max_inflight_psns.unwrap_or_else(|| progress::inflight_budget(&info));
        let mut engine = Engine::new(EngineConfig { seed, port_mtu, gid, max_inflight_psns });
        // RC and UC packets must come to the GID their QP was connected from.
        engine.set_gid_table((0..info.gids.len()).map(|i| info.gids.get(i)).collect());
        let doorbell = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::Os { verb: "ibv_open_device", err: e.into() })?;
        let fds = Arc::new(fds::FdSnapshot::new(&link.descriptors()));
        Ok(Driver {
            fds: fds.clone(),
            link_fd: link.wait_fd(),
            mcast_fd: link.aux_wait_fd(),
            core: Mutex::new(Core {
                engine,
                link,
                rx: RxBatch::new(),
                rx_at: Instant::from_nanos(0),
                tx: TxBatch::new(),
                ack_hold: AckHold::new(opts.ack_delay.unwrap_or(tx::ACK_HOLD)),
                armed: Vec::new(),
                qp1: None,
                event_routes: EventRoutes::default(),
                claimed_services: BTreeSet::new(),
                reserved_services: BTreeMap::new(),
                fds,
            }),
            device_attr: DeviceAttr::for_link(&info),
            info,
            options: opts.clone(),
            epoch: std::time::Instant::now(),
            doorbell,
            stop: AtomicBool::new(false),
            forked_away: AtomicBool::new(false),
            activity: AppActivity::default(),
            dispatching: Mutex::new(()),
            publisher: Mutex::new(published::Publisher::new(&info_name)),
            next_publish_ns: AtomicU64::new(0),
        })
    }

    /// The one lock. Take nothing else while holding it.
    pub fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How the device moves packets, fixed by the first open.
    pub fn progress(&self) -> Progress {
        self.options.progress
    }

    /// The engine's clock: time since the device was opened.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Runs a verb on the engine, then sends what it queued (with any ACKs
    /// a round held back) from this thread. ACKs held back stay while the
    /// verb queued nothing to send (a receive posted before the answer).
    pub fn post<R>(&self, verb: impl FnOnce(&mut Engine) -> R) -> R {
        self.post_corked(None, verb)
    }

    /// [`Driver::post`] for `ibv_post_send` on QP `qpn`: while the QP keeps
    /// [`STREAM_INFLIGHT`] or more request packets unacknowledged, a post
    /// sends only full batches and leaves the rest in the batch for the
    /// round that the QP's next ACK (or its retransmission timer, or the
    /// poster's next poll) brings, as TCP corks behind data in flight.
    /// Every round sends the batch first and last, and takes ACKs in only
    /// in between, so nothing waits for an ACK that was already taken in.
    /// Without this, a program posting 4 KiB SENDs one by one paid a system
    /// call per packet (send_bw 4 KiB at a quarter of write_bw's rate); a
    /// ping-pong, with one packet in flight, still sends at once.
    pub fn post_request<R>(&self, qpn: u32, verb: impl FnOnce(&mut Engine) -> R) -> R {
        self.post_corked(Some(qpn), verb)
    }

    /// [`Driver::post`], corked behind QP `stream`'s packets in flight
    /// ([`Driver::post_request`]) if one is named.
    fn post_corked<R>(&self, stream: Option<u32>, verb: impl FnOnce(&mut Engine) -> R) -> R {
        let posting = self.activity.posting();
        let mut core = self.lock();
        let streaming = stream.is_some_and(|qpn| core.engine.qp_inflight_psns(qpn) >= STREAM_INFLIGHT);
        let r = verb(&mut core.engine);
        let now = self.now();
        posting.posted(now);
        if streaming {
            core.send_full_batches(now);
            return r;
        }
        core.flush_tx(now, true);
        if core.ack_hold.take_wake_thread() {
            drop(core);
            self.ring();
        }
        r
    }

    /// Moves the engine's asynchronous events to their contexts'
    /// descriptors (with the lock let go, as each queue has a lock of its
    /// own).
    pub fn publish_async_events(&self) {
        let events = self.lock().take_async_events();
        publish(events);
    }

    /// Whether the counters are due to be published at `now` (a clock read
    /// the round made anyway); if so, the next time is set.
    fn publish_due(&self, now: Instant) -> bool {
        let next = self.next_publish_ns.load(Ordering::Relaxed);
        now.as_nanos() >= next
            && self
                .next_publish_ns
                .compare_exchange(
                    next,
                    now.as_nanos() + published::PUBLISH_EVERY_NS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Publishes `stats` (with the core's lock let go).
    fn publish_stats(&self, stats: Vec<Stat>) {
        if let Some(p) = self.publisher.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            p.publish(stats);
        }
    }

    /// Wakes the progress thread: a timer may be due earlier than it planned.
    pub fn ring(&self) {
        let _ = self.doorbell.write(1);
    }

    /// Arms `cq` for one event on `channel`.
    pub fn arm(&self, cq: CqHandle, inner: Weak<CqInner>, channel: CompChannel) {
        {
            let mut core = self.lock();
            if !core.armed.iter().any(|a| a.cq == cq) {
                let pushed_at_arm = core.engine.cq_pushed(cq);
                core.armed.push(Armed { cq, inner, channel, pushed_at_arm });
            }
        }
        // The application waits for events now, not polling: a progress
        // thread that dozed while it polled watches the link again at once
        // (and no longer dozes while arms come).
        if self.activity.armed(self.now()) {
            self.ring();
        }
    }
}

impl Core {
    /// Takes one receive's batch from the link, then hands the whole batch
    /// to the engine; how many packets.
    pub(crate) fn receive(&mut self, now: impl Fn() -> Instant, wait: std::time::Duration) -> usize {
        let Core { link, engine, rx, rx_at, qp1, .. } = self;
        rx.clear();
        if let Err(e) = link.recv(wait, rx) {
            tracing::warn!("uroce: receiving from the link failed: {e}");
        }
        if rx.is_empty() {
            return 0;
        }
        // One clock read per batch: its packets arrived together.
        let at = now();
        *rx_at = at;
        let last = rx.len();
        for (n, d) in rx.iter().enumerate() {
            let meta = RxMeta {
                src_gid: Gid::from_ip(d.peer),
                dst_gid: Gid::from_ip(d.local),
                icrc_skipped: d.integrity == Integrity::Mac,
            };
            engine.handle_packet(at, meta, d.roce);
            // MADs to the CM and QP1's receives posted again long before
            // they run out: one receive can bring thousands of MADs (a
            // burst of REQs, all of one size, leaves a peer as GSO groups
            // and arrives so with UDP_GRO), and a UD QP drops what it has
            // no receive for. And after the batch's last packet.
            if (n + 1) % QP1_REFILL_EVERY == 0 || n + 1 == last {
                if let Some(qp1) = qp1.as_mut() {
                    qp1.take_completions(engine, at);
                }
            }
        }
        last
    }

    /// Disarms every armed CQ that got a completion since it was armed, and
    /// says whose channel to fire. Solicited-only arming is treated as
    /// arming for every completion: a superset of events. (Firing for a
    /// completion that waited already made perftest's `-e` latency tests
    /// fail: an arm before the poll that takes the completion, with a round
    /// in between, gave an event with nothing new behind it.)
    fn take_fired(&mut self) -> Vec<Fired> {
        let mut fired = Vec::new();
        let engine = &self.engine;
        self.armed.retain(|a| {
            if a.inner.strong_count() == 0 {
                return false;
            }
            if engine.cq_pushed(a.cq) == a.pushed_at_arm {
                return true;
            }
            fired.push(Fired { channel: a.channel.clone(), cq: a.inner.clone() });
            false
        });
        fired
    }

    /// The engine's asynchronous events, taken out, each with the queue of
    /// the context it goes to (an empty Vec, which allocates nothing, when
    /// there are none).
    fn take_async_events(&mut self) -> Vec<(Event, Arc<AsyncQueue>)> {
        let engine = &mut self.engine;
        self.event_routes.route(std::iter::from_fn(|| engine.poll_event()))
    }

    /// Every counter, as `--stats` prints them: the engine's (the kernel
    /// rxe's names, then uroce's drops and refusals), the CM's, the link's.
    pub fn stats(&self) -> Vec<Stat> {
        let mut stats: Vec<Stat> = self.engine.counters().iter().collect();
        let cm = self.qp1.as_ref().map(|q| q.cm.stats()).unwrap_or_default();
        stats.extend([("cm_rcvd_bad_src", cm.rcvd_bad_src), ("cm_req_refused", cm.req_refused)]);
        let s = self.link_stats();
        stats.extend([
            ("link_tx_packets", s.tx_packets),
            ("link_rx_packets", s.rx_packets),
            ("link_rx_icrc_bad", s.rx_icrc_bad),
            ("link_rx_malformed", s.rx_malformed),
            ("link_tx_dropped", s.tx_dropped),
            ("link_neighbours_unresolved", s.neighbours_unresolved),
            ("link_tx_same_host", s.tx_same_host),
            ("link_rx_same_host", s.rx_same_host),
            ("link_tx_ring_full", s.tx_ring_full),
        ]);
        stats
    }

    /// The link's counters.
    pub fn link_stats(&self) -> uroce_stack::link::LinkStats {
        self.link.stats()
    }

    /// Claims `key` on the link. A claim may change the link's descriptors
    /// (a process sharing the address takes the port over when its owner
    /// left): the copy a forked child uses follows.
    fn claim(&mut self, key: SteerKey) -> std::io::Result<()> {
        let r = self.link.claim(key);
        self.note_descriptors();
        r
    }

    /// Refreshes the copy of the link's descriptors a forked child uses.
    fn note_descriptors(&self) {
        self.fds.store(&self.link.descriptors());
    }

    /// A new QP, its number claimed on the link: on an address shared with
    /// other processes, a random QPN another one holds is drawn again.
    pub fn create_qp(&mut self, attr: QpInitAttr) -> Result<u32, Error> {
        const VERB: &str = "ibv_create_qp";
        // Bounded: a collision of random 24-bit numbers twice running is rare enough.
        for _ in 0..8 {
            let qpn = self.engine.create_qp(attr).map_err(Error::engine(VERB))?;
            match self.claim(SteerKey::Qpn(qpn)) {
                Ok(()) => return Ok(qpn),
                Err(e) => {
                    let _ = self.engine.destroy_qp(qpn);
                    if e.kind() != std::io::ErrorKind::AddrInUse {
                        return Err(Error::Os { verb: VERB, err: e });
                    }
                }
            }
        }
        Err(Error::Os { verb: VERB, err: std::io::Error::from_raw_os_error(nix::errno::Errno::EBUSY as i32) })
    }

    /// Destroys QP `qpn` and lets go of its number. The ACKs it owes leave
    /// first: a round that drains several batches takes packets in and
    /// sends their ACKs under two takes of the lock, and an application
    /// that saw a completion in between may destroy the QP there.
    pub fn destroy_qp(&mut self, qpn: u32) {
        self.event_routes.remove(EventObject::Qp(qpn));
        self.send_owed_acks(qpn);
        let _ = self.engine.destroy_qp(qpn);
        self.link.release(SteerKey::Qpn(qpn));
    }

    /// Destroys CQ `cq` (no QP uses it) and forgets whose its events were.
    pub fn destroy_cq(&mut self, cq: CqHandle) {
        self.event_routes.remove(EventObject::Cq(cq));
        let _ = self.engine.destroy_cq(cq);
    }

    /// Destroys SRQ `srq` (no QP uses it) and forgets whose its events were.
    pub fn destroy_srq(&mut self, srq: SrqHandle) {
        self.event_routes.remove(EventObject::Srq(srq));
        let _ = self.engine.destroy_srq(srq);
    }

    /// Claims on the link the services QP1 listens on, and lets go of those
    /// neither listened on nor reserved by a bound ID any more. A service
    /// another process sharing the address listens on stays that
    /// process's: refused with EADDRINUSE.
    fn claim_services(&mut self) -> Result<(), Error> {
        let listens = self.qp1.iter().flat_map(|q| q.service_ids());
        let listened: BTreeSet<u64> = listens.chain(self.reserved_services.keys().copied()).collect();
        for &sid in self.claimed_services.difference(&listened) {
            self.link.release(SteerKey::Service(sid));
        }
        self.claimed_services.retain(|sid| listened.contains(sid));
        for sid in listened {
            if self.claimed_services.contains(&sid) {
                continue;
            }
            if let Err(err) = self.claim(SteerKey::Service(sid)) {
                if let Some(qp1) = &mut self.qp1 {
                    qp1.drop_service(sid);
                }
                return Err(match err.kind() {
                    std::io::ErrorKind::AddrInUse => Error::Cm {
                        verb: "rdma_listen",
                        what: format!("{err}: another program on this address listens on the port; use another port"),
                        errno: crate::rdma_cm::libc_errno::EADDRINUSE,
                    },
                    _ => Error::Os { verb: "rdma_listen", err },
                });
            }
            self.claimed_services.insert(sid);
        }
        Ok(())
    }

    /// Runs `serve` on QP1 and the engine if rdma_cm started QP1; its answer,
    /// or false.
    fn with_qp1(&mut self, serve: impl FnOnce(&mut Qp1, &mut Engine) -> bool) -> bool {
        match &mut self.qp1 {
            Some(qp1) => serve(qp1, &mut self.engine),
            None => false,
        }
    }
}

/// What the contexts of one device hold: the driver and its progress
/// thread, which stops when the last context goes.
pub(crate) struct DeviceOwner {
    pub driver: Arc<Driver>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The process that opened the device: a forked child's copy has no
    /// progress thread to stop and no device to close.
    pid: u32,
}

/// Puts events taken from the engine on their contexts' descriptors.
fn publish(events: Vec<(Event, Arc<AsyncQueue>)>) {
    events.into_iter().for_each(|(e, queue)| queue.push(e));
}

impl Drop for DeviceOwner {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // The thread is the parent's: its handle is not to be joined here.
            std::mem::forget(self.thread.get_mut().unwrap_or_else(|e| e.into_inner()).take());
            return;
        }
        self.driver.stop.store(true, Ordering::Relaxed);
        // Wake a sleeping thread now rather than at its next timeout.
        self.driver.ring();
        let thread = self.thread.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        // The progress thread itself may drop the last context (an rdma_cm
        // event it handed out held the last ID): it ends on its own.
        if let Some(t) = thread.filter(|t| t.thread().id() != std::thread::current().id()) {
            let _ = t.join();
        }
        // The last ACKs a round held back, and QP1's last MADs, leave now.
        self.driver.close();
        let stats = self.driver.lock().stats();
        if let Some(p) = self.driver.publisher.lock().unwrap_or_else(|e| e.into_inner()).take() {
            p.close(stats);
        }
    }
}

impl Driver {
    /// Reserves a bound ID's port (service `sid`) on the link, as bind(2)
    /// reserves a port for the whole host: a process sharing the address
    /// that holds it refuses (`AddrInUse`), so that two processes never
    /// bind one port.
    pub fn reserve_service(&self, sid: u64) -> std::io::Result<()> {
        let mut core = self.lock();
        if !core.claimed_services.contains(&sid) {
            core.claim(SteerKey::Service(sid))?;
            core.claimed_services.insert(sid);
        }
        *core.reserved_services.entry(sid).or_default() += 1;
        Ok(())
    }

    /// Gives back what [`Driver::reserve_service`] took; the claim goes
    /// with the last reservation unless QP1 listens on the service
    /// (`Core::claim_services` lets go of what neither wants).
    pub fn release_service(&self, sid: u64) {
        let mut core = self.lock();
        if let Some(n) = core.reserved_services.get_mut(&sid) {
            *n -= 1;
            if *n == 0 {
                core.reserved_services.remove(&sid);
            }
        }
        let _ = core.claim_services();
    }

    /// Runs `f` on QP1's CM (QP1 starts on rdma_cm's first use of the
    /// device), then puts the MADs it queued on the wire and wakes the
    /// progress thread, whose next CM timer may now be earlier.
    pub fn with_cm<R>(&self, f: impl FnOnce(&mut Qp1, Instant) -> R) -> Result<R, Error> {
        let r = {
            let mut core = self.lock();
            let now = self.now();
            let Core { engine, qp1, .. } = &mut *core;
            let qp1 = match qp1 {
                Some(q) => q,
                None => {
                    qp1.insert(Qp1::start(engine, self.device_attr.node_guid).map_err(Error::engine("rdma_cm QP1"))?)
                }
            };
            let r = f(qp1, now);
            qp1.flush(engine);
            let claimed = core.claim_services();
            core.flush_tx(now, false);
            claimed.map(|_| r)
        };
        self.ring();
        r
    }

    /// In a forked child: lets go of the descriptors the parent's device
    /// holds (see `open::let_go_after_fork`), and moves no packets from now.
    fn let_go_after_fork(&self) {
        self.forked_away.store(true, Ordering::Relaxed);
        // The link's own list if the lock is free; else (a thread of the
        // parent held it at the fork: it is gone, the lock stays held) the
        // copy kept beside it.
        match self.core.try_lock() {
            Ok(core) => core.link.descriptors().into_iter().for_each(uroce_stack::fork::let_go),
            Err(_) => self.fds.each(uroce_stack::fork::let_go),
        }
        for fd in [self.link_fd.as_ref(), self.mcast_fd.as_ref()].into_iter().flatten() {
            uroce_stack::fork::let_go(fd.as_raw_fd());
        }
        uroce_stack::fork::let_go(self.doorbell.as_fd().as_raw_fd());
    }

    /// Whether this is a forked child's copy of its parent's device.
    pub fn forked_away(&self) -> bool {
        self.forked_away.load(Ordering::Relaxed)
    }

    /// Whether rdma_cm started QP1 on this device.
    pub fn has_qp1(&self) -> bool {
        self.lock().qp1.is_some()
    }
}
