//! The context: an open device's handle. The device itself (engine, link,
//! progress) is its driver (`crate::driver`), shared by every context opened
//! on the same device in the process.

use crate::device::{DeviceAttr, PortAttr};
use crate::driver::{AsyncQueue, DeviceOwner, Driver, EventObject};
use crate::error::Error;
use crate::memory::Pd;
use std::sync::Arc;
use std::time::Duration;
use uroce_stack::link::{LinkInfo, LinkStats};
use uroce_transport::engine::{Counters, Event, Gid};

/// How the context moves packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Progress {
    /// A background thread that sleeps until a packet arrives, the application
    /// posts work, or a timer is due. Low CPU, low latency; the default.
    #[default]
    Blocking,
    /// A background thread that spins: lowest latency, one core while
    /// packets flow. While an application thread polls (a CQ, or
    /// [`Context::try_progress`]) and so moves the packets itself, the thread
    /// dozes instead of spinning beside it; after 64 empty rounds with no
    /// application thread polling it sleeps on the link, as a blocking one
    /// does, until the next packet, post or timer.
    BusyPoll,
    /// No thread: the application calls [`Context::progress`] (tests,
    /// benchmarks); a wait for a completion event
    /// ([`crate::CompChannel::get_cq_event`]) or a CM event moves the
    /// packets meanwhile.
    Manual,
}

/// Options for [`crate::Device::open_with`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// How the context moves packets.
    pub progress: Progress,
    /// Seeds QP numbers, keys, initial PSNs and comm IDs, so that a run
    /// repeats exactly. Insecure: a peer that knows or guesses it can
    /// predict every key. `None` (the default) seeds them from the operating
    /// system's CSPRNG.
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
    /// Delayed ACKs: how long lone ACKs may wait for the application's
    /// next request, to leave behind it in one system call. `None`: 50 us;
    /// zero: ACKs leave at once. A wait that no request ends costs the peer
    /// that much latency, so the device stops waiting while waits do not
    /// pay (a one-way flow).
    pub ack_delay: Option<std::time::Duration>,
}

/// An open device: cheap to clone; the last clone (children hold one too)
/// closes it, and the last context on a device stops its driver.
#[derive(Clone)]
pub struct Context(pub(crate) Arc<ContextInner>);

pub(crate) struct ContextInner {
    pub owner: Arc<DeviceOwner>,
    /// The asynchronous events of this context's QPs, CQs and SRQs, on
    /// its own descriptor (`context->async_fd`), as the kernel keeps one per
    /// `ibv_context`.
    async_events: Arc<AsyncQueue>,
}

impl Context {
    pub(crate) fn new(owner: Arc<DeviceOwner>) -> Result<Context, Error> {
        let async_events = Arc::new(AsyncQueue::new("ibv_open_device")?);
        Ok(Context(Arc::new(ContextInner { owner, async_events })))
    }

    /// From now on `object`'s asynchronous events come to this context.
    /// Called with the driver's lock held, as the object is made.
    pub(crate) fn route_events_of(&self, core: &mut crate::driver::Core, object: EventObject) {
        core.event_routes.insert(object, &self.0.async_events);
    }

    /// The device's driver.
    pub(crate) fn driver(&self) -> &Driver {
        &self.0.owner.driver
    }

