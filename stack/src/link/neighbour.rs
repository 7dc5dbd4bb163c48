//! The neighbour cache of a raw link, and the ARP and IPv6 neighbour-discovery
//! frames that fill it and answer for the link's addresses (smoltcp's wire types).
//!
//! States, as the kernel's (simplified): an unknown address becomes
//! *incomplete* (frames wait, bounded, while requests go out, at most `solicit`
//! of them; then the frames are dropped); a reply makes it *reachable* for
//! `reachable`; then *stale*: still used, with a fresh request on use, and
//! forgotten after `probes` unanswered ones.
//!
//! Unlike the kernel's (a request every second), an incomplete address is asked
//! again after `first_retrans` (100 ms), then at doubling intervals up to
//! `retrans`: an RC requester gives up after retry_cnt + 1 timeouts of
//! 4.096 us x 2^timeout (ibv_rc_pingpong and perftest: 8 x 67 ms, 0.54 s), and
//! its packets wait here meanwhile, so a lost ARP reply must be asked for again
//! well within that. (The kernel's rxe resolves at modify_qp(RTR) instead,
//! before the transport's timers run.)

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, Icmpv6Packet, Icmpv6Repr,
    IpProtocol, Ipv6Packet, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

pub const BROADCAST: [u8; 6] = [0xff; 6];

/// Timers and bounds of the cache.
#[derive(Debug, Clone, Copy)]
pub struct NeighbourConfig {
    pub reachable: Duration,
    /// Between requests for a stale entry; the longest between requests for an
    /// incomplete one.
    pub retrans: Duration,
    /// Unanswered requests before a stale entry is forgotten.
    pub probes: u32,
    /// The first wait for a reply to an incomplete entry's request; it doubles
    /// with each request, up to `retrans`.
    pub first_retrans: Duration,
    /// Requests for an incomplete entry before its frames are dropped.
    pub solicit: u32,
    /// Frames waiting per unresolved neighbour (older ones are dropped).
    pub max_pending: usize,
    pub max_entries: usize,
}

