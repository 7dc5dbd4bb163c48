//! The raw-link engine ([`RawLink`]): what the raw links (packet, tap)
//! share. Ethernet/IPv4/IPv6/UDP framing on [`crate::frame`], the ICRC on
//! transmit and its check on receive, ARP and neighbour discovery for the
//! link's own addresses, and the neighbour cache.

use super::gid::{Gid, GidTable};
use super::membership;
use super::neighbour::{self, Ndisc, NeighbourCache, NeighbourConfig, Resolution};
use super::{wire_addr, Direction, FrameSink, Integrity, LinkInfo, LinkStats, RxBatch, TxDatagram};
use crate::frame::{
    parse_ethernet, EthFields, FrameError, FrameRepr, IpFields, Ipv4Fields, Ipv6Fields, ETH_HDR, IPV4_HDR, IPV6_HDR,
    UDP_HDR,
};
use crate::pcap::LinkType;
use crate::sys::mmsg::{self, RxMeta, MAX_BATCH};
use crate::sys::udp::UdpSocket;
use smallvec::SmallVec;
use smoltcp::wire::{ArpOperation, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};
use uroce_transport::engine::marked_authenticated;
use uroce_transport::engine::Mtu;
use uroce_transport::icrc;
use uroce_transport::wire::ICRC_LEN;

/// Moves whole Ethernet frames.
pub(crate) trait FrameIo: Send {
    fn fd(&self) -> RawFd;
    /// Sends up to [`MAX_BATCH`] frames; how many went (an error: the first failed).
    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize>;
    /// Receives without waiting, one frame per `slot` of `buf`.
    fn recv(&mut self, buf: &mut [u8], slot: usize, metas: &mut [RxMeta]) -> io::Result<usize>;
}

/// The addresses and options a raw link runs with.
pub(crate) struct RawLinkConfig {
    pub kind: &'static str,
    pub name: String,
    pub ifname: String,
    pub mac: [u8; 6],
    /// IPv4 address and on-link prefix length (0: every IPv4 peer is on-link).
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// Other IPv6 addresses than the link-local one (derived from `mac`).
    pub ipv6: Vec<Ipv6Addr>,
    /// Addresses the host kernel also holds: it answers ARP/ND for them.
    pub kernel_owned: Vec<IpAddr>,
    pub mtu: usize,
    pub path_mtu: Option<Mtu>,
    /// Sockets keeping the kernel from answering our RoCE packets with ICMP.
    pub guards: Vec<UdpSocket>,
    /// [`LinkInfo::rx_queue_packets`].
    pub rx_queue_packets: usize,
}

/// BTH + ICRC: the shortest RoCEv2 packet.
const MIN_ROCE: usize = 12 + ICRC_LEN;
/// The largest frame slot (jumbo frames).
const MAX_SLOT: usize = 9216 + ETH_HDR;
/// The longest a receive waits before running the neighbour timers.
const TIMER_TICK: Duration = Duration::from_millis(100);

struct Ctl {
    frame: Vec<u8>,
    roce: bool,
}

pub(crate) struct RawLink<I: FrameIo> {
    io: I,
    mac: [u8; 6],
    ipv4: Option<(Ipv4Addr, u8)>,
    /// Link-local first.
    ipv6: Vec<Ipv6Addr>,
    kernel_owned: Vec<IpAddr>,
    info: LinkInfo,
    stats: LinkStats,
    neigh: NeighbourCache,
    ident: u16,
    slot: usize,
    tx_buf: Vec<u8>,
    ctl: Vec<Ctl>,
    pool: Vec<Vec<u8>>,
    metas: Vec<RxMeta>,
    sink: Option<FrameSink>,
    probes: Vec<IpAddr>,
    _guards: Vec<UdpSocket>,
    /// Multicast groups joined: their datagrams are taken in, and reported
    /// (IGMP, MLD) on join and to a querier.
    groups: Vec<IpAddr>,
}

