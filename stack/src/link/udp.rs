//! The udp link: RoCEv2 over a kernel UDP socket bound to `IP:4791`. No
//! privileges; works on loopback (`127.0.0.1`, `127.0.0.2`, ...).
//!
//! ## What is signed is what is sent
//! The kernel writes the IP header, and the ICRC covers it. The socket sets
//! DF (`IP_PMTUDISC_DO`) and is unconnected, so Linux writes IP Identification 0
//! (`ip_select_ident_segs`: "DF and no connected destination" takes the zero
//! branch); TOS, TTL and the header checksum are masked by the ICRC, the UDP
//! checksum too. The source port is the bound port, 4791 (a process that
//! shares the address with another sends from a port of its own, see
//! [`super::share`]): a kernel socket cannot send from the per-QP source port
//! the engine asks for, so this link ignores [`TxDatagram::src_port`]
//! (receivers ignore the source port anyway; the ICRC covers the one sent).
//! `tests/udp_link.rs` captures the wire and compares it with the signed header.
//!
//! ## What is verified on receive
//! The kernel reports the source address and port and (IP_PKTINFO) the
//! destination, so every field the ICRC covers is known except the IPv4
//! Identification. The link checks the ICRC with Identification 0 (what uroce
//! and any unconnected-DF sender writes); if it does not match, it solves for the
//! Identification: CRC-32 is linear, so the 16 Identification bits change the
//! ICRC by one of 2^16 values of a 16-dimensional subspace, and a received ICRC
//! is accepted only if its difference lies there (then the Identification is
//! known too, for the capture). A peer counting Identifications (rxe) is so
//! accepted; a random corruption passes with probability 2^-16 rather than
//! 2^-32. Such packets are delivered as [`Integrity::IcrcButIpId`]; IPv6 has no
//! Identification, so IPv6 packets are fully checked ([`Integrity::Icrc`]).

use super::batch::RxSizer;
use super::gid::{Gid, GidTable};
use super::share::{owner_name, Forwarded, Owner, Share, SteerKey, Tenant};
use super::shm::ShmPeers;
use super::{icrc_to_send, DeviceSpec, LinkError};
use super::{wire_addr, Direction, FrameSink, Integrity, Link, LinkInfo, LinkStats, RxBatch, TxDatagram};
use crate::frame::{FrameRepr, IpFields, Ipv4Fields, Ipv6Fields, UDP_HDR};
use crate::pcap::LinkType;
use crate::sys::epoll::Epoll;
use crate::sys::iface::{self, Ipv6State};
use crate::sys::mmsg::{self, RxMeta, TxMsg, MAX_BATCH};
use crate::sys::packet::if_index;
use crate::sys::udp::{UdpOptions, UdpSocket};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::ops::Range;
use std::os::fd::RawFd;
use std::time::Duration;
use uroce_transport::engine::marked_authenticated;
use uroce_transport::engine::Mtu;
use uroce_transport::icrc;
use uroce_transport::wire::ip::{emit_headers, ipv4, MAX_HEADERS_LEN};
use uroce_transport::wire::{ICRC_LEN, ROCEV2_UDP_PORT};

mod sharing;

/// BTH + ICRC: the shortest RoCEv2 packet.
const MIN_ROCE: usize = 12 + ICRC_LEN;
/// Receive slot: the largest RoCE packet at path MTU 4096 with room to spare.
const SLOT: usize = 4096 + 256;
/// Receive slot with GRO: a whole coalesced datagram.
const GRO_SLOT: usize = 65536;
/// Empty socket receives after which the same-host path reads the socket
/// only every [`UDP_EVERY`]th receive.
const UDP_IDLE: u32 = 64;
const UDP_EVERY: u32 = 8;
/// Messages per receive call with GRO (each may hold many packets).
const GRO_BATCH: usize = 32;
/// Segments and bytes in one GSO send (the kernel allows 64 and 64 KiB).
const GSO_MAX_SEGMENTS: usize = 64;
const GSO_MAX_BYTES: usize = 65000;

/// The kernel offloads the udp link uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpOffload {
    /// Send runs of equal-sized datagrams to one peer as one GSO super-datagram
    /// (UDP_SEGMENT). It needs UDP checksums on (the ICRC masks them).
    pub gso: bool,
    /// Receive coalesced datagrams (UDP_GRO) and split them.
    pub gro: bool,
    /// Exchange datagrams with uroce processes on this host through shared
    /// memory ([`super::shm`]; on unless `UROCE_SHM=0`).
    pub shm: bool,
}

impl UdpOffload {
    /// What pays and is verified: GRO always; GSO on loopback, where the
    /// kernel segments in software with IP IDs 0, 1, 2, ... (`inet_gso_segment`)
    /// and a test checks every segment's ICRC. Off loopback a NIC may segment
    /// with IDs of its own, so GSO stays off there.
    pub fn auto(ip: IpAddr) -> UdpOffload {
        UdpOffload { gso: ip.is_loopback(), gro: true, shm: super::shm::enabled_by_env() }
    }

    pub const NONE: UdpOffload = UdpOffload { gso: false, gro: false, shm: false };
}

/// The kernel UDP socket link.
pub struct UdpLink {
    sock: UdpSocket,
    offload: UdpOffload,
    /// IPv4 UDP checksum 0 (SO_NO_CHECK), as rxe; off with GSO.
    no_check: bool,
    slot: usize,
    local: IpAddr,
    /// The interface of a link-local `local` (0 otherwise).
    scope_id: u32,
    info: LinkInfo,
    stats: LinkStats,
    /// Receive slots per system call.
    nslots: usize,
    /// How many of the `nslots` the next receive asks for.
    rx_sizer: RxSizer,
    metas: Vec<RxMeta>,
    sink: Option<FrameSink>,
    scratch: Vec<u8>,
    solver: IdentSolver,
    /// Multicast groups joined, each with the socket that receives them.
    groups: Vec<(IpAddr, UdpSocket)>,
    /// Readable while a group socket is, or a sharing process's connection
    /// (what another thread waits on).
    aux_wait: Epoll,
    /// The UDP port the link sends from: 4791, or a tenant's own.
    port: u16,
    /// Sharing the address with other processes (see [`super::share`]).
    share: Share,
    /// A tenant's wait descriptor: its socket, and the port's once it takes
    /// the port over.
    tenant_wait: Option<Epoll>,
    /// Receives since a tenant last looked whether its owner is still there.
    recvs_since_look: u32,
    /// What a tenant's old socket held when its owner left (the owner's
    /// last forwarded packets), handed over by the next receive.
    left_over: RxBatch,
    /// Socket receives in a row that found nothing, and receives since the
    /// socket was last read (the same-host path reads it less often).
    udp_idle: u32,
    udp_skipped: u32,
    /// The interface index multicast is joined and sent on (IPv6).
    ifindex: u32,
    /// The same-host path: an owner's, with `UdpOffload::shm`.
    shm: Option<ShmPeers>,
}