impl Default for NeighbourConfig {
    fn default() -> Self {
        NeighbourConfig {
            reachable: Duration::from_secs(30),
            retrans: Duration::from_secs(1),
            probes: 3,
            // Requests at 0, 0.1, 0.3, 0.7, 1.5 and 2.5 s; given up at 3.5 s.
            first_retrans: Duration::from_millis(100),
            solicit: 6,
            max_pending: 256,
            max_entries: 4096,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Incomplete { probes: u32, next_probe: Instant },
    Reachable { mac: [u8; 6], until: Instant },
    Stale { mac: [u8; 6], probes: u32, next_probe: Instant },
}

#[derive(Debug)]
struct Entry {
    state: State,
    pending: VecDeque<Vec<u8>>,
}

/// What to do with a frame for a neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Send to this MAC; `probe`: also send a request (the entry is stale).
    Known { mac: [u8; 6], probe: bool },
    /// Queue the frame; `probe`: send a request now (first use).
    Unknown { probe: bool },
}

impl NeighbourConfig {
    /// How long an incomplete entry waits after its `nth` request (from 1).
    fn incomplete_wait(&self, nth: u32) -> Duration {
        let doublings = nth.saturating_sub(1).min(16);
        (self.first_retrans * (1u32 << doublings)).min(self.retrans)
    }
}

/// IP address -> MAC, with frames waiting for resolution.
#[derive(Debug, Default)]
pub struct NeighbourCache {
    cfg: NeighbourConfig,
    map: HashMap<IpAddr, Entry>,
    /// Frames dropped because resolution failed or queues overflowed.
    pub dropped: u64,
    /// Addresses given up on: nobody answered any of the requests.
    pub unresolved: u64,
    /// The last address given up on, and how many requests went unanswered.
    pub last_unresolved: Option<(IpAddr, u32)>,
}

impl NeighbourCache {
    pub fn new(cfg: NeighbourConfig) -> NeighbourCache {
        NeighbourCache { cfg, map: HashMap::new(), dropped: 0, unresolved: 0, last_unresolved: None }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn state(&self, ip: IpAddr) -> Option<State> {
        self.map.get(&ip).map(|e| e.state)
    }

    /// The MAC of a resolved neighbour.
    pub fn mac(&self, ip: IpAddr) -> Option<[u8; 6]> {
        match self.state(ip)? {
            State::Reachable { mac, .. } | State::Stale { mac, .. } => Some(mac),
            State::Incomplete { .. } => None,
        }
    }

    /// Where a frame for `ip` goes now.
    pub fn resolve(&mut self, ip: IpAddr, now: Instant) -> Resolution {
        let cfg = self.cfg;
        if !self.map.contains_key(&ip) && self.map.len() >= cfg.max_entries {
            self.evict();
        }
        let e = self.map.entry(ip).or_insert_with(|| Entry {
            state: State::Incomplete { probes: 0, next_probe: now },
            pending: VecDeque::new(),
        });
        match &mut e.state {
            State::Reachable { mac, until } if *until > now => Resolution::Known { mac: *mac, probe: false },
            State::Reachable { mac, .. } => {
                let mac = *mac;
                e.state = State::Stale { mac, probes: 1, next_probe: now + cfg.retrans };
                Resolution::Known { mac, probe: true }
            }
            State::Stale { mac, probes, next_probe } => {
                let probe = *next_probe <= now;
                if probe {
                    *probes += 1;
                    *next_probe = now + cfg.retrans;
                }
                Resolution::Known { mac: *mac, probe }
            }
            State::Incomplete { probes, next_probe } => {
                let probe = *probes == 0;
                if probe {
                    *probes = 1;
                    *next_probe = now + cfg.incomplete_wait(1);
                }
                Resolution::Unknown { probe }
            }
        }
    }

    /// Queues a frame for an incomplete neighbour.
    pub fn queue(&mut self, ip: IpAddr, frame: Vec<u8>) {
        let max = self.cfg.max_pending;
        if let Some(e) = self.map.get_mut(&ip) {
            if e.pending.len() >= max {
                e.pending.pop_front();
                self.dropped += 1;
            }
            e.pending.push_back(frame);
        } else {
            self.dropped += 1;
        }
    }

    /// Records `ip` at `mac`; `create` adds an entry that did not exist.
    /// Returns the frames that were waiting for it.
    pub fn learn(&mut self, ip: IpAddr, mac: [u8; 6], now: Instant, create: bool) -> Option<VecDeque<Vec<u8>>> {
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return None;
        }
        if !self.map.contains_key(&ip) {
            if !create {
                return None;
            }
            if self.map.len() >= self.cfg.max_entries {
                self.evict();
            }
        }
        let until = now + self.cfg.reachable;
        let e = self
            .map
            .entry(ip)
            .or_insert_with(|| Entry { state: State::Reachable { mac, until }, pending: VecDeque::new() });
        e.state = State::Reachable { mac, until };
        (!e.pending.is_empty()).then(|| std::mem::take(&mut e.pending))
    }

    /// Runs the timers: appends to `probe` the addresses to send a request
    /// for, forgets failed ones (dropping their frames).
    pub fn poll(&mut self, now: Instant, probe: &mut Vec<IpAddr>) {
        let cfg = self.cfg;
        let mut dropped = 0;
        let mut given_up = Vec::new();
        self.map.retain(|ip, e| match &mut e.state {
            State::Incomplete { probes, next_probe } if *next_probe <= now => {
                if *probes >= cfg.solicit {
                    dropped += e.pending.len() as u64;
                    given_up.push((*ip, *probes));
                    return false;
                }
                *probes += 1;
                *next_probe = now + cfg.incomplete_wait(*probes);
                probe.push(*ip);
                true
            }
            State::Stale { probes, next_probe, .. } if *next_probe <= now && *probes >= cfg.probes => {
                dropped += e.pending.len() as u64;
                false
            }
            _ => true,
        });
        self.dropped += dropped;
        self.unresolved += given_up.len() as u64;
        if let Some(last) = given_up.pop() {
            self.last_unresolved = Some(last);
        }
    }

