//! ICRC throughput on one core: `icrc::compute` (masking + CRC-32) over IPv4
//! RoCEv2 packets with 4 KiB of payload, as the links run it per packet.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uroce_stack::link::{Link, RxBatch, TxDatagram};
use uroce_transport::icrc;

/// An IPv4 RoCEv2 packet: 20 IP + 8 UDP + 12 BTH + `payload` + 4 ICRC.
pub fn packet(payload: usize) -> Vec<u8> {
    let mut ip = vec![0u8; 20 + 8 + 12 + payload + 4];
    ip[0] = 0x45;
    let total = ip.len() as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[9] = 17;
    ip[22..24].copy_from_slice(&4791u16.to_be_bytes());
    let udp_len = (ip.len() - 20) as u16;
    ip[24..26].copy_from_slice(&udp_len.to_be_bytes());
    for (i, b) in ip[28..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    ip
}

/// GB/s (10^9 bytes of IP packet a second) of `icrc::compute` for `time`.
pub fn icrc_gbps(payload: usize, time: Duration) -> f64 {
    let p = packet(payload);
    for _ in 0..1000 {
        black_box(icrc::compute(black_box(&p)).ok());
    }
    let start = Instant::now();
    let mut n = 0u64;
    // Bounded by the clock and by a count.
    while start.elapsed() < time && n < 100_000_000 {
        for _ in 0..256 {
            black_box(icrc::compute(black_box(&p)).ok());
        }
        n += 256;
    }
    (n as f64 * p.len() as f64) / start.elapsed().as_secs_f64() / 1e9
}

/// GB/s (10^9 bytes copied a second) of one core's memcpy in `chunk`-byte
/// copies from a `span`-byte source into a packet-sized buffer, as the
/// engine copies between a region and a packet (`span` small enough, the
/// source stays in cache, as a benchmark's buffer does).
pub fn memcpy_gbps(chunk: usize, span: usize, time: Duration) -> f64 {
    let chunk = chunk.max(1);
    let src: Vec<u8> = (0..span.max(chunk)).map(|i| (i * 31) as u8).collect();
    let mut dst = vec![0u8; chunk];
    let offsets: Vec<usize> = (0..src.len() / chunk).map(|i| i * chunk).collect();
    let mut copy_all = || {
        for &o in &offsets {
            dst.copy_from_slice(black_box(&src[o..o + chunk]));
            black_box(&mut dst);
        }
    };
    copy_all();
    let start = Instant::now();
    let mut n = 0u64;
    // Bounded by the clock and by a count.
    while start.elapsed() < time && n < 100_000_000 {
        copy_all();
        n += offsets.len() as u64;
    }
    (n as f64 * chunk as f64) / start.elapsed().as_secs_f64() / 1e9
}

/// Nanoseconds per call of what uroce's polling loop does most: read the
/// clock (`Instant::now`), and ask an empty non-blocking UDP socket for a
/// datagram (one `recvfrom` returning EAGAIN: a system call that finds
/// nothing). Measured for `time` each.
pub fn syscall_costs(time: Duration) -> Result<(f64, f64), String> {
    let per_call = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < time && n < 100_000_000 {
            for _ in 0..64 {
                f();
            }
            n += 64;
        }
        start.elapsed().as_nanos() as f64 / n as f64
    };
    let clock = per_call(&mut || {
        black_box(Instant::now());
    });
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    sock.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 64];
    let recv = per_call(&mut || {
        let _ = black_box(sock.recv(&mut buf));
    });
    Ok((clock, recv))
}

/// A counter on a cache line of its own.
#[repr(align(128))]
struct Line(AtomicU64);

/// Nanoseconds for a value one thread stores to be seen by a thread on
/// another core: two threads hand a counter back and forth through two
/// atomics on lines of their own, and this is half a round trip. Every
/// same-host datagram pays a few of these in sequence (the ring's index,
/// the slot, the index back), so it sets a floor under same-host latency
/// that differs from machine to machine. Bounded by `time` and by a count;
/// on one CPU each hand-off waits for a reschedule and the figure says so.
pub fn cache_line_handoff_ns(time: Duration) -> f64 {
    let (ping, pong) = (Arc::new(Line(AtomicU64::new(0))), Arc::new(Line(AtomicU64::new(0))));
    let stop = Arc::new(AtomicBool::new(false));
    let peer = {
        let (ping, pong, stop) = (ping.clone(), pong.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                let v = ping.0.load(Ordering::Acquire);
                if v != seen {
                    seen = v;
                    pong.0.store(v, Ordering::Release);
                }
            }
        })
    };
    let start = Instant::now();
    let mut n = 0u64;
    'run: while n < 1_000_000 && (!n.is_multiple_of(256) || start.elapsed() < time) {
        n += 1;
        ping.0.store(n, Ordering::Release);
        let mut spins = 0u64;
        while pong.0.load(Ordering::Acquire) != n {
            spins += 1;
            if spins.is_multiple_of(4096) && start.elapsed() > 2 * time {
                n -= 1;
                break 'run;
            }
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = peer.join();
    elapsed.as_nanos() as f64 / n.max(1) as f64 / 2.0
}

