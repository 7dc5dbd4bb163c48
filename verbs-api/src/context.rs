//! The context: a link, the transport engine, and the thread that drives them.

use crate::channel::Notifier;
use crate::device::{DeviceAttr, PortAttr};
use crate::error::Error;
use crate::memory::Pd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use uroce_stack::link::{Link, LinkInfo, LinkStats, RxDatagram, TxDatagram};
use uroce_transport::engine::{Counters, Engine, Gid, Instant, RxMeta, Transmit, MAX_PACKET_LEN};

/// How the context moves packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Progress {
    /// A background thread that waits in the link (up to 1 ms, or the next
    /// engine deadline) when idle. Low CPU; the default.
    #[default]
    Blocking,
    /// A background thread that never sleeps: lowest latency, one core.
    BusyPoll,
    /// No thread: the application calls [`Context::progress`] (tests, benchmarks).
    Manual,
}

/// Options for [`crate::Device::open_with`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    pub progress: Progress,
    /// Seeds QP numbers, keys and initial PSNs; `None` takes one from the clock.
    pub seed: Option<u64>,
    /// Write every frame the link sends and receives to this pcap file.
    pub pcap: Option<std::path::PathBuf>,
    /// Impair the link's traffic (loss, duplication, reordering, corruption, delay).
    pub impair: Option<uroce_stack::link::ImpairConfig>,
}

/// Packets moved per batch between engine and link.
const BATCH: usize = 32;
/// The longest a blocking progress thread waits in the link.
const IDLE_WAIT: Duration = Duration::from_millis(1);

pub(crate) struct Shared {
    pub engine: Mutex<Engine>,
    link: Mutex<Box<dyn Link>>,
    pub info: LinkInfo,
    epoch: std::time::Instant,
    pub notifier: Notifier,
    stop: AtomicBool,
    pub device_attr: DeviceAttr,
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
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Context {
    pub(crate) fn start(link: Box<dyn Link>, opts: &OpenOptions) -> Context {
        let info = link.info().clone();
        let gid = info.gids.get(0).map(|g| Gid(g.0)).unwrap_or_default();
        let seed = opts.seed.unwrap_or_else(clock_seed);
        let port_mtu = crate::device::engine_mtu(info.path_mtu.bytes());
        let engine = Engine::new(uroce_transport::engine::EngineConfig { seed, port_mtu, gid });
        let shared = Arc::new(Shared {
            engine: Mutex::new(engine),
            link: Mutex::new(link),
            device_attr: DeviceAttr::for_link(&info),
            info,
            epoch: std::time::Instant::now(),
            notifier: Notifier::default(),
            stop: AtomicBool::new(false),
        });
        let thread = match opts.progress {
            Progress::Manual => None,
            mode => {
                let s = shared.clone();
                let busy = mode == Progress::BusyPoll;
                let spawned = std::thread::Builder::new().name("uroce-progress".into()).spawn(move || s.run(busy));
                Some(spawned.expect("spawn the uroce progress thread"))
            }
        };
        Context(Arc::new(Handle { shared, thread: Mutex::new(thread), progress: opts.progress }))
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.0.shared
    }

    /// One round of progress, without waiting: send what is queued, take in
    /// what arrived, run due timers. For [`Progress::Manual`] contexts (harmless
    /// on others). Returns how many packets moved.
    pub fn progress(&self) -> usize {
        self.shared().round(Duration::ZERO)
    }

    pub fn progress_mode(&self) -> Progress {
        self.0.progress
    }

    pub fn alloc_pd(&self) -> Pd {
        Pd::new(self.clone())
    }

    pub fn query_device(&self) -> DeviceAttr {
        self.shared().device_attr.clone()
    }

    pub fn query_port(&self) -> PortAttr {
        PortAttr::for_link(&self.shared().info)
    }

    /// GID `index` of the port: 0 the IPv6 link-local GID, 1 the IPv4-mapped
    /// one (as on rxe), then other IPv6 addresses.
    pub fn query_gid(&self, index: usize) -> Result<Gid, Error> {
        let gids = &self.shared().info.gids;
        gids.get(index).map(|g| Gid(g.0)).ok_or(Error::NoSuchGid { index, len: gids.len() })
    }

    /// The link underneath: name, addresses, MTU.
    pub fn link_info(&self) -> &LinkInfo {
        &self.shared().info
    }

    pub fn link_stats(&self) -> LinkStats {
        self.shared().link.lock().unwrap_or_else(|e| e.into_inner()).stats()
    }

    /// The engine's counters, with the kernel rxe's names.
    pub fn counters(&self) -> Counters {
        self.shared().engine().counters().clone()
    }
}

fn clock_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    t.as_nanos() as u64 ^ u64::from(std::process::id()) << 32
}