    /// The address asked for longest without an answer so far, and how many
    /// requests went out for it.
    pub fn unanswered(&self) -> Option<(IpAddr, u32)> {
        self.map
            .iter()
            .filter_map(|(ip, e)| match e.state {
                State::Incomplete { probes, .. } if probes > 0 => Some((*ip, probes)),
                _ => None,
            })
            .max_by_key(|(_, probes)| *probes)
    }

    /// The earliest timer, if any entry is waiting.
    pub fn next_timer(&self) -> Option<Instant> {
        self.map
            .values()
            .filter_map(|e| match e.state {
                State::Incomplete { next_probe, .. } => Some(next_probe),
                _ => None,
            })
            .min()
    }

    fn evict(&mut self) {
        // Forget a stale or expired entry, else any without waiting frames.
        let victim = self
            .map
            .iter()
            .find(|(_, e)| matches!(e.state, State::Stale { .. }))
            .or_else(|| self.map.iter().find(|(_, e)| e.pending.is_empty()))
            .map(|(ip, _)| *ip);
        if let Some(ip) = victim {
            if let Some(e) = self.map.remove(&ip) {
                self.dropped += e.pending.len() as u64;
            }
        }
    }
}

/// `ff02::1:ffXX:XXXX` of `ip`.
pub fn solicited_node(ip: Ipv6Addr) -> Ipv6Addr {
    let o = ip.octets();
    Ipv6Addr::from([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]])
}

/// The Ethernet multicast address of an IPv6 multicast address.
pub fn multicast_mac(ip: Ipv6Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// An Ethernet header into `buf`, cleared, with room for `payload` bytes after it.
pub(crate) fn ethernet(buf: &mut Vec<u8>, dst: [u8; 6], src: [u8; 6], proto: EthernetProtocol, payload: usize) {
    buf.clear();
    buf.resize(14 + payload, 0);
    let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
    f.set_dst_addr(EthernetAddress(dst));
    f.set_src_addr(EthernetAddress(src));
    f.set_ethertype(proto);
}

/// An ARP request or reply frame into `buf`.
pub fn arp(buf: &mut Vec<u8>, op: ArpOperation, src: ([u8; 6], Ipv4Addr), dst: ([u8; 6], Ipv4Addr)) {
    let repr = ArpRepr::EthernetIpv4 {
        operation: op,
        source_hardware_addr: EthernetAddress(src.0),
        source_protocol_addr: src.1,
        target_hardware_addr: EthernetAddress(if op == ArpOperation::Request { [0; 6] } else { dst.0 }),
        target_protocol_addr: dst.1,
    };
    let eth_dst = if op == ArpOperation::Request { BROADCAST } else { dst.0 };
    ethernet(buf, eth_dst, src.0, EthernetProtocol::Arp, repr.buffer_len());
    repr.emit(&mut ArpPacket::new_unchecked(&mut buf[14..]));
    // Pad to the Ethernet minimum, as NICs do.
    buf.resize(60, 0);
}

/// An ARP packet in an Ethernet frame.
pub fn parse_arp(frame: &[u8]) -> Option<ArpRepr> {
    let f = EthernetFrame::new_checked(frame).ok()?;
    if f.ethertype() != EthernetProtocol::Arp {
        return None;
    }
    ArpRepr::parse(&ArpPacket::new_checked(f.payload()).ok()?).ok()
}

/// A neighbour-discovery message (hop limit 255) from `src` to `dst`.
pub fn ndisc(buf: &mut Vec<u8>, eth: ([u8; 6], [u8; 6]), src: Ipv6Addr, dst: Ipv6Addr, msg: NdiscRepr<'_>) {
    let icmp = Icmpv6Repr::Ndisc(msg);
    ipv6_frame(buf, eth, (src, dst), (IpProtocol::Icmpv6, 255), icmp.buffer_len());
    icmp.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(&mut buf[54..]), &ChecksumCapabilities::default());
}