/// What the kernel charges a socket's receive buffer for one datagram of
/// `payload` bytes, about: the payload rounded up to its allocation, twice
/// over, plus the sk_buff. Measured: 1024 datagrams of 4 KiB in flight fit
/// in 8 MiB (SO_RCVBUF 4 MiB, doubled by the kernel) on loopback.
pub(crate) fn skb_truesize(payload: usize) -> usize {
    2 * payload + 1024
}

impl UdpLink {
    /// Opens `udp:IP` (a [`DeviceSpec::Udp`]) with [`UdpOffload::auto`].
    pub fn open(spec: &DeviceSpec) -> Result<UdpLink, LinkError> {
        let ip = match spec {
            DeviceSpec::Udp { ip, .. } => wire_addr(*ip),
            _ => return Err(LinkError::Spec { spec: spec.to_string(), why: "not a udp link".into() }),
        };
        UdpLink::open_with(spec, UdpOffload::auto(ip))
    }

    /// Opens `udp:IP` with the offloads given (those the kernel lacks are
    /// off). When another uroce process of this user holds `IP:4791`, the
    /// link shares the address with it (see [`super::share`]).
    pub fn open_with(spec: &DeviceSpec, offload: UdpOffload) -> Result<UdpLink, LinkError> {
        UdpLink::open_as(spec, offload, Sharing::Open)
    }

    /// Opens `udp:IP` only if `IP:4791` is free (what the default device,
    /// which looks for a free address, wants).
    pub fn open_unshared(spec: &DeviceSpec) -> Result<UdpLink, LinkError> {
        let ip = match spec {
            DeviceSpec::Udp { ip, .. } => wire_addr(*ip),
            _ => return Err(LinkError::Spec { spec: spec.to_string(), why: "not a udp link".into() }),
        };
        UdpLink::open_as(spec, UdpOffload::auto(ip), Sharing::Never)
    }

    fn open_as(spec: &DeviceSpec, offload: UdpOffload, sharing: Sharing) -> Result<UdpLink, LinkError> {
        let DeviceSpec::Udp { ip, scope, path_mtu, shm: spec_shm } = spec else {
            return Err(LinkError::Spec { spec: spec.to_string(), why: "not a udp link".into() });
        };
        let ip = wire_addr(*ip);
        let scope_id = match scope {
            Some(name) => if_index(name).ok_or_else(|| LinkError::NoSuchInterface(name.clone()))?,
            None => 0,
        };
        let aux_wait = Epoll::new().map_err(|e| LinkError::os("creating an epoll set", e, ""))?;
        let (sock, port, share) = bind_or_join(ip, (scope.as_deref(), scope_id), offload, sharing, &aux_wait)?;
        let tenant = matches!(share, Share::Tenant(_));
        let tenant_wait = match tenant {
            true => Some(epoll_of(sock.fd())?),
            false => None,
        };
        // The interface holding the address gives the MTU and the MAC.
        let ifname = scope.clone().or_else(|| iface::interface_of(ip));
        let mtu = ifname.as_deref().and_then(|n| iface::mtu(n).ok()).unwrap_or(1500);
        let mac = ifname.as_deref().and_then(|n| iface::mac(n).ok()).filter(|m| *m != [0; 6]);
        let (ipv4, ipv6) = match ip {
            IpAddr::V4(a) => (Some(a), vec![]),
            IpAddr::V6(a) => (None, vec![a]),
        };
        let gids = GidTable::new(link_local_gid(ip, mac), ipv4, &ipv6).sending_only_from(Gid::from_ip(ip));
        let path_mtu = path_mtu.or_else(|| Mtu::for_link_mtu(mtu)).unwrap_or(Mtu::Mtu256);
        // A tenant's socket takes the owner's forwarded packets one by one.
        let offload = UdpOffload {
            gso: offload.gso && sock.supports_gso(),
            gro: offload.gro && !tenant && sock.enable_gro(),
            shm: spec_shm.unwrap_or(offload.shm) && !tenant,
        };
        let shm = if offload.shm { ShmPeers::listen(ip, scope_id, &aux_wait) } else { None };
        let (slot, nslots) = if offload.gro { (GRO_SLOT, GRO_BATCH) } else { (SLOT, MAX_BATCH) };
        let rx_queue_packets = sock.receive_buffer() / skb_truesize(path_mtu.bytes() as usize);
        let ifindex = if scope_id != 0 { scope_id } else { ifname.as_deref().and_then(if_index).unwrap_or(0) };
        // Best effort: without it, multicast sends take the default route's interface.
        let _ = sock.set_multicast_source(ip, ifindex);
        let name = spec.to_string();
        let frame_type = LinkType::RawIp;
        let info =
            LinkInfo { kind: "udp", name, ifname, mac, ipv4, ipv6, mtu, path_mtu, gids, rx_queue_packets, frame_type };
        Ok(UdpLink {
            sock,
            offload,
            no_check: !offload.gso,
            slot,
            local: ip,
            scope_id,
            info,
            stats: LinkStats::default(),
            nslots,
            rx_sizer: RxSizer::new(nslots),
            metas: vec![RxMeta::default(); MAX_BATCH],
            sink: None,
            scratch: Vec::with_capacity(SLOT + 64),
            solver: IdentSolver::default(),
            groups: Vec::new(),
            aux_wait,
            port,
            share,
            tenant_wait,
            recvs_since_look: 0,
            left_over: RxBatch::new(),
            udp_idle: 0,
            udp_skipped: 0,
            ifindex,
            shm,
        })
    }

    /// Where a datagram to `peer` goes: a link-local peer is on this link's
    /// interface (a udp link on a link-local address).
    fn socket_addr(&self, peer: IpAddr) -> SocketAddr {
        match wire_addr(peer) {
            IpAddr::V6(v6) if v6.is_unicast_link_local() => {
                SocketAddr::V6(SocketAddrV6::new(v6, ROCEV2_UDP_PORT, 0, self.scope_id))
            }
            ip => SocketAddr::new(ip, ROCEV2_UDP_PORT),
        }
    }

