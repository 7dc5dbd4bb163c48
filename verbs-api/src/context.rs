//! The context: a link, the transport engine, and the thread that drives them.

use crate::channel::Notifier;
use crate::device::{DeviceAttr, PortAttr};
use crate::error::Error;
use crate::memory::Pd;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use tx::TxBatch;
use uroce_stack::link::{Link, LinkInfo, LinkStats, RxDatagram};
use uroce_transport::engine::{Counters, Engine, Event, Gid, Instant, RxMeta};

/// How the context moves packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Progress {
    /// A background thread that sleeps until a packet arrives, the application
    /// posts work, or a timer is due. Low CPU, low latency; the default.
    #[default]
    Blocking,
    /// A background thread that never sleeps: lowest latency, one core.
    /// While an application thread polls (a CQ, or [`Context::try_progress`])
    /// and so moves the packets itself, the thread dozes instead of spinning
    /// beside it.
    BusyPoll,
    /// No thread: the application calls [`Context::progress`] (tests, benchmarks).
    Manual,
}

/// Options for [`crate::Device::open_with`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// How the context moves packets.
    pub progress: Progress,
    /// Seeds QP numbers, keys and initial PSNs; `None` takes one from the clock.
    pub seed: Option<u64>,
    /// Write every frame the link sends and receives to this pcap file.
    pub pcap: Option<std::path::PathBuf>,
    /// Impair the link's traffic (loss, duplication, reordering, corruption, delay).
    pub impair: Option<uroce_stack::link::ImpairConfig>,
    /// At most this many request packets unacknowledged across the context's
    /// RC QPs (each QP also keeps at most 128). `None`: what the link's
    /// receive queue holds ([`LinkInfo::rx_queue_packets`]), at least 128;
    /// 1024 when the link cannot tell. Many QPs streaming at once past what
    /// the peer's queue holds lose packets and all go back N.
    pub max_inflight_psns: Option<u32>,
}

/// The longest a blocking progress thread sleeps with nothing due: it wakes
/// earlier for packets, posted work and timers.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// Receive batches a round takes in before it runs timers (a bound, so a
/// flood cannot starve transmission).
const MAX_DRAIN_BATCHES: usize = 64;
/// Empty rounds a busy-polling thread spins through before it starts yielding
/// its core on each empty round.
const BUSY_SPIN_ROUNDS: u32 = 64;
/// A busy-poll progress thread dozes while an application thread helped
/// this recently.
const HELPER_RECENT: Duration = Duration::from_micros(200);
/// How long it waits inside `recv` on a link that offers no descriptor to wait on.
const LINK_WAIT: Duration = Duration::from_millis(1);

mod tx;

pub(crate) struct Shared {
    pub engine: Mutex<Engine>,
    link: Mutex<Box<dyn Link>>,
    pub info: LinkInfo,
    epoch: std::time::Instant,
    pub notifier: Notifier,
    stop: AtomicBool,
    pub device_attr: DeviceAttr,
    waker: Waker,
    /// Transmit buffers, reused by whichever thread runs a round.
    tx: Mutex<TxBatch>,
    /// A poster queued packets while another thread held the transmit path:
    /// that thread sends them once it lets go (see `kick`).
    tx_pending: AtomicBool,
    /// When (`now()`, ns) an application thread last offered to help
    /// (`help`): a busy-poll progress thread leaves the core to it meanwhile.
    last_help: AtomicU64,
}

/// What a sleeping progress thread waits on: the link's descriptor and a
/// doorbell that posters ring when they could not send themselves.
struct Waker {
    link_fd: Option<OwnedFd>,
    doorbell: EventFd,
}

