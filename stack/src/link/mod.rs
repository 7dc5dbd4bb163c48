//! Links: how uroce's RoCEv2 datagrams reach a wire.
//!
//! The unit at the [`Link`] interface is a RoCEv2 datagram: the UDP payload
//! from the BTH to the ICRC, plus the peer's IP address and the UDP source port.
//! A link builds whatever lies under it (a kernel UDP socket's header, or
//! Ethernet/IPv4/IPv6/UDP on a raw link), **computes the ICRC on transmit**
//! (it is the one that knows the IP header: callers leave the 4 ICRC bytes as
//! zero) and **verifies it on receive** where it can, counting and dropping bad
//! packets.
//!
//! Links: [`udp::UdpLink`] (kernel UDP socket, unprivileged),
//! [`packet::PacketLink`] (AF_PACKET on an existing interface) and
//! [`tap::TapLink`] (a TAP device). Middleware wraps any link:
//! [`capture::Capture`] writes a pcap file, [`impair::Impair`] loses, duplicates,
//! reorders, corrupts and delays from a seed. [`spec::DeviceSpec`] parses the
//! `-d` device names; [`open`] opens the link one names and returns, once,
//! what it is ([`LinkInfo`]).

use crate::pcap::LinkType;
use core::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;
use uroce_transport::engine::Mtu;

mod batch;
pub mod capture;
mod error;
pub mod gid;
pub mod impair;
pub mod membership;
pub mod neighbour;
pub mod netns;
mod open;
pub mod packet;
mod raw;
pub mod share;
pub mod shm;
pub mod spec;
pub mod tap;
pub mod udp;

pub use batch::{RxBatch, MIN_RECEIVE_BATCH};
pub use capture::Capture;
pub use error::LinkError;
pub use gid::{Gid, GidTable};
pub use impair::{Impair, ImpairConfig};
pub use open::{open, open_default, OpenedLink};
pub use share::SteerKey;
pub use spec::DeviceSpec;

/// A RoCEv2 datagram to send.
#[derive(Debug, Clone, Copy)]
pub struct TxDatagram<'a> {
    /// The peer: IPv4, or IPv6 (an IPv4-mapped IPv6 address is sent as IPv4).
    pub peer: IpAddr,
    /// The UDP source port the engine chose for the QP (rxe's flow hash).
    pub src_port: u16,
    /// BTH .. ICRC; the last 4 bytes (the ICRC) are written by the link.
    pub roce: &'a [u8],
}

/// The ICRC a link puts on the packet `roce` it sends: `compute`'s, but
/// zero on a packet the authenticated mode sealed (its mark,
/// `uroce_transport::engine::AUTH_MARK`, set). That packet's MAC stands in
/// for the ICRC at both ends: no receiving link checks the ICRC of a
/// marked packet, the engine checks the MAC over the same bytes, and a
/// second pass over the packet on the sending side would buy nothing (it
/// cost about 9% of an authenticated write_bw; docs/SECURITY.md). Only
/// another uroce with the key reads a sealed packet: rxe and RNICs would
/// take its trailer for payload anyway.
pub(crate) fn icrc_to_send(roce: &[u8], compute: impl FnOnce() -> Option<u32>) -> Option<u32> {
    if uroce_transport::engine::marked_authenticated(roce) {
        Some(0)
    } else {
        compute()
    }
}

/// How far a received datagram's integrity was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integrity {
    /// The ICRC was checked over the exact packet as it came off the wire.
    Icrc,
    /// The ICRC was checked over every covered field but the IPv4
    /// Identification, which a kernel UDP socket hides: it matched exactly one
    /// Identification value, given here. A random corruption passes with
    /// probability 2^-16 instead of 2^-32.
    IcrcButIpId { ident: u16 },
    /// Not checked: the packet carries the authenticated mode's mark
    /// (`uroce_transport::engine::AUTH_MARK`), and its MAC, which the
    /// engine checks, stands in for the ICRC (which the sender leaves zero:
    /// `icrc_to_send`). The engine takes it only for a QP that holds a key.
    Mac,
    /// Not checked: the datagram came through the udp link's same-host
    /// rings, from one process's memory to another's, where no bit can
    /// flip (the kernel's loopback marks its packets' checksums
    /// unnecessary for the same reason). Its sender computed the ICRC and
    /// it is carried, so captures show it. Skipping the check took the
    /// receiver's second pass over each payload byte off the path: 4 KiB
    /// packets through the rings 1.3x as fast (docs/PERFORMANCE.md).
    SameHost,
    /// Not checked.
    Unchecked,
}

impl Integrity {
    /// Whether the ICRC the datagram carries is right for its bytes as
    /// they arrived: checked, or carried by a path that cannot corrupt it.
    /// Impairment drops what it corrupts in such a datagram, as a link
    /// checking the ICRC would.
    pub fn icrc_holds(self) -> bool {
        matches!(self, Integrity::Icrc | Integrity::IcrcButIpId { .. } | Integrity::SameHost)
    }
}