impl<I: FrameIo> RawLink<I> {
    pub(crate) fn new(io: I, cfg: RawLinkConfig) -> RawLink<I> {
        let link_local = Gid::link_local(cfg.mac);
        let ll = link_local.to_ipv6();
        let mut ipv6 = vec![ll];
        ipv6.extend(cfg.ipv6.iter().copied().filter(|a| *a != ll));
        let gids = GidTable::new(link_local, cfg.ipv4.map(|a| a.0), &ipv6[1..]);
        let path_mtu = cfg.path_mtu.or_else(|| Mtu::for_link_mtu(cfg.mtu)).unwrap_or(Mtu::Mtu256);
        let info = LinkInfo {
            kind: cfg.kind,
            name: cfg.name,
            ifname: Some(cfg.ifname),
            mac: Some(cfg.mac),
            ipv4: cfg.ipv4.map(|a| a.0),
            ipv6: ipv6.clone(),
            mtu: cfg.mtu,
            path_mtu,
            gids,
            rx_queue_packets: cfg.rx_queue_packets,
            frame_type: LinkType::Ethernet,
        };
        let slot = (cfg.mtu + ETH_HDR).min(MAX_SLOT);
        RawLink {
            io,
            mac: cfg.mac,
            ipv4: cfg.ipv4,
            ipv6,
            kernel_owned: cfg.kernel_owned,
            info,
            stats: LinkStats::default(),
            neigh: NeighbourCache::new(NeighbourConfig::default()),
            ident: 1,
            slot,
            tx_buf: vec![0; slot * MAX_BATCH],
            ctl: Vec::new(),
            pool: Vec::new(),
            metas: vec![RxMeta::default(); MAX_BATCH],
            sink: None,
            probes: Vec::new(),
            _guards: cfg.guards,
            groups: Vec::new(),
        }
    }

    pub(crate) fn io(&self) -> &I {
        &self.io
    }

    pub(crate) fn neighbours(&self) -> &NeighbourCache {
        &self.neigh
    }