    /// Whether two contexts are opened on the same device (share one driver).
    pub(crate) fn same_device(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.0.owner, &other.0.owner)
    }

    /// One round of progress, without waiting: send what is queued, take in
    /// what arrived, run due timers. For [`Progress::Manual`] contexts (harmless
    /// on others). Returns how many packets moved.
    ///
    /// On a manual context, ACKs that a round's arrivals call for (and
    /// nothing else) may wait for the next post, up to
    /// [`OpenOptions::ack_delay`], to leave behind its request in one
    /// system call; a `progress` after that sends them: keep calling it
    /// while the peer may still be waiting for you, and drop the context
    /// (which sends what is left) when done.
    pub fn progress(&self) -> usize {
        // A manual context's owner calls again (it polls): ACKs may wait for
        // its next request or round. Not on others: their thread may be asleep.
        self.driver().round(Duration::ZERO, self.progress_mode() == Progress::Manual)
    }

    /// One round of progress; how many packets moved. For a thread that busy-waits on something other than a
    /// CQ (a byte of a region that a peer's RDMA WRITE sets, as perftest's
    /// write_lat does): it moves the packets itself when it gets the core,
    /// instead of waiting for the progress thread to be scheduled. On a
    /// manual context, the same as [`Context::progress`].
    pub fn try_progress(&self) -> usize {
        match self.progress_mode() {
            Progress::Manual => self.progress(),
            _ => self.driver().help(),
        }
    }

    /// How this context was opened to move packets.
    pub fn progress_mode(&self) -> Progress {
        self.driver().progress()
    }

    /// A protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Pd {
        Pd::new(self.clone())
    }

    /// The device's attributes and limits (`ibv_query_device`).
    pub fn query_device(&self) -> DeviceAttr {
        self.driver().device_attr.clone()
    }

    /// Port 1's attributes (`ibv_query_port`).
    pub fn query_port(&self) -> PortAttr {
        PortAttr::for_link(&self.driver().info)
    }

    /// GID `index` of the port: 0 the IPv6 link-local GID, 1 the IPv4-mapped
    /// one (as on rxe), then other IPv6 addresses.
    pub fn query_gid(&self, index: usize) -> Result<Gid, Error> {
        let gids = &self.driver().info.gids;
        gids.get(index).ok_or(Error::NoSuchGid { index, len: gids.len() })
    }

    /// GID `index`, if this device can send packets from it: a udp link sends
    /// from the one address its socket is bound to, and keeps the other
    /// entries (the interface's link-local GID) only so that indices mean
    /// what they mean on rxe.
    pub fn source_gid(&self, index: usize) -> Result<Gid, Error> {
        let gid = self.query_gid(index)?;
        let info = &self.driver().info;
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
        &self.driver().info
    }

    /// The link's counters: packets, bytes, syscalls, drops.
    pub fn link_stats(&self) -> LinkStats {
        self.driver().lock().link_stats()
    }

    /// The engine's counters, with the kernel rxe's names.
    pub fn counters(&self) -> Counters {
        self.driver().lock().engine.counters().clone()
    }

    /// Every counter of the device in this process, as `--stats` prints
    /// them: the engine's (the kernel rxe's names, then uroce's drops and
    /// refusals), the CM's (`cm_`), the link's (`link_`). The same list is
    /// published for [`crate::device_counters`].
    pub fn stats(&self) -> Vec<crate::Stat> {
        self.driver().lock().stats()
    }

    /// What rdma_cm's connection manager refused: messages about a
    /// connection from another port than its peer's, REQs beyond the cap
    /// per peer. All zero before rdma_cm is first used on the device.
    pub fn cm_stats(&self) -> uroce_transport::cm::CmStats {
        self.driver().lock().qp1.as_ref().map(|q| q.cm.stats()).unwrap_or_default()
    }

    /// The next asynchronous event, if one is waiting (`ibv_get_async_event`
    /// without blocking): a QP gone to error, a CQ overflow, an SRQ limit, a
    /// drained SQ. Each is also logged when it is taken.
    pub fn poll_async_event(&self) -> Option<Event> {
        let driver = self.driver();
        // Events a verb raised on this thread since the last round.
        driver.publish_async_events();
        self.0.async_events.try_take().map(logged)
    }

    /// Waits up to `timeout` for an asynchronous event (`ibv_get_async_event`).
    pub fn get_async_event(&self, timeout: Duration) -> Result<Event, Error> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.poll_async_event() {
                return Ok(e);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout { verb: "ibv_get_async_event" });
            }
            let mut wait = left;
            if self.progress_mode() == Progress::Manual {
                // Only this thread moves packets: a round, then a short wait.
                self.progress();
                wait = left.min(Duration::from_micros(500));
            }
            if let Some(e) = self.0.async_events.take(wait) {
                return Ok(logged(e));
            }
        }
    }

    /// Whether the device's link has address `ip` (an IPv4-mapped IPv6
    /// address counts as its IPv4 address), as rdma_cm finds devices.
    pub fn has_ip(&self, ip: std::net::IpAddr) -> bool {
        crate::rdma_cm::has_ip(self.link_info(), ip)
    }

    /// Whether `other` is this very context (a clone of it), not merely
    /// another context on the same device.
    pub fn same_context(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The event a record read from [`Context::async_fd`] names: the program
    /// read the descriptor itself (`ibv_get_async_event` in C reads
    /// `context->async_fd`, blocking or not as the program set it); `None` if
    /// the record names no waiting event.
    pub fn async_event_of_record(&self, record: &[u8]) -> Option<Event> {
        self.0.async_events.take_record(record).map(logged)
    }

    /// Moves events a verb raised on this thread onto [`Context::async_fd`]
    /// (the progress thread does so after each round).
    pub fn publish_async_events(&self) {
        self.driver().publish_async_events();
    }

    /// The asynchronous event descriptor (`context->async_fd`): one record
    /// per event of this context's QPs, CQs and SRQs, readable while one
    /// waits (another context of the same device has its own). Take events
    /// with [`Context::poll_async_event`].
    pub fn async_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.0.async_events.as_fd()
    }
}

/// An asynchronous event the application took, logged as it goes.
fn logged(event: Event) -> Event {
    tracing::warn!("uroce: async event {event:?}");
    event
}

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;