/// A received RoCEv2 datagram (bad ICRCs never reach the caller; see
/// [`Integrity`] for what was checked).
#[derive(Debug, Clone, Copy)]
pub struct RxDatagram<'a> {
    /// The sender's IP address (IPv4 for IPv4 packets).
    pub peer: IpAddr,
    /// The sender's UDP source port.
    pub src_port: u16,
    /// The address it was sent to.
    pub local: IpAddr,
    /// BTH .. ICRC.
    pub roce: &'a [u8],
    pub integrity: Integrity,
}

/// Which way a frame went, for capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Rx,
    Tx,
}

/// Receives every frame a link puts on or takes off its wire, exactly as
/// there (for a udp link: the IP packet the kernel sends or received), in the
/// format of [`LinkInfo::frame_type`].
pub type FrameSink = Box<dyn FnMut(Direction, &[u8]) + Send>;

/// Counters of one link. `*_max_batch` are the largest batches a single
/// system call moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_syscalls: u64,
    pub tx_max_batch: u64,
    /// Datagrams that could not be sent (no route, wrong family, too big,
    /// unresolved neighbour, full queue).
    pub tx_dropped: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_syscalls: u64,
    pub rx_max_batch: u64,
    /// Dropped: ICRC wrong.
    pub rx_icrc_bad: u64,
    /// Delivered without a full ICRC check (see [`Integrity`]).
    pub rx_icrc_partial: u64,
    /// Dropped: malformed RoCEv2 frames or truncated datagrams.
    pub rx_malformed: u64,
    /// Frames that were not RoCEv2 for us (other traffic, ARP, ND...).
    pub rx_other: u64,
    /// Received for another process that shares the address, and handed to it.
    pub rx_forwarded: u64,
    /// Of `tx_packets` and `rx_packets`: through the memory shared with a
    /// uroce process on this host (the udp link's same-host path).
    pub tx_same_host: u64,
    pub rx_same_host: u64,
    /// Datagrams to a same-host peer whose ring was full, sent by UDP
    /// instead (also in `tx_packets`).
    pub tx_ring_full: u64,
    pub arp_requests_sent: u64,
    pub arp_replies_sent: u64,
    pub nd_solicits_sent: u64,
    pub nd_adverts_sent: u64,
    /// Peers whose address no neighbour answered for (ARP or ND), given up on.
    pub neighbours_unresolved: u64,
    /// The address no neighbour answered for, with the number of requests
    /// that went unanswered: one still being asked for, else the last given
    /// up on. (An RC requester gives up before the link does.)
    pub last_unresolved: Option<(IpAddr, u32)>,
}

/// What a link is: its addresses, MTU and GID table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// `udp`, `packet` or `tap`.
    pub kind: &'static str,
    /// The device spec it was opened from, e.g. `udp:127.0.0.1`.
    pub name: String,
    /// The interface underneath, if any.
    pub ifname: Option<String>,
    pub mac: Option<[u8; 6]>,
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 addresses, link-local first.
    pub ipv6: Vec<Ipv6Addr>,
    /// The IP MTU of the link (bytes of IP packet).
    pub mtu: usize,
    /// The RoCE path MTU: the largest IB MTU that fits in `mtu`, or the override.
    pub path_mtu: Mtu,
    pub gids: GidTable,
    /// How many full-size packets (path MTU) the receive side queues before
    /// it drops, about; 0 when unknown. Senders keep less than this in flight.
    pub rx_queue_packets: usize,
    /// The pcap link type of the frames given to a [`FrameSink`].
    pub frame_type: LinkType,
}

/// A wire for RoCEv2 datagrams, moved in batches: what every link does. What
/// a link is (addresses, MTU, GIDs) is static and comes once, from [`open`].
pub trait Link: Send {
    /// Sends a batch. Every datagram is consumed: put on the wire, queued
    /// (a raw link waiting for its neighbour) or dropped and counted in
    /// [`LinkStats::tx_dropped`]. Returns how many went on the wire now.
    /// Errors are failures of the link itself, not of one datagram.
    fn send(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize>;

    /// Waits up to `timeout` for datagrams and adds what one receive brings
    /// to `batch` (checked: bad ones are counted and left out); returns how
    /// many it added. Also runs the link's timers (neighbour resolution), so
    /// call it regularly.
    fn recv(&mut self, timeout: Duration, batch: &mut RxBatch) -> io::Result<usize>;

    /// A descriptor that becomes readable when [`Link::recv`] has something to
    /// take: a duplicate, so another thread can wait on it without holding the
    /// link. `None` when the link has none: then wait inside `recv`.
    fn wait_fd(&self) -> Option<std::os::fd::OwnedFd>;

    fn stats(&self) -> LinkStats;

    /// Installs (or removes) the sink that sees every frame. Used by [`Capture`].
    fn set_frame_sink(&mut self, sink: Option<FrameSink>);

    /// When the link next needs `send` or `recv` called even if nothing arrives
    /// (datagrams an impairment holds back).
    fn next_due(&self) -> Option<std::time::Instant> {
        None
    }

    /// Receives the datagrams sent to IP multicast `group` from now on
    /// (joining it on the link's interface); again: nothing changes.
    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let _ = group;
        Err(io::Error::new(io::ErrorKind::Unsupported, "this link has no multicast"))
    }