impl Waker {
    fn new(link: &dyn Link) -> Result<Waker, Error> {
        let doorbell = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::Os { verb: "ibv_open_device", err: e.into() })?;
        Ok(Waker { link_fd: link.wait_fd(), doorbell })
    }

    fn ring(&self) {
        let _ = self.doorbell.write(1);
    }

    /// Sleeps until the link is readable, the doorbell rings or `timeout` passes.
    fn sleep(&self, timeout: Duration) {
        let Some(link_fd) = &self.link_fd else { return };
        // Round up: waking early only costs a loop; waking late delays a timer.
        let ms = timeout.as_micros().div_ceil(1000).min(u128::from(u16::MAX)) as u16;
        let mut fds =
            [PollFd::new(link_fd.as_fd(), PollFlags::POLLIN), PollFd::new(self.doorbell.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(ms));
        if fds[1].revents().is_some_and(|r| r.contains(PollFlags::POLLIN)) {
            let _ = self.doorbell.read();
        }
    }

    /// Sleeps until the doorbell rings (a post the poster could not send)
    /// or a millisecond passes: not woken by packets, which a helping
    /// application thread takes in.
    fn doze(&self) {
        let mut fds = [PollFd::new(self.doorbell.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(1u8)).is_ok_and(|n| n > 0) {
            let _ = self.doorbell.read();
        }
    }
}

/// An open device: cheap to clone; the last clone (children hold one too)
/// stops the progress thread.
#[derive(Clone)]
pub struct Context(pub(crate) Arc<Handle>);

pub(crate) struct Handle {
    pub shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    progress: Progress,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Wake a sleeping thread now rather than at its next timeout.
        self.shared.waker.ring();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
        // The last ACKs a round held back, and anything queued, leave now.
        self.shared.kick();
    }
}

impl Context {
    pub(crate) fn start(link: Box<dyn Link>, opts: &OpenOptions) -> Result<Context, Error> {
        let info = link.info().clone();
        let gid = info.gids.get(0).map(|g| Gid(g.0)).unwrap_or_default();
        let seed = opts.seed.unwrap_or_else(clock_seed);
        let port_mtu = crate::device::engine_mtu(info.path_mtu.bytes());
        let max_inflight_psns = opts.max_inflight_psns.unwrap_or_else(|| inflight_budget(&info));
        let engine = Engine::new(uroce_transport::engine::EngineConfig { seed, port_mtu, gid, max_inflight_psns });
        let waker = Waker::new(&*link)?;
        let shared = Arc::new(Shared {
            waker,
            tx: Mutex::new(TxBatch::new()),
            engine: Mutex::new(engine),
            link: Mutex::new(link),
            device_attr: DeviceAttr::for_link(&info),
            info,
            epoch: std::time::Instant::now(),
            notifier: Notifier::default(),
            stop: AtomicBool::new(false),
            tx_pending: AtomicBool::new(false),
            last_help: AtomicU64::new(0),
        });
        let thread = match opts.progress {
            Progress::Manual => None,
            mode => {
                let s = shared.clone();
                let busy = mode == Progress::BusyPoll;
                let spawned = std::thread::Builder::new().name("uroce-progress".into()).spawn(move || s.run(busy));
                Some(spawned.map_err(|err| Error::Os { verb: "ibv_open_device", err })?)
            }
        };
        Ok(Context(Arc::new(Handle { shared, thread: Mutex::new(thread), progress: opts.progress })))
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.0.shared
    }

    /// One round of progress, without waiting: send what is queued, take in
    /// what arrived, run due timers. For [`Progress::Manual`] contexts (harmless
    /// on others). Returns how many packets moved.
    ///
    /// On a manual context, ACKs that a round's arrivals call for (and
    /// nothing else) may wait for the next post or the next `progress`, to
    /// leave with them in one system call: keep calling it while the peer
    /// may still be waiting for you, and drop the context (which sends what
    /// is left) when done.
    pub fn progress(&self) -> usize {
        let shared = self.shared();
        let moved = {
            let mut batch = shared.tx.lock().unwrap_or_else(|e| e.into_inner());
            // A manual context's owner calls again (it polls): ACKs may wait
            // for its next request or round. Not on others: their thread may
            // be asleep.
            shared.round_with(&mut batch, Duration::ZERO, self.0.progress == Progress::Manual)
        };
        shared.send_kicked();
        moved
    }

    /// One round of progress unless another thread is running one; how many
    /// packets moved. For a thread that busy-waits on something other than a
    /// CQ (a byte of a region that a peer's RDMA WRITE sets, as perftest's
    /// write_lat does): it moves the packets itself when it gets the core,
    /// instead of waiting for the progress thread to be scheduled. On a
    /// manual context, the same as [`Context::progress`].
    pub fn try_progress(&self) -> usize {
        if self.0.progress == Progress::Manual {
            return self.progress();
        }
        let moved = self.shared().help(self.0.progress);
        self.shared().send_kicked();
        moved
    }

    /// How this context was opened to move packets.
    pub fn progress_mode(&self) -> Progress {
        self.0.progress
    }