/// Reusable transmit buffers, so the data path allocates nothing per packet.
struct TxBatch {
    bufs: Vec<Box<[u8]>>,
    meta: Vec<Transmit>,
}

impl TxBatch {
    fn new() -> TxBatch {
        TxBatch { bufs: (0..BATCH).map(|_| vec![0u8; MAX_PACKET_LEN].into_boxed_slice()).collect(), meta: Vec::new() }
    }
}

impl Shared {
    pub fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn run(&self, busy: bool) {
        let mut batch = TxBatch::new();
        while !self.stop.load(Ordering::Relaxed) {
            let wait = if busy { Duration::ZERO } else { self.idle_wait() };
            let moved = self.round_with(&mut batch, wait);
            if busy && moved == 0 {
                std::hint::spin_loop();
            }
        }
    }

    /// How long the thread may wait: until the engine's next deadline, at most
    /// [`IDLE_WAIT`].
    fn idle_wait(&self) -> Duration {
        match self.engine().poll_timeout() {
            Some(t) => (t - self.now()).min(IDLE_WAIT),
            None => IDLE_WAIT,
        }
    }

    fn round(&self, wait: Duration) -> usize {
        // Manual progress runs this in the application's loops: reuse the
        // buffers instead of allocating and zeroing a batch every call.
        thread_local! {
            static BATCH: std::cell::RefCell<TxBatch> = std::cell::RefCell::new(TxBatch::new());
        }
        BATCH.with(|b| match b.try_borrow_mut() {
            Ok(mut batch) => self.round_with(&mut batch, wait),
            Err(_) => self.round_with(&mut TxBatch::new(), wait),
        })
    }

    fn round_with(&self, batch: &mut TxBatch, wait: Duration) -> usize {
        let mut moved = self.flush_tx(batch);
        moved += self.receive(wait);
        let now = self.now();
        {
            let mut engine = self.engine();
            if engine.poll_timeout().is_some_and(|t| t <= now) {
                engine.handle_timeout(now);
            }
        }
        moved += self.flush_tx(batch);
        self.notifier.fire(self);
        moved
    }

    /// Sends everything the engine has queued, in batches.
    fn flush_tx(&self, batch: &mut TxBatch) -> usize {
        let mut sent = 0;
        loop {
            batch.meta.clear();
            {
                let mut engine = self.engine();
                let now = self.now();
                for buf in batch.bufs.iter_mut() {
                    match engine.poll_transmit(now, buf) {
                        Some(t) => batch.meta.push(t),
                        None => break,
                    }
                }
            }
            if batch.meta.is_empty() {
                return sent;
            }
            let grams: Vec<TxDatagram<'_>> = batch
                .meta
                .iter()
                .zip(batch.bufs.iter())
                .map(|(t, buf)| TxDatagram { peer: gid_ip(t.dest_gid), src_port: t.src_port, roce: &buf[..t.len] })
                .collect();
            let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = link.send(&grams) {
                tracing::warn!("uroce: the link refused a batch of {} packets: {e}", grams.len());
            }
            sent += grams.len();
        }
    }

    /// Hands what the link received to the engine.
    fn receive(&self, wait: Duration) -> usize {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        let mut deliver = |d: &RxDatagram<'_>| {
            let meta = RxMeta { src_gid: ip_gid(d.peer), dst_gid: ip_gid(d.local) };
            let now = self.now();
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

    /// Sends what the engine queued now, from the calling thread, unless the
    /// progress thread holds the link (it then sends on its next round).
    pub fn kick(&self) {
        if let Ok(mut link) = self.link.try_lock() {
            let mut engine = self.engine();
            let now = self.now();
            let mut buf = [0u8; MAX_PACKET_LEN];
            // Latency path: one packet at a time, straight out.
            while let Some(t) = engine.poll_transmit(now, &mut buf) {
                let d = TxDatagram { peer: gid_ip(t.dest_gid), src_port: t.src_port, roce: &buf[..t.len] };
                if let Err(e) = link.send(&[d]) {
                    tracing::warn!("uroce: the link refused a packet: {e}");
                }
            }
        }
    }
}

fn gid_ip(g: Gid) -> std::net::IpAddr {
    uroce_stack::link::wire_addr(std::net::IpAddr::V6(std::net::Ipv6Addr::from(g.0)))
}

fn ip_gid(ip: std::net::IpAddr) -> Gid {
    match ip {
        std::net::IpAddr::V4(v4) => Gid::from_ipv4(v4.octets()),
        std::net::IpAddr::V6(v6) => Gid(v6.octets()),
    }
}