    /// What the link is (also returned by [`super::open`]).
    pub fn info(&self) -> &LinkInfo {
        &self.info
    }

    /// The offloads in use.
    pub fn offload(&self) -> UdpOffload {
        self.offload
    }

    /// The IP/UDP headers of a datagram between `src` and `dst` as the kernel
    /// writes them (IP ID 0 for IPv4: DF on an unconnected socket).
    fn repr(src: IpAddr, dst: IpAddr, src_port: u16, ident: u16) -> Option<FrameRepr> {
        let ip = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => IpFields::V4(Ipv4Fields::new(s, d, ident)),
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                IpFields::V6(Ipv6Fields { src: s, dst: d, traffic_class: 0, flow_label: 0, hop_limit: 64 })
            }
            _ => return None,
        };
        Some(FrameRepr::new(None, ip, src_port))
    }

    /// Gives the frame (IP packet) of `repr` around `roce` to the sink, with
    /// the ICRC the link computed (sent) or checked (received): never a
    /// second ICRC pass.
    fn to_sink(sink: &mut FrameSink, scratch: &mut Vec<u8>, dir: Direction, repr: &FrameRepr, roce: &[u8], icrc: u32) {
        let n = repr.buffer_len(roce.len());
        scratch.clear();
        scratch.resize(n, 0);
        let at = repr.emit(scratch, roce.len());
        let end = at.end;
        scratch[at].copy_from_slice(roce);
        scratch[end - ICRC_LEN..end].copy_from_slice(&icrc.to_le_bytes());
        repr.seal_checksum(scratch);
        sink(dir, scratch);
    }

    /// Checks the RoCE packet at `at` of `batch` and keeps it there; `false`
    /// if dropped. A datagram `from_ring` (the same-host path) keeps its
    /// ICRC unchecked: [`Integrity::SameHost`].
    fn keep(&mut self, src: SocketAddr, local: IpAddr, batch: &mut RxBatch, at: Range<usize>, from_ring: bool) -> bool {
        let roce = batch.bytes(at.clone());
        let peer = wire_addr(src.ip());
        let (Some(mut repr), true) = (Self::repr(peer, local, src.port(), 0), roce.len() >= MIN_ROCE) else {
            self.stats.rx_malformed += 1;
            return false;
        };
        // An authenticated packet's MAC, checked by the engine, stands in
        // for its ICRC, which its sender left zero (a capture shows it with
        // IPv4 Identification 0: there is no ICRC to solve it from).
        let integrity = if marked_authenticated(roce) {
            Integrity::Mac
        } else if from_ring {
            Integrity::SameHost
        } else {
            match self.check_icrc((peer, src.port()), local, roce, &mut repr) {
                Some(i) => i,
                None => return false,
            }
        };
        if let Some(owner) = self.share.owner_with_tenants() {
            if let Some((port, token)) = owner.route(roce) {
                let hdr = Forwarded { peer, src_port: src.port(), local, integrity, token };
                self.forward(port, &hdr, batch.bytes(at));
                return false;
            }
        }
        if matches!(integrity, Integrity::IcrcButIpId { .. }) {
            self.stats.rx_icrc_partial += 1;
        }
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += roce.len() as u64;
        if let Some(sink) = self.sink.as_mut() {
            // The kernel hides the sender's UDP checksum: shown as zero over IPv4.
            let carried = icrc::carried(roce).unwrap_or(0);
            Self::to_sink(sink, &mut self.scratch, Direction::Rx, &repr, roce, carried);
        }
        batch.keep_at(peer, src.port(), local, at, integrity);
        true
    }

    /// Checks the ICRC of `roce` from `peer` to `local`: how far it could
    /// be checked (the IPv4 Identification, which the kernel hides, solved
    /// into `repr`), or `None`, counted, for a bad or malformed packet.
    fn check_icrc(
        &mut self,
        peer: (IpAddr, u16),
        local: IpAddr,
        roce: &[u8],
        repr: &mut FrameRepr,
    ) -> Option<Integrity> {
        let body = &roce[..roce.len() - ICRC_LEN];
        let carried = icrc::carried(roce).unwrap_or(0);
        let Some(c0) = icrc_between(peer, (local, ROCEV2_UDP_PORT), 0, roce) else {
            self.stats.rx_malformed += 1;
            return None;
        };
        let integrity = match repr.ip {
            IpFields::V6(_) if c0 == carried => Some(Integrity::Icrc),
            IpFields::V4(ref mut h) => self.solver.solve(body.len(), c0 ^ carried).map(|ident| {
                h.ident = ident;
                Integrity::IcrcButIpId { ident }
            }),
            IpFields::V6(_) => None,
        };
        if integrity.is_none() {
            self.stats.rx_icrc_bad += 1;
        }
        integrity
    }
}

/// The ICRC of `roce` (BTH .. ICRC) sent from `src` to `dst` with IPv4
/// Identification `ident`, over the IP and UDP headers the kernel writes;
/// `None` when the two addresses are of different families.
fn icrc_between(src: (IpAddr, u16), dst: (IpAddr, u16), ident: u16, roce: &[u8]) -> Option<u32> {
    let mut hdr = [0u8; MAX_HEADERS_LEN];
    let (iph, n) = emit_headers(src, dst, ident, roce.len(), &mut hdr)?;
    icrc::compute_parts(&hdr[..iph], &hdr[iph..n], &roce[..roce.len() - ICRC_LEN]).ok()
}

/// Errors of one datagram, which drop it rather than fail the link.
fn per_datagram(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EMSGSIZE
                | libc::ENETUNREACH
                | libc::EHOSTUNREACH
                | libc::EACCES
                | libc::EPERM
                | libc::ECONNREFUSED
                | libc::EINVAL
                | libc::EADDRNOTAVAIL
                | libc::EAFNOSUPPORT
                | libc::EAGAIN
                | libc::ENOBUFS
        )
    )
}