/// Ethernet and IPv6 headers into `buf`, cleared, with room for `payload`
/// bytes after them (from byte 54): `eth` is (destination, source) MAC,
/// `ip` (source, destination), `next` the next header and hop limit.
pub(crate) fn ipv6_frame(
    buf: &mut Vec<u8>,
    eth: ([u8; 6], [u8; 6]),
    ip: (Ipv6Addr, Ipv6Addr),
    next: (IpProtocol, u8),
    payload: usize,
) {
    ethernet(buf, eth.0, eth.1, EthernetProtocol::Ipv6, 40 + payload);
    let mut h = Ipv6Packet::new_unchecked(&mut buf[14..]);
    h.set_version(6);
    h.set_payload_len(payload as u16);
    h.set_next_header(next.0);
    h.set_hop_limit(next.1);
    h.set_src_addr(ip.0);
    h.set_dst_addr(ip.1);
}

/// A neighbour solicitation for `target` from `(mac, src)`.
pub fn neighbour_solicit(buf: &mut Vec<u8>, mac: [u8; 6], src: Ipv6Addr, target: Ipv6Addr) {
    let dst = solicited_node(target);
    let msg = NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr: Some(RawHardwareAddress::from(EthernetAddress(mac))),
    };
    ndisc(buf, (multicast_mac(dst), mac), src, dst, msg);
}

/// A solicited neighbour advertisement for `ours` at `mac`, to `(to_mac, to)`.
pub fn neighbour_advert(buf: &mut Vec<u8>, mac: [u8; 6], ours: Ipv6Addr, to_mac: [u8; 6], to: Ipv6Addr) {
    let msg = NdiscRepr::NeighborAdvert {
        flags: NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE,
        target_addr: ours,
        lladdr: Some(RawHardwareAddress::from(EthernetAddress(mac))),
    };
    ndisc(buf, (to_mac, mac), ours, to, msg);
}

/// A neighbour-discovery message of interest, from an Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ndisc {
    Solicit { src: Ipv6Addr, src_mac: [u8; 6], target: Ipv6Addr },
    Advert { target: Ipv6Addr, mac: [u8; 6], solicited: bool },
}