    fn is_ours(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.ipv4.is_some_and(|(o, _)| o == a),
            IpAddr::V6(a) => self.ipv6.contains(&a),
        }
    }

    /// Whether we answer ARP/ND for `ip` (the kernel answers for its own).
    fn answers_for(&self, ip: IpAddr) -> bool {
        self.is_ours(ip) && !self.kernel_owned.contains(&ip)
    }

    /// Whether we answer a neighbour solicitation from `src` for `target`.
    ///
    /// Every one for our addresses that has a source: the kernel stays silent
    /// for an address it holds while that address is tentative (duplicate
    /// address detection: 1-2.5 s after an interface comes up, longer than an
    /// RC requester waits before it gives up) and for one held on another
    /// interface (a bridge port shares the bridge's MAC, and so its link-local
    /// address). When the kernel answers too, both advertisements say the
    /// same. Duplicate address detection probes (source `::`) for an address
    /// the kernel holds stay the kernel's business: answering them would fail
    /// its own detection.
    fn answers_solicit(&self, src: Ipv6Addr, target: Ipv6Addr) -> bool {
        self.is_ours(IpAddr::V6(target)) && (!src.is_unspecified() || self.answers_for(IpAddr::V6(target)))
    }

    fn src_v6(&self, peer: Ipv6Addr) -> Ipv6Addr {
        if peer.is_unicast_link_local() {
            return self.ipv6[0];
        }
        self.ipv6.get(1).copied().unwrap_or(self.ipv6[0])
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_default()
    }

    fn push_probe(&mut self, peer: IpAddr) {
        let mut b = self.buffer();
        match peer {
            IpAddr::V4(p) => {
                let Some((ours, _)) = self.ipv4 else { return };
                neighbour::arp(&mut b, ArpOperation::Request, (self.mac, ours), ([0; 6], p));
                self.stats.arp_requests_sent += 1;
            }
            IpAddr::V6(p) => {
                neighbour::neighbour_solicit(&mut b, self.mac, self.src_v6(p), p);
                self.stats.nd_solicits_sent += 1;
            }
        }
        self.ctl.push(Ctl { frame: b, roce: false });
    }

    fn run_timers(&mut self, now: Instant) {
        let mut probes = std::mem::take(&mut self.probes);
        probes.clear();
        self.neigh.poll(now, &mut probes);
        for p in &probes {
            self.push_probe(*p);
        }
        self.probes = probes;
    }

    /// Headers for a datagram, or `None` (dropped) if the link cannot carry it.
    fn repr_for(&mut self, d: &TxDatagram<'_>, peer: IpAddr) -> Option<FrameRepr> {
        let ip = match peer {
            IpAddr::V4(p) => {
                let (src, prefix) = self.ipv4?;
                if prefix > 0 && prefix <= 32 && !p.is_multicast() {
                    let mask = u32::MAX << (32 - u32::from(prefix));
                    if u32::from(src) & mask != u32::from(p) & mask {
                        return None; // off-link: no router support
                    }
                }
                let h = Ipv4Fields::new(src, p, self.ident);
                self.ident = self.ident.wrapping_add(1);
                IpFields::V4(h)
            }
            IpAddr::V6(p) => {
                IpFields::V6(Ipv6Fields { src: self.src_v6(p), dst: p, traffic_class: 0, flow_label: 0, hop_limit: 64 })
            }
        };
        let repr = FrameRepr::new(Some(EthFields { dst: [0; 6], src: self.mac }), ip, d.src_port);
        let len = repr.buffer_len(d.roce.len());
        (d.roce.len() >= MIN_ROCE && len - ETH_HDR <= self.info.mtu && len <= self.slot).then_some(repr)
    }

    fn write_frame(repr: &FrameRepr, roce: &[u8], buf: &mut [u8]) -> bool {
        let at = repr.emit(buf, roce.len());
        buf[at].copy_from_slice(roce);
        if marked_authenticated(roce) {
            // Its ICRC stays the zero the engine left (`icrc_to_send`).
            repr.seal_checksum(buf);
            return true;
        }
        repr.seal(buf).is_ok()
    }

    /// Sends frames, dropping (and counting) those the kernel refuses.
    fn transmit(&mut self, frames: &[&[u8]], roce: &[bool]) -> io::Result<usize> {
        let mut at = 0;
        let mut sent = 0;
        while at < frames.len() {
            let end = (at + MAX_BATCH).min(frames.len());
            self.stats.tx_syscalls += 1;
            match self.io.send(&frames[at..end]) {
                Ok(k) => {
                    self.stats.tx_max_batch = self.stats.tx_max_batch.max(k as u64);
                    for j in at..at + k {
                        if roce[j] {
                            self.stats.tx_packets += 1;
                            self.stats.tx_bytes += (frames[j].len() - roce_offset(frames[j])) as u64;
                            sent += 1;
                        }
                        if let Some(s) = self.sink.as_mut() {
                            s(Direction::Tx, frames[j]);
                        }
                    }
                    if k == 0 {
                        self.stats.tx_dropped += 1;
                    }
                    at += k.max(1);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if drop_frame(&e) => {
                    self.stats.tx_dropped += 1;
                    at += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    fn flush_ctl(&mut self) -> io::Result<usize> {
        if self.ctl.is_empty() {
            return Ok(0);
        }
        let ctl = std::mem::take(&mut self.ctl);
        let frames: Vec<&[u8]> = ctl.iter().map(|c| &c.frame[..]).collect();
        let kinds: Vec<bool> = ctl.iter().map(|c| c.roce).collect();
        let r = self.transmit(&frames, &kinds);
        drop(frames);
        for c in ctl {
            if self.pool.len() < 256 {
                self.pool.push(c.frame);
            }
        }
        r
    }

    pub(crate) fn send(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize> {
        let now = Instant::now();
        self.run_timers(now);
        let mut sent = 0;
        for chunk in batch.chunks(MAX_BATCH) {
            // The frames' lengths, in the order of their slots: only those
            // written, not a zeroed array of MAX_BATCH per send.
            let mut lens = SmallVec::<[usize; MAX_BATCH]>::new();
            for d in chunk {
                let peer = wire_addr(d.peer);
                let Some(mut repr) = self.repr_for(d, peer) else {
                    self.stats.tx_dropped += 1;
                    continue;
                };
                let len = repr.buffer_len(d.roce.len());
                // A group's frames go to its Ethernet multicast address: no neighbour to resolve.
                let resolution = match peer.is_multicast() {
                    true => Resolution::Known { mac: membership::multicast_mac(peer), probe: false },
                    false => self.neigh.resolve(peer, now),
                };
                match resolution {
                    Resolution::Known { mac, probe } => {
                        if probe {
                            self.push_probe(peer);
                        }
                        repr.eth = Some(EthFields { dst: mac, src: self.mac });
                        let at = lens.len() * self.slot;
                        if Self::write_frame(&repr, d.roce, &mut self.tx_buf[at..at + len]) {
                            lens.push(len);
                        } else {
                            self.stats.tx_dropped += 1;
                        }
                    }
                    Resolution::Unknown { probe } => {
                        if probe {
                            self.push_probe(peer);
                        }
                        let mut b = self.buffer();
                        b.clear();
                        b.resize(len, 0);
                        if Self::write_frame(&repr, d.roce, &mut b) {
                            self.neigh.queue(peer, b);
                        } else {
                            self.stats.tx_dropped += 1;
                        }
                    }
                }
            }
            self.flush_ctl()?;
            let tx_buf = std::mem::take(&mut self.tx_buf);
            let mut frames = SmallVec::<[&[u8]; MAX_BATCH]>::new();
            for (i, len) in lens.iter().enumerate() {
                frames.push(&tx_buf[i * self.slot..i * self.slot + len]);
            }
            let r = self.transmit(&frames, &[true; MAX_BATCH][..lens.len()]);
            drop(frames);
            self.tx_buf = tx_buf;
            sent += r?;
        }
        Ok(sent)
    }

    fn queue_flushed(&mut self, flushed: Option<std::collections::VecDeque<Vec<u8>>>, mac: [u8; 6]) {
        for mut f in flushed.into_iter().flatten() {
            EthernetFrame::new_unchecked(&mut f[..]).set_dst_addr(EthernetAddress(mac));
            self.ctl.push(Ctl { frame: f, roce: true });
        }
    }

    fn on_arp(&mut self, arp: ArpRepr, now: Instant) {
        let ArpRepr::EthernetIpv4 {
            operation, source_hardware_addr, source_protocol_addr, target_protocol_addr, ..
        } = arp
        else {
            return;
        };
        let (sha, spa) = (source_hardware_addr.0, source_protocol_addr);
        let for_us = self.is_ours(IpAddr::V4(target_protocol_addr));
        let flushed = self.neigh.learn(IpAddr::V4(spa), sha, now, for_us);
        self.queue_flushed(flushed, sha);
        if for_us && operation == ArpOperation::Request && self.answers_for(IpAddr::V4(target_protocol_addr)) {
            let mut b = self.buffer();
            neighbour::arp(&mut b, ArpOperation::Reply, (self.mac, target_protocol_addr), (sha, spa));
            self.ctl.push(Ctl { frame: b, roce: false });
            self.stats.arp_replies_sent += 1;
        }
    }

    fn on_ndisc(&mut self, nd: Ndisc, now: Instant) {
        match nd {
            Ndisc::Solicit { src, src_mac, target } => {
                if !self.is_ours(IpAddr::V6(target)) {
                    return;
                }
                let (to, to_mac) = if src.is_unspecified() {
                    let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
                    (all, neighbour::multicast_mac(all))
                } else {
                    let flushed = self.neigh.learn(IpAddr::V6(src), src_mac, now, true);
                    self.queue_flushed(flushed, src_mac);
                    (src, src_mac)
                };
                if self.answers_solicit(src, target) {
                    let mut b = self.buffer();
                    neighbour::neighbour_advert(&mut b, self.mac, target, to_mac, to);
                    self.ctl.push(Ctl { frame: b, roce: false });
                    self.stats.nd_adverts_sent += 1;
                }
            }
            Ndisc::Advert { target, mac, solicited } => {
                let flushed = self.neigh.learn(IpAddr::V6(target), mac, now, solicited);
                self.queue_flushed(flushed, mac);
            }
        }
    }

    pub(crate) fn recv(&mut self, timeout: Duration, batch: &mut RxBatch) -> io::Result<usize> {
        let now = Instant::now();
        self.run_timers(now);
        self.flush_ctl()?;
        // Without a wait, the receive is the readiness check (a look at the
        // ring, or recvmmsg with MSG_DONTWAIT): no poll first.
        if !timeout.is_zero() && !mmsg::wait_readable(self.io.fd(), timeout.min(TIMER_TICK))? {
            return Ok(0);
        }
        self.stats.rx_syscalls += 1;
        let slot = self.slot;
        let base = batch.next_offset();
        let got = self.io.recv(batch.area(slot * MAX_BATCH), slot, &mut self.metas)?;
        batch.commit(got * slot);
        self.stats.rx_max_batch = self.stats.rx_max_batch.max(got as u64);
        let now = Instant::now();
        let mut kept = 0;
        for i in 0..got {
            let m = self.metas[i];
            if m.truncated {
                self.stats.rx_malformed += 1;
                continue;
            }
            let start = base + i * slot;
            if self.on_frame(batch, start..start + m.len, now) {
                kept += 1;
            }
        }
        self.flush_ctl()?;
        Ok(kept)
    }

    /// Handles the frame at `at` of `batch`; `true` if it kept a datagram.
    fn on_frame(&mut self, batch: &mut RxBatch, at: Range<usize>, now: Instant) -> bool {
        let frame = batch.bytes(at.clone());
        if frame.len() < ETH_HDR {
            self.stats.rx_other += 1;
            return false;
        }
        let eth = EthernetFrame::new_unchecked(frame);
        let to_us = eth.dst_addr() == EthernetAddress(self.mac);
        if !to_us && !eth.dst_addr().is_multicast() {
            self.stats.rx_other += 1; // another host's unicast (promiscuous socket)
            return false;
        }
        if let Some(s) = self.sink.as_mut() {
            s(Direction::Rx, frame);
        }
        if !to_us && membership::is_query(frame) {
            self.report_groups();
        }
        match eth.ethertype() {
            EthernetProtocol::Arp => {
                if let Some(arp) = neighbour::parse_arp(frame) {
                    self.on_arp(arp, now);
                }
                self.stats.rx_other += 1;
                return false;
            }
            EthernetProtocol::Ipv6 => {
                if let Some(nd) = neighbour::parse_ndisc(frame) {
                    self.on_ndisc(nd, now);
                    self.stats.rx_other += 1;
                    return false;
                }
            }
            _ => {}
        }
        let p = match parse_ethernet(frame) {
            Ok(p) => p,
            Err(FrameError::NotRoce) => {
                self.stats.rx_other += 1;
                return false;
            }
            Err(FrameError::Malformed(_)) => {
                self.stats.rx_malformed += u64::from(to_us);
                return false;
            }
        };
        let dst = p.repr.ip.dst();
        let to_group = !to_us && self.groups.contains(&dst);
        if !to_group && (!to_us || !self.is_ours(dst)) {
            self.stats.rx_other += 1;
            return false;
        }
        // An authenticated packet's MAC, checked by the engine, stands in
        // for its ICRC.
        let integrity = if marked_authenticated(p.roce) { Integrity::Mac } else { Integrity::Icrc };
        if integrity == Integrity::Icrc {
            match icrc::check(p.ip_packet) {
                Ok(true) => {}
                Ok(false) => {
                    self.stats.rx_icrc_bad += 1;
                    return false;
                }
                Err(_) => {
                    self.stats.rx_malformed += 1;
                    return false;
                }
            }
        }
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += p.roce.len() as u64;
        // Where the RoCE packet lies: it ends the frame's UDP payload.
        let offset = p.roce.as_ptr() as usize - frame.as_ptr() as usize;
        let roce = at.start + offset..at.start + offset + p.roce.len();
        let (peer, src_port) = (p.repr.ip.src(), p.repr.udp.src_port);
        batch.keep_at(peer, src_port, dst, roce, integrity);
        true
    }

    /// Takes in `group`'s datagrams from now on and says so on the link
    /// (twice, as IGMP and MLD do, a report being easily lost).
    pub(crate) fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let group = wire_addr(group);
        if !group.is_multicast() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{group} is not a multicast address")));
        }
        if !self.groups.contains(&group) {
            self.groups.push(group);
            for _ in 0..2 {
                self.push_membership(group, true);
            }
        }
        self.flush_ctl().map(drop)
    }

    /// Stops taking in `group`'s datagrams and says so (a leave).
    pub(crate) fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let group = wire_addr(group);
        if let Some(i) = self.groups.iter().position(|g| *g == group) {
            self.groups.remove(i);
            self.push_membership(group, false);
        }
        self.flush_ctl().map(drop)
    }

    /// A querier asked: every group joined is reported again.
    fn report_groups(&mut self) {
        for i in 0..self.groups.len() {
            self.push_membership(self.groups[i], true);
        }
    }

    /// Queues the report (or leave) of `group` from this link's address of its family.
    fn push_membership(&mut self, group: IpAddr, join: bool) {
        let mut b = self.buffer();
        match group {
            IpAddr::V4(g) => {
                let Some((src, _)) = self.ipv4 else { return };
                membership::igmp(&mut b, self.mac, src, g, join);
            }
            IpAddr::V6(g) => membership::mld(&mut b, self.mac, self.ipv6[0], g, join),
        }
        self.ctl.push(Ctl { frame: b, roce: false });
    }

    /// What the link is (also returned by [`super::open`]).
    pub(crate) fn info(&self) -> &LinkInfo {
        &self.info
    }

    pub(crate) fn stats(&self) -> LinkStats {
        let mut s = self.stats;
        s.tx_dropped += self.neigh.dropped;
        s.neighbours_unresolved = self.neigh.unresolved;
        s.last_unresolved = self.neigh.unanswered().or(self.neigh.last_unresolved);
        s
    }

    /// The neighbour cache's next request timer (an unresolved address).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.neigh.next_timer()
    }

    /// A duplicate of the frame descriptor, to wait on from another thread.
    pub(crate) fn wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
        crate::sys::fd::dup(self.io.fd()).ok()
    }

    pub(crate) fn set_frame_sink(&mut self, sink: Option<FrameSink>) {
        self.sink = sink;
    }
}