impl UdpLink {
    /// Groups `chunk` for GSO: runs of datagrams to one peer whose RoCE
    /// packets have one length (the last may be shorter), as the kernel
    /// segments them. Returns the group lengths in order.
    fn gso_groups(&self, chunk: &[TxDatagram<'_>], ok: &[bool], out: &mut [usize; MAX_BATCH]) -> usize {
        let datagram = |i: usize| (ok[i].then(|| wire_addr(chunk[i].peer)), chunk[i].roce.len());
        // Two pieces a datagram (its bytes, its ICRC): a whole batch fits.
        gso_runs(chunk.len(), self.offload.gso.then_some(mmsg::MAX_IOV / 2), datagram, out)
    }
}

/// Groups `n` datagrams for GSO: runs of one destination whose sizes are
/// one (the last may be shorter), within the kernel's limits and of at most
/// `max_len` (what one message's pieces may number). `datagram(i)` is the
/// `i`th one's destination (`None`: it goes alone) and size; without `gso`
/// each goes alone. Returns the group lengths in order.
fn gso_runs<D: PartialEq>(
    n: usize,
    gso: Option<usize>,
    datagram: impl Fn(usize) -> (Option<D>, usize),
    out: &mut [usize; MAX_BATCH],
) -> usize {
    let mut groups = 0;
    let mut i = 0;
    while i < n {
        let mut len = 1;
        if let (Some(max_len), (Some(to), size)) = (gso, datagram(i)) {
            let mut total = size;
            while i + len < n && len < GSO_MAX_SEGMENTS.min(max_len) {
                let (next_to, next_size) = datagram(i + len);
                if next_to.as_ref() != Some(&to) || next_size > size || total + next_size > GSO_MAX_BYTES {
                    break;
                }
                total += next_size;
                len += 1;
                if next_size < size {
                    break; // a shorter one ends the group
                }
            }
        }
        out[groups] = len;
        groups += 1;
        i += len;
    }
    groups
}

impl UdpLink {
    /// Puts `batch` on the wire (see [`Link::send`]): through the memory
    /// shared with a peer's process on this host where there is a channel to
    /// it, else by UDP, in order for each peer.
    fn send_out(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize> {
        if self.shm.is_none() {
            return self.send_udp(batch);
        }
        let (mut sent, mut udp_from) = (0, 0);
        for (i, d) in batch.iter().enumerate() {
            if self.send_same_host(d).is_some() {
                if udp_from < i {
                    sent += self.send_udp(&batch[udp_from..i])?;
                }
                udp_from = i + 1;
                sent += 1;
            }
        }
        if let Some(shm) = self.shm.as_mut() {
            shm.flush();
        }
        if udp_from < batch.len() {
            sent += self.send_udp(&batch[udp_from..])?;
        }
        Ok(sent)
    }

    /// Writes `d` into the ring to its peer's process if the peer is on
    /// this host with a channel up (`Some`); `None`: send it by UDP, as
    /// for a peer without a channel or a datagram UDP would refuse, and
    /// for a peer whose ring is full (counted in `tx_ring_full`): a burst
    /// the peer has not read yet (a thousand REQs at once) then waits in
    /// its socket's far larger buffer instead of being lost and retried
    /// after the CM's 4 s timeout. What was pushed before it is published
    /// first, and the peer reads its rings before its socket, so the order
    /// mostly holds; a datagram that overtakes is what a network may do.
    fn send_same_host(&mut self, d: &TxDatagram<'_>) -> Option<()> {
        let peer = wire_addr(d.peer);
        // A peer not on this host costs a lookup here, nothing more.
        let i = self.shm.as_mut()?.channel_to(peer)?;
        let mut repr = Self::repr(self.local, peer, self.port, 0)?;
        // What UDP would not carry, UDP refuses and counts.
        if !(MIN_ROCE..=SLOT).contains(&d.roce.len()) || repr.buffer_len(d.roce.len()) > self.info.mtu {
            return None;
        }
        let icrc = icrc_to_send(d.roce, || icrc_between((self.local, self.port), (peer, ROCEV2_UDP_PORT), 0, d.roce))?;
        let body = &d.roce[..d.roce.len() - ICRC_LEN];
        let shm = self.shm.as_mut()?;
        if !shm.push(i, self.port, &[body, &icrc.to_le_bytes()]) {
            shm.flush();
            self.stats.tx_ring_full += 1;
            return None;
        }
        self.stats.tx_packets += 1;
        self.stats.tx_same_host += 1;
        self.stats.tx_bytes += d.roce.len() as u64;
        if let Some(sink) = self.sink.as_mut() {
            if !self.no_check {
                repr.udp.checksum = crate::frame::UdpChecksum::Compute;
            }
            Self::to_sink(sink, &mut self.scratch, Direction::Tx, &repr, d.roce, icrc);
        }
        Some(())
    }

    /// Puts `batch` on the wire by UDP.
    fn send_udp(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize> {
        let mut sent = 0;
        for chunk in batch.chunks(MAX_BATCH) {
            // Which datagrams this link can carry at all.
            let mut ok = [false; MAX_BATCH];
            for (i, d) in chunk.iter().enumerate() {
                let peer = wire_addr(d.peer);
                ok[i] = peer.is_ipv4() == self.local.is_ipv4()
                    && (MIN_ROCE..=SLOT).contains(&d.roce.len())
                    && Self::repr(self.local, peer, ROCEV2_UDP_PORT, 0)
                        .is_some_and(|r| r.buffer_len(d.roce.len()) <= self.info.mtu);
            }
            let mut groups = [0usize; MAX_BATCH];
            let ngroups = self.gso_groups(chunk, &ok, &mut groups);
            // Sign segment k of a group with IP ID k (what the kernel writes
            // when it segments); the kernel gathers each datagram's body and
            // ICRC from where they are (no copy here).
            let mut icrcs = [[0u8; ICRC_LEN]; MAX_BATCH];
            let mut spans = [(0usize, 0usize); MAX_BATCH]; // (first datagram, count)
            let mut nmsg = 0;
            let mut first = 0;
            for &len in &groups[..ngroups] {
                let group = first..first + len;
                first += len;
                if !ok[group.start] {
                    self.stats.tx_dropped += 1;
                    continue;
                }
                for (k, d) in group.clone().zip(&chunk[group.clone()]) {
                    let ident = if len > 1 { (k - group.start) as u16 } else { 0 };
                    let ends = ((self.local, self.port), (wire_addr(d.peer), ROCEV2_UDP_PORT));
                    // The families match: `ok` checked.
                    let icrc = icrc_to_send(d.roce, || icrc_between(ends.0, ends.1, ident, d.roce));
                    icrcs[k] = icrc.unwrap_or(0).to_le_bytes();
                }
                spans[nmsg] = (group.start, len);
                nmsg += 1;
            }
            // Only the entries this chunk uses are written, in place (a
            // `collect` would move the inline arrays): a ping-pong sends
            // one or two datagrams, and filling whole arrays of pieces and
            // messages was a tenth of the link's work for them.
            let mut pieces = SmallVec::<[&[u8]; mmsg::MAX_IOV]>::new();
            for (d, icrc) in chunk.iter().zip(&icrcs) {
                pieces.push(&d.roce[..d.roce.len() - ICRC_LEN]);
                pieces.push(icrc);
            }
            let mut msgs = SmallVec::<[TxMsg; MAX_BATCH]>::new();
            for &(g, len) in &spans[..nmsg] {
                msgs.push(TxMsg {
                    addr: Some(self.socket_addr(chunk[g].peer)),
                    iov: &pieces[2 * g..2 * (g + len)],
                    gso_segment: if len > 1 { chunk[g].roce.len() as u16 } else { 0 },
                });
            }
            let mut at = 0;
            let mut result = Ok(());
            // Each round sends at least one message or drops one: bounded by nmsg.
            while at < nmsg {
                self.stats.tx_syscalls += 1;
                match mmsg::send_batch(self.sock.fd(), &msgs[at..nmsg]) {
                    Ok(k) => {
                        let mut moved = 0;
                        for &(g, len) in &spans[at..at + k] {
                            moved += len;
                            for (seg, d) in chunk[g..g + len].iter().enumerate() {
                                self.stats.tx_packets += 1;
                                self.stats.tx_bytes += d.roce.len() as u64;
                                if let Some(sink) = self.sink.as_mut() {
                                    let ident = if len > 1 { seg as u16 } else { 0 };
                                    let peer = wire_addr(d.peer);
                                    if let Some(mut repr) = Self::repr(self.local, peer, self.port, ident) {
                                        if !self.no_check {
                                            repr.udp.checksum = crate::frame::UdpChecksum::Compute;
                                        }
                                        let icrc = u32::from_le_bytes(icrcs[g + seg]);
                                        Self::to_sink(sink, &mut self.scratch, Direction::Tx, &repr, d.roce, icrc);
                                    }
                                }
                            }
                        }
                        self.stats.tx_max_batch = self.stats.tx_max_batch.max(moved as u64);
                        sent += moved;
                        if k == 0 {
                            self.stats.tx_dropped += spans[at].1 as u64;
                        }
                        at += k.max(1);
                    }
                    Err(e) if per_datagram(&e) => {
                        self.stats.tx_dropped += spans[at].1 as u64;
                        at += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            result?;
        }
        Ok(sent)
    }
}

impl Link for UdpLink {
    fn send(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize> {
        if let Share::Tenant(t) = &mut self.share {
            for d in batch {
                t.note_sent(d.roce);
            }
        }
        if self.share.owner_with_tenants().is_none() {
            return self.send_out(batch);
        }
        let mut sent = 0;
        for chunk in batch.chunks(MAX_BATCH) {
            sent += self.send_with_tenants(chunk)?;
        }
        Ok(sent)
    }

    fn recv(&mut self, timeout: Duration, batch: &mut RxBatch) -> io::Result<usize> {
        if !self.left_over.is_empty() {
            return Ok(self.hand_over_left_over(batch));
        }
        // Without a wait, recvmmsg (MSG_DONTWAIT) is the readiness check: one
        // system call where a poll and then a receive would take two.
        if !timeout.is_zero() && !self.wait_for_datagrams(timeout)? {
            return Ok(0);
        }
        let mut kept = self.recv_same_host(batch);
        if self.skip_socket(timeout) {
            return Ok(kept);
        }
        let (udp_kept, got) = self.recv_from(self.sock.fd(), batch, self.rx_sizer.want())?;
        self.udp_idle = if got == 0 { self.udp_idle.saturating_add(1) } else { 0 };
        kept += udp_kept;
        self.rx_sizer.saw(got);
        kept += self.serve_sharing(got, batch);
        // Multicast groups: one more system call a receive, only while there are any.
        if !self.groups.is_empty() && self.aux_wait.wait(Duration::ZERO)? {
            for i in 0..self.groups.len() {
                let fd = self.groups[i].1.fd();
                kept += self.recv_from(fd, batch, self.nslots)?.0;
            }
        }
        Ok(kept)
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }

    fn set_frame_sink(&mut self, sink: Option<FrameSink>) {
        self.sink = sink;
    }

    fn wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
        let fd = self.tenant_wait.as_ref().map_or(self.sock.fd(), Epoll::fd);
        crate::sys::fd::dup(fd).ok()
    }

    fn claim(&mut self, key: SteerKey) -> io::Result<()> {
        // The owner left: take the port over, or join who did, and again;
        // a few times, as the process joined may be leaving too (several
        // short programs on one address ending together).
        let mut result = self.claim_once(key);
        for _ in 0..Self::CLAIM_TAKEOVERS {
            match (&result, &self.share) {
                (Err(e), Share::Tenant(_)) if e.kind() != io::ErrorKind::AddrInUse => self.take_over(),
                _ => break,
            }
            result = self.claim_once(key);
        }
        result
    }

    fn descriptors(&self) -> Vec<RawFd> {
        let mut fds = vec![self.sock.fd(), self.aux_wait.fd()];
        fds.extend(self.tenant_wait.as_ref().map(Epoll::fd));
        fds.extend(self.groups.iter().map(|(_, s)| s.fd()));
        fds.extend(self.share.descriptors());
        fds.extend(self.shm.iter().flat_map(ShmPeers::descriptors));
        fds
    }

    fn release(&mut self, key: SteerKey) {
        match &mut self.share {
            Share::Alone => {}
            Share::Owner(o) => o.release(key),
            Share::Tenant(t) => t.release(key),
        }
    }

    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let group = wire_addr(group);
        if self.groups.iter().any(|(g, _)| *g == group) {
            return Ok(());
        }
        let sock = UdpSocket::bind_group(group, ROCEV2_UDP_PORT, self.local, self.ifindex)?;
        self.aux_wait.add(sock.fd())?;
        self.groups.push((group, sock));
        Ok(())
    }

    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let group = wire_addr(group);
        if let Some(i) = self.groups.iter().position(|(g, _)| *g == group) {
            let (_, sock) = self.groups.remove(i);
            self.aux_wait.remove(sock.fd());
        }
        Ok(())
    }

    fn aux_wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
        crate::sys::fd::dup(self.aux_wait.fd()).ok()
    }

    fn prepare_to_sleep(&mut self) -> bool {
        self.shm.as_mut().is_none_or(ShmPeers::prepare_to_sleep)
    }
}

impl UdpLink {
    /// Takes in what the same-host rings hold (at most a batch): how many
    /// datagrams were kept. They are parsed, captured and steered as the
    /// socket's are; their ICRC, which the sender computed, is trusted
    /// ([`Integrity::SameHost`]).
    fn recv_same_host(&mut self, batch: &mut RxBatch) -> usize {
        let mut kept = 0;
        for _ in 0..MAX_BATCH {
            let at = batch.next_offset();
            let Some(shm) = self.shm.as_mut() else { return 0 };
            let Some((peer, port, len)) = shm.pop(batch.area(SLOT)) else { break };
            batch.commit(len);
            if self.keep(SocketAddr::new(peer, port), self.local, batch, at..at + len, true) {
                self.stats.rx_same_host += 1;
                kept += 1;
            }
        }
        if let Some(shm) = self.shm.as_mut() {
            shm.received();
        }
        kept
    }

    /// Whether this receive leaves the socket unread: with the peers on the
    /// same-host path and nothing by UDP for [`UDP_IDLE`] receives, a
    /// polling thread reads the socket only every [`UDP_EVERY`]th time, so
    /// that the rings' datagrams do not each wait behind an empty
    /// `recvmmsg` (a UDP datagram then waits up to that many receives).
    fn skip_socket(&mut self, timeout: Duration) -> bool {
        let quiet = self.udp_idle >= UDP_IDLE && timeout.is_zero();
        if !quiet || self.same_host_peers() == 0 || self.udp_skipped + 1 >= UDP_EVERY {
            self.udp_skipped = 0;
            return false;
        }
        self.udp_skipped += 1;
        true
    }

    /// Channels to processes on this host that are up (tests).
    pub fn same_host_peers(&self) -> usize {
        self.shm.as_ref().map_or(0, ShmPeers::ready_peers)
    }

    /// Whether anything came within `timeout`: on the unicast socket, a
    /// group's, or (the same-host path) a ring or a control socket.
    fn wait_for_datagrams(&mut self, timeout: Duration) -> io::Result<bool> {
        let Some(shm) = self.shm.as_mut() else { return self.wait_readable(timeout) };
        if !shm.prepare_to_sleep() {
            return Ok(true);
        }
        let woken = mmsg::wait_readable_any(&[self.sock.fd(), self.aux_wait.fd()], timeout)?;
        if let Some(shm) = self.shm.as_mut() {
            shm.look();
        }
        Ok(woken)
    }

    /// Whether the unicast socket, or a group's, is readable within `timeout`.
    fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        match self.groups.is_empty() && !matches!(self.share, Share::Tenant(_)) {
            true => mmsg::wait_readable(self.sock.fd(), timeout),
            false => mmsg::wait_readable_any(&[self.sock.fd(), self.aux_wait.fd()], timeout),
        }
    }

    /// Receives up to `want` datagrams of `fd` into `batch`: (kept, received).
    fn recv_from(&mut self, fd: RawFd, batch: &mut RxBatch, want: usize) -> io::Result<(usize, usize)> {
        self.stats.rx_syscalls += 1;
        let slot = self.slot;
        let base = batch.next_offset();
        let got = mmsg::recv_batch(fd, batch.area(slot * self.nslots), slot, &mut self.metas[..want])?;
        batch.commit(got * slot);
        let mut kept = 0;
        let mut moved = 0;
        for i in 0..got {
            let m = self.metas[i];
            let (Some(src), false) = (m.src, m.truncated) else {
                self.stats.rx_malformed += 1;
                continue;
            };
            // A tenant's own socket takes what its owner forwards (GRO may
            // have joined several); its multicast groups' sockets, the
            // group's datagrams themselves.
            let tenant = fd == self.sock.fd() && matches!(self.share, Share::Tenant(_));
            let local = m.dst.unwrap_or(self.local);
            // GRO: one slot of equal segments (the last may be shorter).
            let start = base + i * slot;
            let seg = m.gro_segment.map(usize::from).filter(|s| *s > 0).unwrap_or(m.len.max(1));
            for at in (start..start + m.len).step_by(seg) {
                moved += 1;
                let segment = at..(at + seg).min(start + m.len);
                let taken = match tenant {
                    true => self.keep_forwarded(src, batch, segment),
                    false => self.keep(src, local, batch, segment, false),
                };
                kept += usize::from(taken);
            }
        }
        self.stats.rx_max_batch = self.stats.rx_max_batch.max(moved as u64);
        Ok((kept, got))
    }
}

impl Drop for UdpLink {
    /// An owner that closes hands its tenants what came for them and waits
    /// in its socket: they take the port over next, and would not see it.
    fn drop(&mut self) {
        if self.share.owner_with_tenants().is_none() {
            return;
        }
        let mut batch = RxBatch::new();
        // Bounded: what is queued now, a few receives of it.
        for _ in 0..16 {
            batch.clear();
            match self.recv_from(self.sock.fd(), &mut batch, self.nslots) {
                Ok((_, got)) if got > 0 => {}
                _ => break,
            }
        }
    }
}
/// Whether a link may share its address, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sharing {
    /// Only a free port will do (the default device).
    Never,
    /// A new link: a port held by no uroce owner of this user is an error
    /// (waited for only just after this process forked: the child's copy).
    Open,
    /// A tenant whose owner left: a port held with no owner's name yet
    /// is the old owner closing, or a tenant taking over, so wait.
    AfterOwnerLeft,
}

/// How long after a fork a port in use may still be the child's copy of
/// ours (a child runs its fork handler when it is first scheduled).
const FORK_COPIES_LINGER: Duration = Duration::from_secs(3);

/// The socket of a new link on `ip` (`scope`: the interface of a
/// link-local one, by name and index), the port it sends from, and its part
/// in sharing the address: `ip:4791` bound, or (as `sharing` allows) the
/// owner of it joined.
///
/// The owner's name comes first, then the port: whoever holds the name is
/// the address's owner, or is about to bind its port, and answers a joiner
/// either way. (Port first left a window: two programs started together,
/// one had the port and not yet its name, and the other took the port for
/// another program's and failed; 1 run in 20 of pyverbs' rdmacm module
/// under load.) A port held by someone without the name is another
/// program's, an error at once (as are a name and a port another user's
/// process holds), unless a tenant takes over from an owner that is
/// closing (its name went first): then it waits. An owner that is
/// closing (it holds the name, but its answer does not come) is waited out,
/// and so is a port held by this process's own child just forked, until
/// the child is scheduled and lets go of its copy of the socket (a program
/// that forks and then closes and opens its device again: 1 run in 300 of
/// `tests/c/fork.c` beside two busy loops found the port held).
/// Bounded: 50 tries 20 ms apart within 3 s.
fn bind_or_join(
    ip: IpAddr,
    scope: (Option<&str>, u32),
    offload: UdpOffload,
    sharing: Sharing,
    aux: &Epoll,
) -> Result<(UdpSocket, u16, Share), LinkError> {
    let name = owner_name(ip, scope.1);
    let in_use = || LinkError::AddressInUse(SocketAddr::new(ip, ROCEV2_UDP_PORT));
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let mut last = None;
    // The name, once taken, is kept while a closing owner's port lingers.
    let mut named = None;
    for attempt in 0..50 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        if std::time::Instant::now() > deadline {
            break;
        }
        named = named.or_else(|| Owner::listen(&name));
        let share = match named.take() {
            Some(owner) => Share::Owner(owner),
            None if sharing == Sharing::Never => return Err(in_use()),
            None => match join_owner(ip, scope.1, offload, aux) {
                Joined::Yes(sock, port, tenant) => return Ok((sock, port, tenant)),
                // Another user's process holds the name: the port, if free, unshared.
                Joined::Foreign => Share::Alone,
                // The name's owner closed its listener since: try again.
                Joined::NoOwner | Joined::OwnerClosing => {
                    last = Some(in_use());
                    continue;
                }
            },
        };
        match bind_when_ready(ip, scope.0, scope.1, offload) {
            Ok(sock) => return Ok((sock, ROCEV2_UDP_PORT, share)),
            Err(e @ LinkError::AddressInUse(_))
                if sharing == Sharing::AfterOwnerLeft || crate::sys::fork::forked_within(FORK_COPIES_LINGER) =>
            {
                last = Some(e);
                if let Share::Owner(owner) = share {
                    named = Some(owner);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(LinkError::Spec { spec: format!("udp:{ip}"), why: "the address's owner did not answer".into() }))
}

/// How joining the owner of an address went.
enum Joined {
    Yes(UdpSocket, u16, Share),
    /// Nobody listens under the owner's name (any more).
    NoOwner,
    /// Another user's process holds the name.
    Foreign,
    /// The owner took the connection but did not answer: it is closing.
    OwnerClosing,
}

/// Binds `ip` on a port the kernel picks and joins the owner of `ip:4791` as a tenant.
fn join_owner(ip: IpAddr, scope_id: u32, offload: UdpOffload, aux: &Epoll) -> Joined {
    let Ok(sock) = bind_port(ip, 0, scope_id, offload) else { return Joined::NoOwner };
    let Ok(port) = sock.local_port() else { return Joined::NoOwner };
    match Tenant::join(&owner_name(ip, scope_id), port) {
        Ok(tenant) if aux.add(tenant.fd()).is_ok() => Joined::Yes(sock, port, Share::Tenant(tenant)),
        Ok(_) => Joined::NoOwner,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Joined::Foreign,
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Joined::NoOwner,
        Err(_) => Joined::OwnerClosing,
    }
}

/// An epoll set holding `fd`.
fn epoll_of(fd: RawFd) -> Result<Epoll, LinkError> {
    let e = Epoll::new().and_then(|e| e.add(fd).map(|_| e));
    e.map_err(|e| LinkError::os("creating an epoll set", e, ""))
}

/// Recovers the IPv4 Identification of a packet from its ICRC.
///
/// With everything else fixed, the ICRC is an affine function of the 16
/// Identification bits: `icrc(id) = icrc(0) ^ L(id)` with `L` linear and
/// one-to-one (a CRC-32 detects every error burst of up to 32 bits). So
/// `icrc(0) ^ carried` must be `L(id)` for exactly one `id`, found by Gaussian
/// elimination over GF(2); any other difference means a corrupt packet. `L`
/// depends only on how many bytes follow the Identification, i.e. on the length,
/// so its reduced basis is cached per length.
#[derive(Default)]
pub(crate) struct IdentSolver {
    cache: HashMap<usize, Box<[(u32, u16); 32]>>,
}

/// Bytes of the ICRC input after the Identification field: the rest of the
/// IPv4 header (14), UDP (8), then BTH .. before the ICRC (`body`).
fn bytes_after_ident(body: usize) -> usize {
    ipv4::HEADER_LEN - ipv4::IDENT.end + UDP_HDR + body
}

impl IdentSolver {
    const MAX_CACHED: usize = 4096;

    /// The Identification that explains `diff` (= ICRC computed with
    /// Identification 0, xor the carried one) for a RoCE body of `body` bytes
    /// (BTH .. ICRC, exclusive), or `None` if none does.
    pub(crate) fn solve(&mut self, body: usize, diff: u32) -> Option<u16> {
        if diff == 0 {
            return Some(0);
        }
        if self.cache.len() >= Self::MAX_CACHED {
            self.cache.clear();
        }
        let basis = self.cache.entry(body).or_insert_with(|| Box::new(reduced_basis(bytes_after_ident(body))));
        let (mut d, mut id) = (diff, 0u16);
        for bit in (0..32).rev() {
            if d >> bit & 1 == 1 {
                let (v, m) = basis[bit];
                if v == 0 {
                    return None;
                }
                d ^= v;
                id ^= m;
            }
        }
        (d == 0).then_some(id)
    }
}

/// The CRC-32 difference made by Identification `id` followed by `after` bytes.
fn ident_effect(id: u16, after: usize) -> u32 {
    static ZEROS: [u8; 4096] = [0; 4096];
    let crc = |first: [u8; 2]| {
        let mut h = crc32fast::Hasher::new();
        h.update(&first);
        let mut left = after;
        while left > 0 {
            let n = left.min(ZEROS.len());
            h.update(&ZEROS[..n]);
            left -= n;
        }
        h.finalize()
    };
    crc(id.to_be_bytes()) ^ crc([0, 0])
}

/// `basis[b]`: a vector with top bit `b` and the Identification producing it.
fn reduced_basis(after: usize) -> [(u32, u16); 32] {
    let mut basis = [(0u32, 0u16); 32];
    for i in 0..16 {
        let (mut v, mut m) = (ident_effect(1 << i, after), 1u16 << i);
        for bit in (0..32).rev() {
            if v >> bit & 1 == 0 {
                continue;
            }
            if basis[bit].0 == 0 {
                basis[bit] = (v, m);
                break;
            }
            v ^= basis[bit].0;
            m ^= basis[bit].1;
        }
    }
    basis
}

/// How long an open waits for the kernel to finish duplicate address
/// detection on a tentative address (it takes 1-2.5 s after link up).
const DAD_WAIT: Duration = Duration::from_secs(4);

/// [`bind`], waiting (bounded) while the IPv6 `ip` is still tentative on its
/// interface (`scope`, for a link-local one). A bind refused while the
/// address was tentative is tried again even when the table, read a moment
/// later, already says ready: detection may have ended in between.
fn bind_when_ready(
    ip: IpAddr,
    scope: Option<&str>,
    scope_id: u32,
    offload: UdpOffload,
) -> Result<UdpSocket, LinkError> {
    let deadline = std::time::Instant::now() + DAD_WAIT;
    let mut tried_after_ready = false;
    // Bounded by count as well: 50 ms apart, and one more try once ready.
    for _ in 0..(DAD_WAIT.as_millis() / 50 + 2) {
        let r = bind(ip, scope_id, offload);
        let state = match (&r, ip) {
            (Err(LinkError::AddressNotAvailable(_)), IpAddr::V6(v6)) => {
                let ifname = scope.map(str::to_string).or_else(|| iface::interface_of(ip));
                ifname.map_or(Ipv6State::Absent, |n| iface::ipv6_state(v6, &n))
            }
            _ => Ipv6State::Absent,
        };
        match state {
            Ipv6State::Absent => return r,
            Ipv6State::Ready if tried_after_ready => return r,
            Ipv6State::Ready => tried_after_ready = true,
            Ipv6State::Tentative if std::time::Instant::now() >= deadline => break,
            Ipv6State::Tentative => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    Err(LinkError::Io {
        what: format!("binding [{ip}]:4791"),
        source: io::Error::other(format!(
            "the address is still tentative after {} s (duplicate address detection): is another host using it?",
            DAD_WAIT.as_secs()
        )),
    })
}

/// The socket on `ip:4791` (`scope_id`: the interface of a link-local `ip`).
fn bind(ip: IpAddr, scope_id: u32, offload: UdpOffload) -> Result<UdpSocket, LinkError> {
    bind_port(ip, ROCEV2_UDP_PORT, scope_id, offload)
}

/// The socket on `ip:port` (0: a port the kernel picks).
fn bind_port(ip: IpAddr, port: u16, scope_id: u32, offload: UdpOffload) -> Result<UdpSocket, LinkError> {
    let addr = match ip {
        IpAddr::V6(v6) => SocketAddr::V6(SocketAddrV6::new(v6, port, 0, scope_id)),
        v4 => SocketAddr::new(v4, port),
    };
    let opts = UdpOptions { no_check: !offload.gso, buffer: 4 << 20, gro: false, freebind: false };
    UdpSocket::bind(addr, opts).map_err(|e| match e.raw_os_error() {
        Some(libc::EADDRINUSE) => LinkError::AddressInUse(addr),
        Some(libc::EADDRNOTAVAIL) => LinkError::AddressNotAvailable(ip),
        _ => LinkError::os(format!("binding {addr}"), e, "CAP_NET_BIND_SERVICE"),
    })
}

/// GID 0 of a udp link: its own address when that is link-local; otherwise
/// the interface's link-local GID as rxe lists it (the EUI-64 of its MAC), or
/// for an interface with no MAC (loopback) a stand-in derived from the
/// address. Only the first can be sent from: the socket is bound to `ip`.
fn link_local_gid(ip: IpAddr, mac: Option<[u8; 6]>) -> Gid {
    match (ip, mac) {
        (IpAddr::V6(v6), _) if v6.is_unicast_link_local() => Gid::from_ip(ip),
        (_, Some(m)) => Gid::link_local(m),
        (IpAddr::V4(v4), None) => {
            let o = v4.octets();
            Gid::link_local([0x02, 0, o[0], o[1], o[2], o[3]])
        }
        (IpAddr::V6(v6), None) => {
            let o = v6.octets();
            Gid::link_local([0x02, 0, o[12], o[13], o[14], o[15]])
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::frame::parse_ip;
    use std::net::Ipv4Addr;

    fn packet(ident: u16, payload: usize) -> Vec<u8> {
        let ip = IpFields::V4(Ipv4Fields::new(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2), ident));
        let repr = FrameRepr::new(None, ip, 0xc001);
        let roce_len = 12 + payload + ICRC_LEN;
        let mut buf = vec![0u8; repr.buffer_len(roce_len)];
        let at = repr.emit(&mut buf, roce_len);
        for (i, b) in buf[at].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        buf[28] = 0x04; // RC SEND ONLY
        repr.seal(&mut buf).unwrap();
        buf
    }

    /// What the udp link knows on receive: everything but the Identification.
    fn diff_with_ident_zero(p: &[u8]) -> (usize, u32) {
        let mut z = p.to_vec();
        z[4] = 0;
        z[5] = 0;
        let body = p.len() - 28 - ICRC_LEN;
        (body, icrc::compute(&z).unwrap() ^ icrc::carried(p).unwrap())
    }

    #[test]
    fn recovers_every_kind_of_ident() {
        let mut s = IdentSolver::default();
        for (ident, payload) in [(0u16, 0usize), (1, 4), (0x8000, 64), (0x1234, 1024), (0xffff, 4096), (47, 256)] {
            let p = packet(ident, payload);
            assert_eq!(icrc::check(&p), Ok(true));
            let (body, diff) = diff_with_ident_zero(&p);
            assert_eq!(s.solve(body, diff), Some(ident), "ident {ident:#x}, payload {payload}");
        }
    }

    #[test]
    fn rejects_corruption() {
        let mut s = IdentSolver::default();
        let mut rejected = 0;
        for k in 0..64 {
            let mut p = packet(0x4321, 256);
            let at = 28 + 12 + (k * 13) % 256;
            p[at] ^= 1 << (k % 8);
            assert!(parse_ip(&p).is_ok());
            let (body, diff) = diff_with_ident_zero(&p);
            if s.solve(body, diff).is_none() {
                rejected += 1;
            }
        }
        // A corruption escapes with probability 2^-16; all 64 of these are caught.
        assert_eq!(rejected, 64);
    }
}
