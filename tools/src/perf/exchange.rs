//! perftest's out-of-band exchange over TCP (`perftest_communication.c`,
//! version 4.5): the version string, page and cache-line sizes, the MTU, the
//! `pingpong_dest` of every QP as perftest's 108-byte text message, the BW
//! reports and the closing handshake. The client always writes first.

use super::cfmt::c_str;
use super::dest::Dest;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;
use uroce_verbs::Mtu;

/// The version perftest 4.5 (Debian 12: 4.5+0.17) announces.
pub const VERSION: &str = "6.06";
/// After the version's NUL, where perftest never looks: tells a uroce peer
/// that this end can also check the test parameters (see agree.rs).
const UROCE_MARK: &[u8] = b"uroce";
/// `MAX_VERSION`.
const VERSION_LEN: usize = 16;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// C's `atof` of a version string: the leading decimal number, else 0.
fn atof(s: &str) -> f64 {
    let n: String = s.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    n.parse().unwrap_or(0.0)
}

/// What the peer said about itself.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub version: f64,
    pub uroce: bool,
}

/// `struct bw_report_data`, the fields that travel.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BwReport {
    pub size: u64,
    pub iters: u64,
    pub bw_peak: f64,
    pub bw_avg: f64,
    pub msg_rate: f64,
}

/// What a read runs while it waits for the peer's bytes.
pub type Idle = Box<dyn FnMut() + Send>;

/// Rounds an end waiting on the TCP exchange runs between two reads of it.
const IDLES_PER_READ: usize = 16;

/// An exchange carried by messages instead of a byte stream: `-R`/`-z`'s
/// SENDs on an rdma_cm connection. `idle` runs while a call waits.
pub trait MessageWire: Send {
    /// Sends one message and waits until it is delivered.
    fn write(&mut self, data: &[u8], idle: &mut dyn FnMut()) -> Result<(), String>;
    /// The next message's first `n` bytes.
    fn read(&mut self, n: usize, idle: &mut dyn FnMut()) -> Result<Vec<u8>, String>;
    /// Whether the peer has gone.
    fn peer_closed(&self) -> bool;
    /// Tells the peer this end will send nothing more.
    fn finish_sending(&self);
}

/// What the exchange runs over.
enum Wire {
    Tcp(TcpStream),
    /// `-R`/`-z`: SENDs on an rdma_cm connection (rdma_cm/comm.rs).
    Cm(Box<dyn MessageWire>),
}

/// The connection of the exchange.
pub struct Comm {
    wire: Wire,
    client: bool,
    peer: String,
    idle: Option<Idle>,
}

/// Binds the server's TCP port (`ethernet_server_connect`, before `accept`).
pub fn listen(port: u16) -> Result<TcpListener, String> {
    TcpListener::bind(("0.0.0.0", port)).map_err(|e| match e.kind() {
        ErrorKind::AddrInUse => {
            format!("cannot listen on TCP port {port}: it is in use (a server already runs there): stop it or give -p")
        }
        _ => format!("cannot listen on TCP port {port}: {e}"),
    })
}

impl Comm {
    /// Waits for the client (`ethernet_server_connect`).
    pub fn accept(listener: TcpListener) -> Result<Comm, String> {
        let (stream, addr) = listener.accept().map_err(|e| format!("accept() failed: {e}"))?;
        Comm::new(stream, false, addr.to_string())
    }

