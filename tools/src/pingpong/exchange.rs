//! The out-of-band exchange of ibv_rc_pingpong / ibv_ud_pingpong, byte for byte:
//! each side sends `LID:QPN:PSN:GID` as `"%04x:%06x:%06x:%s"` (the GID as 32
//! hex digits, its bytes in order) in a 52-byte NUL-terminated message; the
//! client sends first, the server answers after connecting its QP, and the
//! client closes with `"done"`.

use crate::loopback::{exchange_error, note_if_peer_gone};
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;
use uroce_verbs::Gid;

/// How long a read of the exchange waits before it lets the caller move its
/// engine (see [`client`]).
const DRIVE_TICK: Duration = Duration::from_millis(1);

/// `sizeof "0000:000000:000000:00000000000000000000000000000000"`.
pub const MSG_LEN: usize = 52;

/// What the two sides tell each other (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub gid: Gid,
}

impl Dest {
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let gid: String = self.gid.0.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn, self.psn);
        let mut msg = [0u8; MSG_LEN];
        msg[..text.len()].copy_from_slice(text.as_bytes());
        msg
    }

    pub fn decode(msg: &[u8]) -> Result<Dest, String> {
        let text = std::str::from_utf8(msg).map_err(|_| "the peer's address message is not text".to_string())?;
        let text = text.trim_end_matches('\0');
        let parts: Vec<&str> = text.split(':').collect();
        let bad = || format!("the peer sent {text:?}, not LID:QPN:PSN:GID: is it an ibv_*_pingpong (not perftest)?");
        if parts.len() != 4 {
            return Err(bad());
        }
        let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
        let gid = crate::common::hex_bytes(parts[3]).ok_or_else(bad)?;
        Ok(Dest { lid: hex(parts[0])? as u16, qpn: hex(parts[1])?, psn: hex(parts[2])?, gid: Gid(gid) })
    }

    /// The GID as `inet_ntop(AF_INET6)` prints it, as the C tools do.
    pub fn gid_text(&self) -> String {
        self.gid.to_ipv6().to_string()
    }
}

fn read_msg(s: &mut TcpStream) -> io::Result<[u8; MSG_LEN]> {
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg)?;
    Ok(msg)
}

/// Reads exactly `buf`, calling `drive` every [`DRIVE_TICK`] it waits.
fn read_exact_driving(s: &mut TcpStream, buf: &mut [u8], drive: &mut dyn FnMut()) -> io::Result<()> {
    s.set_read_timeout(Some(DRIVE_TICK))?;
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer")),
            Ok(n) => at += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => drive(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    s.set_read_timeout(None)
}

/// Client side: connect, send ours, read theirs, say "done". Also returns the
/// server's IP, for peers that send no GID.
///
/// `drive` moves the caller's engine while the server's answer is awaited:
/// the server connects its QP before it answers, and the kernel (rxe) resolves
/// our MAC at modify_qp(RTR), by ARP, giving up after 1 s ("Failed to modify QP
/// to RTR"). A link nobody drives meanwhile answers no ARP.
pub fn client(host: &str, port: u16, mine: &Dest, drive: &mut dyn FnMut()) -> Result<(Dest, IpAddr), String> {
    let cant = || format!("Couldn't connect to {host}:{port}: is the server running (start it first, with no HOST)?");
    let addrs = (host, port).to_socket_addrs().map_err(|e| format!("{host}: {e}"))?;
    let mut last = io::Error::from(io::ErrorKind::ConnectionRefused);
    let mut stream =
        addrs.into_iter().find_map(|a| TcpStream::connect(a).map_err(|e| last = e).ok()).ok_or_else(|| {
            note_if_peer_gone(&last);
            cant()
        })?;
    let peer_ip = stream.peer_addr().map_err(|e| e.to_string())?.ip();
    let mut exchange = |s: &mut TcpStream| -> io::Result<[u8; MSG_LEN]> {
        s.write_all(&mine.encode())?;
        let mut theirs = [0u8; MSG_LEN];
        read_exact_driving(s, &mut theirs, drive)?;
        s.write_all(b"done\0")?;
        Ok(theirs)
    };
    let theirs = exchange(&mut stream).map_err(|e| exchange_error("Couldn't read/write remote address", &e))?;
    Ok((Dest::decode(&theirs)?, peer_ip))
}

/// Server side: a listener bound before the client is told to connect.
pub struct Server {
    listener: TcpListener,
}

impl Server {
    pub fn bind(port: u16) -> Result<Server, String> {
        let listener = TcpListener::bind(("::", port))
            .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
            .map_err(|e| format!("Couldn't listen to port {port}: {e} (another pingpong server? use -p PORT)"))?;
        Ok(Server { listener })
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Accepts one client, reads its address, lets `connect` bring the QP up,
    /// then answers with ours and waits for "done".
    pub fn exchange(
        self,
        mine: &Dest,
        connect: impl FnOnce(&Dest, IpAddr) -> Result<(), String>,
    ) -> Result<(Dest, IpAddr), String> {
        let (mut s, peer) = self.listener.accept().map_err(|e| format!("accept() failed: {e}"))?;
        let theirs = read_msg(&mut s).map_err(|e| exchange_error("Couldn't read remote address", &e))?;
        let theirs = Dest::decode(&theirs)?;
        connect(&theirs, peer.ip())?;
        s.write_all(&mine.encode()).map_err(|e| exchange_error("Couldn't send local address", &e))?;
        // "done" (5 bytes); older tools send nothing more before closing.
        let mut done = [0u8; MSG_LEN];
        let _ = s.read(&mut done);
        Ok((theirs, peer.ip()))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn message_is_the_c_tools_format() {
        let d = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: Gid::from_ipv4([198, 18, 0, 11]) };
        let msg = d.encode();
        assert_eq!(&msg[..51], b"0000:000011:abcdef:00000000000000000000ffffc612000b");
        assert_eq!(msg[51], 0);
        assert_eq!(Dest::decode(&msg).unwrap(), d);
        assert_eq!(d.gid_text(), "::ffff:198.18.0.11");
        assert!(Dest::decode(b"0000:000011\0").unwrap_err().contains("LID:QPN:PSN:GID"));
    }
}