    /// Stops receiving `group`'s datagrams.
    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let _ = group;
        Ok(())
    }

    /// A descriptor readable while the link has something to take that
    /// does not come on [`Link::wait_fd`]'s socket: datagrams of a joined
    /// multicast group, or (a udp link) word from the other processes that
    /// share its address. Its members change, the descriptor stays.
    fn aux_wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
        None
    }

    /// Packets for `key` (a QP made, a service listened on) belong to this
    /// process: on an address shared with other processes (a udp link),
    /// refused with `AddrInUse` when another one holds it. Elsewhere: yes.
    fn claim(&mut self, key: SteerKey) -> io::Result<()> {
        let _ = key;
        Ok(())
    }

    /// `key` is no longer this process's.
    fn release(&mut self, key: SteerKey) {
        let _ = key;
    }

    /// The thread that moves the link's packets is about to sleep on
    /// [`Link::wait_fd`] and [`Link::aux_wait_fd`]: whether it may (`false`:
    /// something already waits that would not wake it; take it in first).
    fn prepare_to_sleep(&mut self) -> bool {
        true
    }

    /// The descriptors the link holds that bind something to this process
    /// (a udp link's port): what a forked child lets go of, so that its
    /// copies do not keep them bound after the parent closes the link.
    fn descriptors(&self) -> Vec<std::os::fd::RawFd> {
        Vec::new()
    }
}

/// The [`Link`] methods a wrapper of another link (a capture, an
/// impairment) passes on unchanged to the link in its `inner` field.
macro_rules! pass_to_inner {
    () => {
        fn stats(&self) -> $crate::link::LinkStats {
            self.inner.stats()
        }
        fn wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
            self.inner.wait_fd()
        }
        fn set_frame_sink(&mut self, sink: Option<$crate::link::FrameSink>) {
            self.inner.set_frame_sink(sink)
        }
        fn join_multicast(&mut self, group: std::net::IpAddr) -> std::io::Result<()> {
            self.inner.join_multicast(group)
        }
        fn leave_multicast(&mut self, group: std::net::IpAddr) -> std::io::Result<()> {
            self.inner.leave_multicast(group)
        }
        fn aux_wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
            self.inner.aux_wait_fd()
        }
        fn claim(&mut self, key: $crate::link::SteerKey) -> std::io::Result<()> {
            self.inner.claim(key)
        }
        fn release(&mut self, key: $crate::link::SteerKey) {
            self.inner.release(key)
        }
        fn prepare_to_sleep(&mut self) -> bool {
            self.inner.prepare_to_sleep()
        }
        fn descriptors(&self) -> Vec<std::os::fd::RawFd> {
            self.inner.descriptors()
        }
    };
}
pub(crate) use pass_to_inner;

impl<L: Link + ?Sized> Link for Box<L> {
    fn send(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize> {
        (**self).send(batch)
    }
    fn recv(&mut self, timeout: Duration, batch: &mut RxBatch) -> io::Result<usize> {
        (**self).recv(timeout, batch)
    }
    fn wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
        (**self).wait_fd()
    }
    fn stats(&self) -> LinkStats {
        (**self).stats()
    }
    fn set_frame_sink(&mut self, sink: Option<FrameSink>) {
        (**self).set_frame_sink(sink)
    }
    fn next_due(&self) -> Option<std::time::Instant> {
        (**self).next_due()
    }
    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        (**self).join_multicast(group)
    }
    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        (**self).leave_multicast(group)
    }
    fn aux_wait_fd(&self) -> Option<std::os::fd::OwnedFd> {
        (**self).aux_wait_fd()
    }
    fn claim(&mut self, key: SteerKey) -> io::Result<()> {
        (**self).claim(key)
    }
    fn release(&mut self, key: SteerKey) {
        (**self).release(key)
    }
    fn prepare_to_sleep(&mut self) -> bool {
        (**self).prepare_to_sleep()
    }
    fn descriptors(&self) -> Vec<std::os::fd::RawFd> {
        (**self).descriptors()
    }
}

/// The peer as it goes on the wire: IPv4-mapped IPv6 addresses become IPv4.
/// That is the address of the peer's GID, so it is [`Gid::ip`]; callers that
/// hold a GID call that directly.
pub fn wire_addr(ip: IpAddr) -> IpAddr {
    Gid::from_ip(ip).ip()
}

impl fmt::Display for LinkInfo {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} (mtu {}, path mtu {})", self.name, self.mtu, self.path_mtu.bytes())
    }
}