    /// Connects to the server (`ethernet_client_connect`); perftest resolves IPv4 only.
    pub fn connect(host: &str, port: u16, test: &str) -> Result<Comm, String> {
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve the server name {host}: {e}"))?
            .collect();
        let v4: Vec<SocketAddr> = addrs.iter().copied().filter(SocketAddr::is_ipv4).collect();
        let mut last = None;
        for addr in if v4.is_empty() { &addrs } else { &v4 } {
            match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
                Ok(s) => return Comm::new(s, true, format!("{host}:{port}")),
                Err(e) => last = Some(e),
            }
        }
        let why = last.map_or("no address".to_string(), |e| e.to_string());
        Err(format!(
            "Couldn't connect to {host}:{port}: {why}: start the server first (uroce perf {test}, or ib_{test}, with no host) or check the host and -p"
        ))
    }

    fn new(stream: TcpStream, client: bool, peer: String) -> Result<Comm, String> {
        stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
        Ok(Comm { wire: Wire::Tcp(stream), client, peer, idle: None })
    }

    /// The exchange over an rdma_cm connection (`-R`, `-z`).
    pub fn over_messages(wire: Box<dyn MessageWire>, client: bool, peer: String) -> Comm {
        Comm { wire: Wire::Cm(wire), client, peer, idle: None }
    }

    fn write(&mut self, buf: &[u8], what: &str) -> Result<(), String> {
        let stream = match &mut self.wire {
            Wire::Tcp(s) => s,
            Wire::Cm(cm) => {
                let mut idle = self.idle.take();
                let r = cm.write(buf, &mut || idle.as_mut().map_or((), |f| f()));
                self.idle = idle;
                return r.map_err(|e| format!("the rdma_cm exchange with {} failed sending {what}: {e}", self.peer));
            }
        };
        stream.write_all(buf).map_err(|e| self.failed("sending", what, e))
    }

    /// Tells the peer this end will send nothing more (a TCP half-close).
    pub fn finish_sending(&mut self) {
        match &self.wire {
            Wire::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            Wire::Cm(cm) => cm.finish_sending(),
        }
    }

    /// Whether the peer has closed the connection (it ended, on an error:
    /// perftest's ends never close it during a test).
    pub fn peer_closed(&self) -> bool {
        let stream = match &self.wire {
            Wire::Tcp(s) => s,
            Wire::Cm(cm) => return cm.peer_closed(),
        };
        if stream.set_nonblocking(true).is_err() {
            return false;
        }
        let closed = match stream.peek(&mut [0u8]) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
        };
        let _ = stream.set_nonblocking(false);
        closed
    }

    /// From now on, waits for the peer run `idle` (which moves this end's
    /// packets when nothing else does).
    pub fn set_idle(&mut self, idle: Idle) {
        self.idle = Some(idle);
    }

    fn read(&mut self, n: usize, what: &str) -> Result<Vec<u8>, String> {
        if let Wire::Cm(cm) = &mut self.wire {
            let mut idle = self.idle.take();
            let r = cm.read(n, &mut || idle.as_mut().map_or((), |f| f()));
            self.idle = idle;
            return r.map_err(|e| format!("the rdma_cm exchange with {} failed reading {what}: {e}", self.peer));
        }
        let mut buf = vec![0u8; n];
        let read = match self.idle.take() {
            None => self.stream().and_then(|s| s.read_exact(&mut buf)),
            Some(mut idle) => {
                let r = self.read_idling(&mut buf, &mut idle);
                self.idle = Some(idle);
                r
            }
        };
        read.map_err(|e| self.failed("reading", what, e))?;
        Ok(buf)
    }

    /// The TCP stream (an rdma_cm exchange reads in `CmComm` instead).
    fn stream(&mut self) -> std::io::Result<&mut TcpStream> {
        match &mut self.wire {
            Wire::Tcp(s) => Ok(s),
            Wire::Cm(_) => Err(ErrorKind::Unsupported.into()),
        }
    }

    /// Reads `buf` whole, idling between looks at the socket: a server
    /// waiting for the client's report moves the test's packets meanwhile.
    fn read_idling(&mut self, buf: &mut [u8], idle: &mut Idle) -> std::io::Result<()> {
        self.stream()?.set_nonblocking(true)?;
        let mut filled = 0;
        let r = loop {
            if filled == buf.len() {
                break Ok(());
            }
            match self.stream()?.read(&mut buf[filled..]) {
                Ok(0) => break Err(ErrorKind::UnexpectedEof.into()),
                Ok(k) => filled += k,
                // Several rounds to a look: a `recv` after every round was a
                // system call per round on the responder of a stream.
                Err(e) if e.kind() == ErrorKind::WouldBlock => (0..IDLES_PER_READ).for_each(|_| idle()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.stream()?.set_nonblocking(false)?;
        r
    }

    fn failed(&self, doing: &str, what: &str, e: std::io::Error) -> String {
        let why = if crate::loopback::note_if_peer_gone(&e) {
            "the peer closed the connection (its output says why)".to_string()
        } else {
            e.to_string()
        };
        format!("the TCP exchange with {} failed {doing} {what}: {why}", self.peer)
    }

    /// `ctx_xchg_data`: the client writes then reads, the server the other way.
    pub fn xchg(&mut self, mine: &[u8], what: &str) -> Result<Vec<u8>, String> {
        if self.client {
            self.write(mine, what)?;
            self.read(mine.len(), what)
        } else {
            let theirs = self.read(mine.len(), what)?;
            self.write(mine, what)?;
            Ok(theirs)
        }
    }

    /// `ctx_hand_shake`: our `pingpong_dest` for theirs (in binary over rdma_cm).
    pub fn hand_shake(&mut self, my: &Dest) -> Result<Dest, String> {
        match self.wire {
            Wire::Cm(_) => Dest::decode_binary(&self.xchg(&my.encode_binary(), "the QP addresses")?),
            Wire::Tcp(_) => Dest::decode_text(&self.xchg(&my.encode_text(), "the QP addresses")?),
        }
    }

    /// `exchange_versions` and `check_version_compatibility`.
    pub fn exchange_versions(&mut self) -> Result<Peer, String> {
        let mut mine = [0u8; VERSION_LEN];
        mine[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
        mine[VERSION.len() + 1..][..UROCE_MARK.len()].copy_from_slice(UROCE_MARK);
        let theirs = self.xchg(&mine, "the perftest version")?;
        let text = c_str(&theirs);
        let version = atof(&text);
        if version < 5.70 {
            return Err(format!(
                "the peer announces perftest version {text:?}: Current implementation is not compatible with versions older than 5.70 (upgrade perftest there, or is another program on -p?)"
            ));
        }
        let after = &theirs[text.len().min(VERSION_LEN - 1) + 1..];
        Ok(Peer { version, uroce: after.starts_with(UROCE_MARK) })
    }

    /// `check_sys_data`: both ends use the larger page ("cycle buffer") and cache line.
    pub fn exchange_sys_data(&mut self, peer: &Peer, cycle_buffer: u64, cache_line: u64) -> Result<(u64, u64), String> {
        if peer.version < 5.32 {
            return Ok((cycle_buffer, cache_line));
        }
        let mut int = |v: u64, what| -> Result<u64, String> {
            let theirs = self.xchg(&(v as i32).to_be_bytes(), what)?;
            let n = i32::from_be_bytes([theirs[0], theirs[1], theirs[2], theirs[3]]);
            Ok(v.max(u64::try_from(n).unwrap_or(0)))
        };
        let cycle = int(cycle_buffer, "the page size")?;
        let line = int(cache_line, "the cache line size")?;
        Ok((cycle, line))
    }

    /// `check_mtu`: the MTU enum as "%d" text in 2 bytes; both use the smaller.
    pub fn exchange_mtu(&mut self, peer: &Peer, mine: Mtu) -> Result<Mtu, String> {
        if peer.version < 5.1 {
            return Ok(mine);
        }
        let len = if peer.version >= 5.31 { 2 } else { 4 };
        let mut cur = vec![0u8; len];
        let text = mine.to_enum().to_string();
        cur[..text.len().min(len - 1)].copy_from_slice(&text.as_bytes()[..text.len().min(len - 1)]);
        let theirs = atof(&c_str(&self.xchg(&cur, "the MTU")?)) as u32;
        let rem = u8::try_from(theirs).ok().and_then(Mtu::from_enum);
        Ok(match rem {
            Some(r) if r < mine => r,
            _ => mine,
        })
    }

    /// `xchg_bw_reports`: each field in network order, one exchange each.
    pub fn xchg_bw_reports(&mut self, mine: &BwReport, peer: &Peer) -> Result<BwReport, String> {
        let long = |v: u64| v.to_be_bytes().to_vec();
        let be64 = |b: Vec<u8>| u64::from_be_bytes(b[..8].try_into().unwrap_or([0; 8]));
        let size = be64(self.xchg(&long(mine.size), "the BW report")?);
        let iters = if peer.version >= 5.33 {
            be64(self.xchg(&long(mine.iters), "the BW report")?)
        } else {
            let b = self.xchg(&(mine.iters as u32).to_be_bytes(), "the BW report")?;
            u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let mut double = |v: f64| -> Result<f64, String> {
            Ok(f64::from_bits(be64(self.xchg(&v.to_bits().to_be_bytes(), "the BW report")?)))
        };
        let bw_peak = double(mine.bw_peak)?;
        let bw_avg = double(mine.bw_avg)?;
        let msg_rate = double(mine.msg_rate)?;
        Ok(BwReport { size, iters, bw_peak, bw_avg, msg_rate })
    }

    /// A fixed-size block both ends exchange (used only between two uroce ends).
    pub fn exchange_block(&mut self, text: &str, len: usize, what: &str) -> Result<String, String> {
        let mut mine = vec![0u8; len];
        let n = text.len().min(len - 1);
        mine[..n].copy_from_slice(&text.as_bytes()[..n]);
        Ok(c_str(&self.xchg(&mine, what)?))
    }

    /// `ctx_close_connection`: a last handshake, then "done" and its NUL.
    pub fn close(&mut self, my: &Dest) -> Result<(), String> {
        self.hand_shake(my)?;
        // The peer does not read it; it may have closed already. (Over rdma_cm, nothing.)
        if let Wire::Tcp(s) = &mut self.wire {
            let _ = s.write_all(b"done\0");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A QP's address, as the other end must receive it.
    fn dest() -> Dest {
        Dest { out_reads: 1, qpn: 0x11, psn: 0x6a9d8c, rkey: 0x1e8, vaddr: 0x7f8b_5c5f_4000, ..Dest::default() }
    }

    #[test]
    fn version_parsing_is_atof() {
        assert_eq!(atof("6.06"), 6.06);
        assert_eq!(atof("5.70x"), 5.70);
        assert_eq!(atof(""), 0.0);
    }

    fn pair() -> (Comm, Comm) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || Comm::accept(l).unwrap());
        let c = Comm::connect("127.0.0.1", port, "write_bw").unwrap();
        (t.join().unwrap(), c)
    }

    #[test]
    fn two_ends_agree_on_everything() {
        let (mut s, mut c) = pair();
        let t = std::thread::spawn(move || {
            let peer = s.exchange_versions().unwrap();
            let sys = s.exchange_sys_data(&peer, 4096, 128).unwrap();
            let mtu = s.exchange_mtu(&peer, Mtu::Mtu1024).unwrap();
            let rep = s.xchg_bw_reports(&BwReport::default(), &peer).unwrap();
            (peer.uroce, sys, mtu, rep, s.hand_shake(&Dest::default()).unwrap())
        });
        let peer = c.exchange_versions().unwrap();
        assert!(peer.uroce && peer.version == 6.06);
        assert_eq!(c.exchange_sys_data(&peer, 65536, 64).unwrap(), (65536, 128));
        assert_eq!(c.exchange_mtu(&peer, Mtu::Mtu4096).unwrap(), Mtu::Mtu1024);
        let mine = BwReport { size: 65536, iters: 5000, bw_peak: 1050.1, bw_avg: 1049.66, msg_rate: 0.016794 };
        c.xchg_bw_reports(&mine, &peer).unwrap();
        assert_eq!(c.hand_shake(&dest()).unwrap(), Dest::default());
        let (uroce, sys, mtu, rep, d) = t.join().unwrap();
        assert!(uroce);
        assert_eq!((sys, mtu, rep, d), ((65536, 128), Mtu::Mtu1024, mine, dest()));
    }

    #[test]
    fn a_closed_peer_is_named() {
        let (s, mut c) = pair();
        drop(s);
        let e = c.exchange_versions().unwrap_err();
        assert!(e.contains("the TCP exchange with 127.0.0.1:") && e.contains("perftest version"), "{e}");
    }

    #[test]
    fn no_server_is_named() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let e = Comm::connect("127.0.0.1", port, "write_bw").err().unwrap();
        assert!(
            e.starts_with(&format!("Couldn't connect to 127.0.0.1:{port}: ")) && e.contains("start the server"),
            "{e}"
        );
    }
}