/// Where the RoCE packet starts in a frame we built.
fn roce_offset(frame: &[u8]) -> usize {
    match EthernetFrame::new_unchecked(frame).ethertype() {
        EthernetProtocol::Ipv6 => ETH_HDR + IPV6_HDR + UDP_HDR,
        _ => ETH_HDR + IPV4_HDR + UDP_HDR,
    }
}

/// Errors of one frame, which drop it rather than fail the link.
fn drop_frame(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMSGSIZE | libc::ENETDOWN | libc::ENXIO | libc::ENOBUFS | libc::EAGAIN | libc::EINVAL | libc::EIO)
    )
}

/// The Link implementation of a newtype around an [`RawLink`], and its
/// `info()`.
macro_rules! raw_link_impl {
    ($t:ty) => {
        impl $t {
            /// What the link is (also returned by [`$crate::link::open`]).
            pub fn info(&self) -> &$crate::link::LinkInfo {
                self.0.info()
            }
        }

        impl $crate::link::Link for $t {
            fn send(&mut self, batch: &[$crate::link::TxDatagram<'_>]) -> std::io::Result<usize> {
                self.0.send(batch)
            }
            fn recv(
                &mut self,
                timeout: std::time::Duration,
                batch: &mut $crate::link::RxBatch,
            ) -> std::io::Result<usize> {
                self.0.recv(timeout, batch)
            }
            fn stats(&self) -> $crate::link::LinkStats {
                self.0.stats()
            }
            fn set_frame_sink(&mut self, sink: Option<$crate::link::FrameSink>) {
                self.0.set_frame_sink(sink)
            }
            fn wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
                self.0.wait_fd()
            }
            fn next_due(&self) -> Option<std::time::Instant> {
                self.0.next_due()
            }
            fn join_multicast(&mut self, group: std::net::IpAddr) -> std::io::Result<()> {
                self.0.join_multicast(group)
            }
            fn leave_multicast(&mut self, group: std::net::IpAddr) -> std::io::Result<()> {
                self.0.leave_multicast(group)
            }
        }
    };
}
pub(crate) use raw_link_impl;