    /// A protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Pd {
        Pd::new(self.clone())
    }

    /// The device's attributes and limits (`ibv_query_device`).
    pub fn query_device(&self) -> DeviceAttr {
        self.shared().device_attr.clone()
    }

    /// Port 1's attributes (`ibv_query_port`).
    pub fn query_port(&self) -> PortAttr {
        PortAttr::for_link(&self.shared().info)
    }

    /// GID `index` of the port: 0 the IPv6 link-local GID, 1 the IPv4-mapped
    /// one (as on rxe), then other IPv6 addresses.
    pub fn query_gid(&self, index: usize) -> Result<Gid, Error> {
        let gids = &self.shared().info.gids;
        gids.get(index).map(|g| Gid(g.0)).ok_or(Error::NoSuchGid { index, len: gids.len() })
    }

    /// GID `index`, if this device can send packets from it: a udp link sends
    /// from the one address its socket is bound to, and keeps the other
    /// entries (the interface's link-local GID) only so that indices mean
    /// what they mean on rxe.
    pub fn source_gid(&self, index: usize) -> Result<Gid, Error> {
        let gid = self.query_gid(index)?;
        let info = &self.shared().info;
        if info.gids.sends_from(index) {
            return Ok(gid);
        }
        let usable: Vec<String> =
            info.gids.iter().filter(|(i, _)| info.gids.sends_from(*i)).map(|(i, _)| i.to_string()).collect();
        Err(Error::GidNotSendable { index, gid, device: info.name.clone(), usable: usable.join(", ") })
    }

    /// Why packets to a peer went nowhere, when the link knows: the last
    /// address no neighbour answered for (ARP or IPv6 neighbour discovery),
    /// as one sentence that says what to check.
    pub fn unresolved_neighbour(&self) -> Option<String> {
        let (ip, tries) = self.link_stats().last_unresolved?;
        let on = self.link_info().ifname.clone().unwrap_or_else(|| self.link_info().name.clone());
        Some(format!("no neighbour answered for {ip} on {on} after {tries} tries: is the peer on this link?"))
    }

    /// The link underneath: name, addresses, MTU.
    pub fn link_info(&self) -> &LinkInfo {
        &self.shared().info
    }

    /// The link's counters: packets, bytes, syscalls, drops.
    pub fn link_stats(&self) -> LinkStats {
        let stats = self.shared().link.lock().unwrap_or_else(|e| e.into_inner()).stats();
        self.shared().send_kicked();
        stats
    }

    /// The engine's counters, with the kernel rxe's names.
    pub fn counters(&self) -> Counters {
        self.shared().engine().counters().clone()
    }

    /// The next asynchronous event, if one is waiting (`ibv_get_async_event`
    /// without blocking): a QP gone to error, a CQ overflow, an SRQ limit, a
    /// drained SQ. Each is also logged when it is taken.
    pub fn poll_async_event(&self) -> Option<Event> {
        let event = self.shared().engine().poll_event()?;
        tracing::warn!("uroce: async event {event:?}");
        Some(event)
    }

    /// Waits up to `timeout` for an asynchronous event (`ibv_get_async_event`).
    pub fn get_async_event(&self, timeout: Duration) -> Result<Event, Error> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.poll_async_event() {
                return Ok(e);
            }
            if std::time::Instant::now() >= deadline {
                return Err(Error::Timeout { verb: "ibv_get_async_event" });
            }
            if self.progress_mode() == Progress::Manual {
                self.progress();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The default budget of unacknowledged request packets: what the link's
/// receive queue holds (the peer's is taken to be alike).
fn inflight_budget(info: &LinkInfo) -> u32 {
    use uroce_transport::engine::{DEFAULT_MAX_INFLIGHT_PSNS, MAX_UNACKED_PSNS};
    match u32::try_from(info.rx_queue_packets).unwrap_or(u32::MAX) {
        0 => DEFAULT_MAX_INFLIGHT_PSNS,
        n => n.clamp(MAX_UNACKED_PSNS as u32, 16 * DEFAULT_MAX_INFLIGHT_PSNS),
    }
}

fn clock_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    t.as_nanos() as u64 ^ u64::from(std::process::id()) << 32
}