/// Nanoseconds for the udp link to carry, over loopback and in one thread,
/// what one half trip of a 2-byte write_lat carries: a 36-byte RDMA WRITE
/// packet alone (`with_ack` false: what a UDP ping-pong's one datagram
/// stands for), or the WRITE and the ACK of the peer's last one, which
/// leave in one `sendmmsg` (a GSO pair) as uroce sends them. Each
/// iteration sends, then receives on the other link until the datagrams
/// came: both system calls, the kernel's path between them and the ICRCs
/// on both sides. Uses two addresses of a
/// [`TestNet`](uroce_stack::testnet::TestNet) of its own and the
/// kernel's path only (no same-host rings). Bounded by `time` and a count.
pub fn udp_link_half_trip_ns(with_ack: bool, time: Duration) -> Result<f64, String> {
    use uroce_stack::link::udp::{UdpLink, UdpOffload};
    use uroce_stack::link::DeviceSpec;
    use uroce_stack::testnet::TestNet;

    let net = TestNet::new();
    let open = |host: u8| -> Result<UdpLink, String> {
        let spec: DeviceSpec = net.udp(host).parse().map_err(|e| format!("{e}"))?;
        let offload = UdpOffload { shm: false, ..UdpOffload::auto(std::net::IpAddr::V4(net.ip(host))) };
        UdpLink::open_with(&spec, offload).map_err(|e| e.to_string())
    };
    let (mut a, mut b) = (open(1)?, open(2)?);
    let peer = std::net::IpAddr::V4(net.ip(2));
    link_half_trip_ns(&mut a, &mut b, peer, with_ack, time)
}

/// What [`udp_link_half_trip_ns`] measures, for the packet link (AF_PACKET)
/// over a veth: `a` and `b` are each a network namespace and a
/// `packet:IFACE,ip=IP,...` spec in it, the veth's two ends. The links are
/// opened inside their namespaces and then driven from this thread; the
/// first datagrams wait for ARP, which the warm-up lets finish.
pub fn packet_link_half_trip_ns(
    a: (&str, &str),
    b: (&str, &str),
    with_ack: bool,
    time: Duration,
) -> Result<f64, String> {
    use uroce_stack::link::netns::NetnsGuard;
    use uroce_stack::link::packet::PacketLink;
    use uroce_stack::link::DeviceSpec;

    let open = |(ns, spec): (&str, &str)| -> Result<(PacketLink, Option<std::net::Ipv4Addr>), String> {
        let spec: DeviceSpec = spec.parse().map_err(|e| format!("{spec}: {e}"))?;
        let _inside = NetnsGuard::enter(ns).map_err(|e| format!("network namespace {ns}: {e}"))?;
        let ip = match &spec {
            DeviceSpec::Packet { ipv4, .. } => *ipv4,
            _ => None,
        };
        Ok((PacketLink::open(&spec).map_err(|e| e.to_string())?, ip))
    };
    let ((mut la, _), (mut lb, ip_b)) = (open(a)?, open(b)?);
    let peer = std::net::IpAddr::V4(ip_b.ok_or("the second spec needs an ip=IPv4")?);
    link_half_trip_ns(&mut la, &mut lb, peer, with_ack, time)
}

/// Sends from `a` to `peer` (`b`'s address) what a write_lat half trip
/// carries, and polls `b` until it has all of it, for `time` after a
/// warm-up; nanoseconds per half trip. During the warm-up `a` is polled
/// too while `b` waits, so that neighbour resolution (ARP on a packet
/// link) can finish; the measured half trips poll `b` alone.
fn link_half_trip_ns(
    a: &mut dyn Link,
    b: &mut dyn Link,
    peer: std::net::IpAddr,
    with_ack: bool,
    time: Duration,
) -> Result<f64, String> {
    use uroce_transport::wire::bth::OPCODE_BYTE;
    use uroce_transport::wire::opcode::Opcode;

    // BTH + RETH + 2 bytes + 2 of pad + ICRC; BTH + AETH + ICRC. The link
    // writes the ICRC; the receiving link checks it and nothing above it.
    let (mut write, mut ack) = ([0u8; 36], [0u8; 20]);
    write[OPCODE_BYTE] = u8::from(Opcode::RcWriteOnly);
    ack[OPCODE_BYTE] = u8::from(Opcode::RcAck);
    let grams =
        [TxDatagram { peer, src_port: 0xc000, roce: &write }, TxDatagram { peer, src_port: 0xc000, roce: &ack }];
    let grams = if with_ack { &grams[..] } else { &grams[..1] };
    let mut batch = RxBatch::new();
    let mut half_trip = |a: &mut dyn Link, b: &mut dyn Link, warm: bool| {
        a.send(grams).map_err(|e| format!("send: {e}"))?;
        let mut got = 0;
        for _ in 0..1_000_000 {
            batch.clear();
            got += b.recv(Duration::ZERO, &mut batch).map_err(|e| format!("recv: {e}"))?;
            if got >= grams.len() {
                return Ok(true);
            }
            if warm {
                batch.clear();
                a.recv(Duration::ZERO, &mut batch).map_err(|e| format!("recv: {e}"))?;
            }
        }
        Ok::<bool, String>(false)
    };
    // Warm-up: until a half trip arrives whole (the first may wait for
    // ARP, or be dropped while it is pending), at most 1000 tries.
    let mut warm = 0;
    while !half_trip(a, b, true)? {
        warm += 1;
        if warm >= 1000 {
            return Err(format!(
                "nothing of the first {warm} half trips arrived whole ({} datagrams each)",
                grams.len()
            ));
        }
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < time && n < 1_000_000 {
        if !half_trip(a, b, false)? {
            return Err(format!("the link lost a datagram ({} sent at once)", grams.len()));
        }
        n += 1;
    }
    Ok(start.elapsed().as_nanos() as f64 / n.max(1) as f64)
}