/// Sockets on `IP:4791` for each of `addrs` the kernel holds, so that it drops
/// RoCE packets to them quietly instead of answering ICMP port-unreachable.
pub(crate) fn port_guards(addrs: &[IpAddr], ifindex: u32) -> Result<Vec<UdpSocket>, super::LinkError> {
    use crate::sys::udp::UdpOptions;
    use std::net::{SocketAddr, SocketAddrV6};
    let mut out = Vec::new();
    for ip in addrs {
        let addr = match ip {
            IpAddr::V6(a) if a.is_unicast_link_local() => SocketAddr::V6(SocketAddrV6::new(*a, 4791, 0, ifindex)),
            _ => SocketAddr::new(*ip, 4791),
        };
        let opts = UdpOptions { no_check: false, buffer: 4096, gro: false, freebind: true };
        let s = UdpSocket::bind(addr, opts).map_err(|e| match e.raw_os_error() {
            Some(libc::EADDRINUSE) => super::LinkError::AddressInUse(addr),
            _ => super::LinkError::os(format!("binding the port guard {addr}"), e, "CAP_NET_BIND_SERVICE"),
        })?;
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frame I/O that keeps what is sent and receives nothing.
    #[derive(Default)]
    struct Recorder {
        sent: Vec<Vec<u8>>,
    }

    impl FrameIo for Recorder {
        fn fd(&self) -> RawFd {
            -1
        }
        fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
            self.sent.extend(frames.iter().map(|f| f.to_vec()));
            Ok(frames.len())
        }
        fn recv(&mut self, _: &mut [u8], _: usize, _: &mut [RxMeta]) -> io::Result<usize> {
            Ok(0)
        }
    }

    const OURS: [u8; 6] = [0x02, 0, 0, 0, 0, 0x41];
    const PEER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x42];

    /// A link whose link-local address the kernel also holds (`kernel_owned`).
    fn link(kernel_owned: bool) -> (RawLink<Recorder>, Ipv6Addr) {
        let ll = Gid::link_local(OURS).to_ipv6();
        let cfg = RawLinkConfig {
            kind: "packet",
            name: "packet:test0".into(),
            ifname: "test0".into(),
            mac: OURS,
            ipv4: None,
            ipv6: vec![],
            kernel_owned: if kernel_owned { vec![IpAddr::V6(ll)] } else { vec![] },
            mtu: 1500,
            path_mtu: None,
            guards: vec![],
            rx_queue_packets: 0,
        };
        (RawLink::new(Recorder::default(), cfg), ll)
    }

    /// The advertisements `link` sends for `target` after a solicitation from `src`.
    fn adverts_after_solicit(link: &mut RawLink<Recorder>, src: Ipv6Addr, target: Ipv6Addr) -> usize {
        let mut frame = Vec::new();
        neighbour::neighbour_solicit(&mut frame, PEER, src, target);
        let mut batch = RxBatch::new();
        batch.area(frame.len()).copy_from_slice(&frame);
        batch.commit(frame.len());
        assert!(!link.on_frame(&mut batch, 0..frame.len(), Instant::now()));
        assert!(batch.is_empty());
        link.flush_ctl().unwrap();
        link.io.sent.iter().filter(|f| matches!(neighbour::parse_ndisc(f), Some(Ndisc::Advert { target: t, mac, .. }) if t == target && mac == OURS)).count()
    }

    #[test]
    fn a_solicitation_for_a_kernel_held_link_local_address_is_answered() {
        // The kernel does not answer while the address is tentative: the
        // peer would wait for the whole of duplicate address detection.
        let (mut l, ll) = link(true);
        let peer = Gid::link_local(PEER).to_ipv6();
        assert_eq!(adverts_after_solicit(&mut l, peer, ll), 1);
        assert_eq!(l.stats().nd_adverts_sent, 1);
    }

    #[test]
    fn duplicate_address_probes_are_left_to_the_kernel_that_holds_the_address() {
        let (mut l, ll) = link(true);
        assert_eq!(adverts_after_solicit(&mut l, Ipv6Addr::UNSPECIFIED, ll), 0);
        // An address only uroce holds is defended.
        let (mut l, ll) = link(false);
        assert_eq!(adverts_after_solicit(&mut l, Ipv6Addr::UNSPECIFIED, ll), 1);
    }

    #[test]
    fn solicitations_for_other_addresses_are_not_answered() {
        let (mut l, _) = link(false);
        let other = Gid::link_local(PEER).to_ipv6();
        assert_eq!(adverts_after_solicit(&mut l, other, other), 0);
    }
}