impl Shared {
    pub fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn run(&self, busy: bool) {
        // Without a descriptor to sleep on, the thread waits inside `recv`.
        let in_recv = if busy || self.waker.link_fd.is_some() { Duration::ZERO } else { LINK_WAIT };
        let mut idle_rounds = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            let moved = match self.tx.lock() {
                // A round that moved packets is followed by another at once.
                Ok(mut batch) => self.round_with(&mut batch, in_recv, true),
                Err(e) => self.round_with(&mut e.into_inner(), in_recv, true),
            };
            if moved > 0 {
                idle_rounds = 0;
                continue;
            }
            if busy && self.app_is_helping() {
                // The application's thread polls and moves the packets itself:
                // spinning beside it only takes its core (two ends of a test in
                // one process are four busy threads on this 2-core machine).
                self.waker.doze();
            } else if busy {
                // Spin, but after a few empty rounds offer the core to whoever
                // waits for it (the application thread that polls the CQ):
                // with more runnable threads than cores, a thread that never
                // yields holds its core until the scheduler tick.
                idle_rounds = idle_rounds.saturating_add(1);
                if idle_rounds >= BUSY_SPIN_ROUNDS {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            } else {
                self.waker.sleep(self.idle_wait());
            }
        }
    }

    /// How long the thread may sleep: until the engine's or the link's next
    /// deadline, at most [`IDLE_WAIT`].
    fn idle_wait(&self) -> Duration {
        let engine_due = self.engine().poll_timeout().map(|t| t - self.now());
        let link_due = self.link.lock().unwrap_or_else(|e| e.into_inner()).next_due();
        let link_due = link_due.map(|t| t.saturating_duration_since(std::time::Instant::now()));
        [engine_due, link_due].into_iter().flatten().fold(IDLE_WAIT, Duration::min)
    }

    /// One non-blocking round, unless another thread is running one: a thread
    /// that busy-polls a CQ moves its packets itself instead of waiting for the
    /// progress thread to be scheduled (on a 2-core machine that wait is a
    /// scheduler tick). Not on manual contexts, where only `progress` moves.
    pub fn help(&self, progress: Progress) -> usize {
        if progress == Progress::BusyPoll {
            self.last_help.store(self.now().as_nanos(), Ordering::Relaxed);
        }
        if progress == Progress::Manual || self.link.try_lock().is_err() {
            return 0;
        }
        match self.tx.try_lock() {
            // The progress thread may sleep: nothing held back.
            Ok(mut batch) => self.round_with(&mut batch, Duration::ZERO, false),
            Err(_) => 0,
        }
    }

    /// Whether an application thread offered to help within the last
    /// [`HELPER_RECENT`].
    fn app_is_helping(&self) -> bool {
        let last = self.last_help.load(Ordering::Relaxed);
        last != 0 && self.now().as_nanos().saturating_sub(last) < HELPER_RECENT.as_nanos() as u64
    }

    /// One round; `hold_acks` as in `flush_tx`.
    fn round_with(&self, batch: &mut TxBatch, wait: Duration, hold_acks: bool) -> usize {
        let mut moved = self.flush_tx(batch, self.now(), false);
        moved += self.receive(wait);
        // Take in everything already queued before any timer fires: a thread
        // that was not scheduled for a while must see the ACKs that arrived
        // meanwhile, not retransmit as if they had not.
        for _ in 0..MAX_DRAIN_BATCHES {
            match self.receive(Duration::ZERO) {
                0 => break,
                n => moved += n,
            }
        }
        let now = self.now();
        {
            let mut engine = self.engine();
            if engine.poll_timeout().is_some_and(|t| t <= now) {
                engine.handle_timeout(now);
            }
        }
        moved += self.flush_tx(batch, now, hold_acks);
        self.notifier.fire(self);
        moved
    }

    /// Hands what the link received to the engine.
    fn receive(&self, wait: Duration) -> usize {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        // One clock read per batch: its packets arrived together.
        let mut now = None;
        let mut deliver = |d: &RxDatagram<'_>| {
            let meta = RxMeta { src_gid: ip_gid(d.peer), dst_gid: ip_gid(d.local) };
            let now = *now.get_or_insert_with(|| self.now());
            self.engine().handle_packet(now, meta, d.roce);
        };
        match link.recv(wait, &mut deliver) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("uroce: receiving from the link failed: {e}");
                0
            }
        }
    }
}

pub(crate) fn gid_ip(g: Gid) -> std::net::IpAddr {
    uroce_stack::link::wire_addr(std::net::IpAddr::V6(std::net::Ipv6Addr::from(g.0)))
}

fn ip_gid(ip: std::net::IpAddr) -> Gid {
    match ip {
        std::net::IpAddr::V4(v4) => Gid::from_ipv4(v4.octets()),
        std::net::IpAddr::V6(v6) => Gid(v6.octets()),
    }
}

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;