pub fn parse_ndisc(frame: &[u8]) -> Option<Ndisc> {
    let f = EthernetFrame::new_checked(frame).ok()?;
    if f.ethertype() != EthernetProtocol::Ipv6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(f.payload()).ok()?;
    if ip.next_header() != IpProtocol::Icmpv6 || ip.hop_limit() != 255 {
        return None;
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
    let repr = Icmpv6Repr::parse(&src, &dst, &icmp, &ChecksumCapabilities::default()).ok()?;
    let mac_of = |l: Option<RawHardwareAddress>| l.and_then(|l| <[u8; 6]>::try_from(l.as_bytes()).ok());
    match repr {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, lladdr }) => {
            Some(Ndisc::Solicit { src, src_mac: mac_of(lladdr).unwrap_or(f.src_addr().0), target: target_addr })
        }
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr, lladdr }) => Some(Ndisc::Advert {
            target: target_addr,
            mac: mac_of(lladdr).unwrap_or(f.src_addr().0),
            solicited: flags.contains(NdiscNeighborFlags::SOLICITED),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    #[test]
    fn resolve_queue_learn_flush() {
        let t0 = Instant::now();
        let mut c = NeighbourCache::new(NeighbourConfig::default());
        let ip: IpAddr = "198.18.0.2".parse().unwrap();
        assert_eq!(c.resolve(ip, t0), Resolution::Unknown { probe: true });
        c.queue(ip, vec![1]);
        assert_eq!(c.resolve(ip, t0), Resolution::Unknown { probe: false });
        c.queue(ip, vec![2]);
        let flushed = c.learn(ip, B, t0, false).unwrap();
        assert_eq!(flushed, [vec![1], vec![2]]);
        assert_eq!(c.resolve(ip, t0), Resolution::Known { mac: B, probe: false });
        // Stale after `reachable`: still used, with a probe.
        let later = t0 + Duration::from_secs(31);
        assert_eq!(c.resolve(ip, later), Resolution::Known { mac: B, probe: true });
        assert_eq!(c.resolve(ip, later), Resolution::Known { mac: B, probe: false });
    }

    /// When each request for an unanswered address goes out (ms after first
    /// use), polling every 10 ms, and when its frames are dropped.
    fn request_times(c: &mut NeighbourCache, ip: IpAddr, t0: Instant) -> (Vec<u64>, Option<u64>) {
        let mut times = vec![];
        assert_eq!(c.resolve(ip, t0), Resolution::Unknown { probe: true });
        times.push(0);
        c.queue(ip, vec![0; 10]);
        for ms in (10..=10_000).step_by(10) {
            let mut probes = Vec::new();
            c.poll(t0 + Duration::from_millis(ms), &mut probes);
            times.extend(probes.iter().map(|_| ms));
            if c.is_empty() {
                return (times, Some(ms));
            }
        }
        (times, None)
    }

    #[test]
    fn unanswered_requests_give_up() {
        let t0 = Instant::now();
        let mut c = NeighbourCache::new(NeighbourConfig::default());
        let ip: IpAddr = "198.18.0.9".parse().unwrap();
        let (times, gave_up) = request_times(&mut c, ip, t0);
        assert_eq!(times, [0, 100, 300, 700, 1500, 2500], "6 requests: on use, then after 0.1, 0.2, 0.4, 0.8, 1 s");
        assert_eq!(gave_up, Some(3500));
        assert_eq!(c.dropped, 1);
        // Learning from unsolicited traffic does not create entries.
        assert!(c.learn(ip, A, t0, false).is_none());
        assert!(c.is_empty());
    }

    /// The kernel rxe's reply to our first ARP request was lost (the interop
    /// lab, netem loss 5% on the guest): an RC requester with timeout 14 and
    /// retry_cnt 7 (ibv_rc_pingpong) gives up 0.54 s after its first send, and
    /// its packets waited here with the next request due only after 1 s. The
    /// address must be asked for again, and learnt, well within that.
    #[test]
    fn a_lost_reply_is_asked_again_within_an_rc_retry_window() {
        let t0 = Instant::now();
        let mut c = NeighbourCache::new(NeighbourConfig::default());
        let ip: IpAddr = "198.18.0.11".parse().unwrap();
        let rc_gives_up = Duration::from_nanos(4096 * (1 << 14) * 8);
        assert_eq!(c.resolve(ip, t0), Resolution::Unknown { probe: true });
        c.queue(ip, vec![1]);
        // The reply to that request never comes. The transport retransmits
        // every 67 ms into the queue; the timers ask again.
        let mut asked = None;
        for ms in 1..rc_gives_up.as_millis() as u64 {
            let now = t0 + Duration::from_millis(ms);
            if ms % 67 == 0 {
                assert_eq!(c.resolve(ip, now), Resolution::Unknown { probe: false });
                c.queue(ip, vec![2]);
            }
            let mut probes = Vec::new();
            c.poll(now, &mut probes);
            if !probes.is_empty() {
                asked = Some(now);
                break;
            }
        }
        let asked = asked.expect("no second request before the RC requester gives up");
        assert!(asked - t0 <= Duration::from_millis(150), "second request only after {:?}", asked - t0);
        // This reply arrives: the frames waiting go out, in order.
        let flushed = c.learn(ip, B, asked, false).expect("the waiting frames");
        assert_eq!(flushed, [vec![1], vec![2]]);
        assert_eq!(c.dropped, 0);
    }

    #[test]
    fn arp_and_ndisc_round_trip() {
        let mut buf = Vec::new();
        let (ia, ib) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        arp(&mut buf, ArpOperation::Request, (A, ia), ([0; 6], ib));
        assert_eq!(&buf[..6], &BROADCAST);
        let ArpRepr::EthernetIpv4 { operation, target_protocol_addr, .. } = parse_arp(&buf).unwrap() else { panic!() };
        assert_eq!((operation, target_protocol_addr), (ArpOperation::Request, ib));

        let (la, lb): (Ipv6Addr, Ipv6Addr) = ("fe80::1".parse().unwrap(), "fd00::2".parse().unwrap());
        neighbour_solicit(&mut buf, A, la, lb);
        assert_eq!(&buf[..6], &[0x33, 0x33, 0xff, 0, 0, 2]);
        assert_eq!(parse_ndisc(&buf), Some(Ndisc::Solicit { src: la, src_mac: A, target: lb }));
        neighbour_advert(&mut buf, B, lb, A, la);
        assert_eq!(parse_ndisc(&buf), Some(Ndisc::Advert { target: lb, mac: B, solicited: true }));
    }
}
