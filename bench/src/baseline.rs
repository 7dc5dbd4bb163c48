//! Small built-in equivalents of iperf3 (a TCP stream) and sockperf
//! (a UDP ping-pong), for machines without them: the kernel's own path
//! between two addresses, as the baselines of the table.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

const CHUNK: usize = 128 * 1024;

/// Accepts one connection and reads it to the end; prints the receiver's
/// rate in Gbit/s (10^9 bits a second), as iperf3 reports its receiver.
pub fn tcp_server(addr: SocketAddr, wait: Duration) -> Result<f64, String> {
    let l = TcpListener::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + wait;
    let mut s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => return Err(format!("accept on {addr}: {e}")),
        }
    };
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; CHUNK];
    let mut bytes = 0u64;
    let mut first: Option<Instant> = None;
    loop {
        let n = s.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        first.get_or_insert_with(Instant::now);
        bytes += n as u64;
    }
    let secs = first.map(|f| f.elapsed().as_secs_f64()).unwrap_or(0.0);
    if secs <= 0.0 {
        return Err("nothing received".into());
    }
    Ok(bytes as f64 * 8.0 / secs / 1e9)
}

/// Answers each of `count` HTTP requests to `addr` (whatever the path) with
/// `bytes` (HTTP/1.0, then close): enough for busybox `wget` in the lab's
/// guests. Fails if `wait` passes with no connection.
pub fn serve_file(bytes: &[u8], addr: SocketAddr, count: usize, wait: Duration) -> Result<(), String> {
    let l = TcpListener::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    for _ in 0..count {
        let deadline = Instant::now() + wait;
        let mut s = loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(format!("accept on {addr}: {e}")),
            }
        };
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
        // The request: read up to the blank line (at most 16 KiB).
        let mut req = Vec::new();
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16384 {
            match s.read(&mut buf).map_err(|e| format!("read: {e}"))? {
                0 => break,
                n => req.extend_from_slice(&buf[..n]),
            }
        }
        let head = format!(
            "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            bytes.len()
        );
        s.write_all(head.as_bytes()).and_then(|_| s.write_all(bytes)).map_err(|e| format!("write: {e}"))?;
    }
    Ok(())
}

/// Writes 128 KiB chunks to `addr` for `time`.
pub fn tcp_client(addr: SocketAddr, time: Duration) -> Result<(), String> {
    let mut s = connect_retry(addr)?;
    let buf = vec![0x5au8; CHUNK];
    let start = Instant::now();
    while start.elapsed() < time {
        s.write_all(&buf).map_err(|e| format!("write: {e}"))?;
    }
    Ok(())
}

fn connect_retry(addr: SocketAddr) -> Result<TcpStream, String> {
    let mut last = String::new();
    // Up to 5 s for the server to listen.
    for _ in 0..500 {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => return Ok(s),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(format!("connect {addr}: {last}"))
}

/// Both ends of a TCP stream here, on `ip` (server on an ephemeral port).
pub fn tcp_loopback(ip: std::net::IpAddr, time: Duration) -> Result<f64, String> {
    let probe = TcpListener::bind((ip, 0)).map_err(|e| e.to_string())?;
    let addr = probe.local_addr().map_err(|e| e.to_string())?;
    drop(probe);
    let server = std::thread::spawn(move || tcp_server(addr, Duration::from_secs(10)));
    tcp_client(addr, time)?;
    server.join().map_err(|_| "the server thread panicked".to_string())?
}

/// How both ends of a UDP ping-pong wait for the next datagram: spinning on
/// a non-blocking socket (the baseline of uroce's polling modes, and
/// sockperf's `--nonblocked`), or asleep in `recv` (the baseline of its
/// blocking mode, and sockperf's default). On a virtual machine the two
/// differ severalfold: each sleeping end pays a thread wake-up per datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    Polling,
    Blocking,
}

/// Echoes datagrams back to their sender until `idle` passes with none.
pub fn udp_server(addr: SocketAddr, idle: Duration, waiting: Waiting) -> Result<u64, String> {
    let s = UdpSocket::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    echo(&s, idle, waiting)
}

fn echo(s: &UdpSocket, idle: Duration, waiting: Waiting) -> Result<u64, String> {
    s.set_read_timeout(Some(idle)).map_err(|e| e.to_string())?;
    s.set_nonblocking(waiting == Waiting::Polling).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 65536];
    let mut n = 0u64;
    let mut last = Instant::now();
    loop {
        match s.recv_from(&mut buf) {
            Ok((len, from)) => {
                s.send_to(&buf[..len], from).map_err(|e| e.to_string())?;
                n += 1;
                last = Instant::now();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && waiting == Waiting::Polling => {
                if last.elapsed() > idle {
                    return Ok(n);
                }
                std::hint::spin_loop();
            }
            // Blocking: the read timeout passed with nothing.
            Err(_) => return Ok(n),
        }
    }
}

/// A UDP ping-pong of `size`-byte datagrams with `addr`, waiting as
/// `waiting` says; returns the median half round trip in microseconds.
pub fn udp_client(addr: SocketAddr, size: usize, count: usize, warmup: usize, waiting: Waiting) -> Result<f64, String> {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("address");
    let s = UdpSocket::bind(local).map_err(|e| e.to_string())?;
    s.connect(addr).map_err(|e| e.to_string())?;
    s.set_nonblocking(waiting == Waiting::Polling).map_err(|e| e.to_string())?;
    // Blocking: wake up now and then to send again if a datagram was lost.
    s.set_read_timeout(Some(Duration::from_millis(200))).map_err(|e| e.to_string())?;
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; size.max(64)];
    let mut rtts = Vec::with_capacity(count);
    for i in 0..warmup + count {
        let t0 = Instant::now();
        let mut resend = t0;
        s.send(&msg).map_err(|e| format!("send: {e}"))?;
        loop {
            match s.recv(&mut buf) {
                Ok(_) => break,
                // Refused: the server is not up yet (an ICMP port unreachable came back).
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    // A lost datagram (or a server not up yet): send again; give up after 5 s.
                    if resend.elapsed() > Duration::from_millis(200) {
                        if t0.elapsed() > Duration::from_secs(5) {
                            return Err(format!("no answer from {addr}"));
                        }
                        resend = Instant::now();
                        let _ = s.send(&msg);
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(format!("recv: {e}")),
            }
        }
        if i >= warmup {
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    rtts.sort_by(f64::total_cmp);
    Ok(rtts[rtts.len() / 2] / 2.0)
}

/// Both ends of a UDP ping-pong here, on `ip`.
pub fn udp_loopback(ip: std::net::IpAddr, size: usize, count: usize, waiting: Waiting) -> Result<f64, String> {
    let sock = UdpSocket::bind((ip, 0)).map_err(|e| e.to_string())?;
    let addr = sock.local_addr().map_err(|e| e.to_string())?;
    let server = std::thread::spawn(move || echo(&sock, Duration::from_millis(500), waiting));
    let r = udp_client(addr, size, count, count / 10, waiting);
    let _ = server.join();
    r
}
