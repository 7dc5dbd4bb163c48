//! What rping's peers exchange: the 16-byte advertisement of a buffer
//! (`struct rping_rdma_info`: address, rkey, size, big-endian) and the
//! ping text the client fills its buffer with.

/// The advertisement's length: what every SEND and RECV of rping carries.
pub const INFO_LEN: usize = 16;
/// The smallest ping (`RPING_MIN_BUFSIZE`: "2147483647" and "rdma-ping-%d: ", NULs included).
pub const MIN_SIZE: u32 = 26;
/// `RPING_BUFSIZE`: the largest ping is one less.
pub const BUFSIZE: u32 = 64 * 1024;

/// `struct rping_rdma_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaInfo {
    pub buf: u64,
    pub rkey: u32,
    pub size: u32,
}

impl RdmaInfo {
    pub fn to_bytes(self) -> [u8; INFO_LEN] {
        let mut b = [0u8; INFO_LEN];
        b[..8].copy_from_slice(&self.buf.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; INFO_LEN]) -> RdmaInfo {
        RdmaInfo {
            buf: u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
            rkey: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
            size: u32::from_be_bytes(b[12..].try_into().expect("4 bytes")),
        }
    }
}

/// The client's text for ping `n`: "rdma-ping-n: " then letters from
/// `start` ('A' + n, wrapping from 'z' to 'A'), NUL-terminated at `size`.
pub fn fill(buf: &mut [u8], n: u32, start: u8) {
    let head = format!("rdma-ping-{n}: ");
    let cc = head.len().min(buf.len());
    buf[..cc].copy_from_slice(&head.as_bytes()[..cc]);
    let mut c = start;
    for b in &mut buf[cc..] {
        *b = c;
        c = if c >= 122 { 65 } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
}

/// The letter the next ping starts from.
pub fn next_start(start: u8) -> u8 {
    if start >= 122 {
        65
    } else {
        start + 1
    }
}

/// The buffer as a C string: up to its first NUL.
pub fn c_str(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advertisement_is_big_endian() {
        let i = RdmaInfo { buf: 0x0102_0304_0506_0708, rkey: 0x0a0b_0c0d, size: 64 };
        let b = i.to_bytes();
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 64]);
        assert_eq!(RdmaInfo::from_bytes(&b), i);
    }

    #[test]
    fn the_pings_of_the_capture() {
        // The kernel rxe's rping -S 64, ping 0, READ RESPONSE payload.
        let mut b = [0u8; 64];
        fill(&mut b, 0, 65);
        assert_eq!(c_str(&b), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr");
        fill(&mut b, 1, next_start(65));
        assert!(c_str(&b).starts_with("rdma-ping-1: BCD"));
        // The letters wrap from 'z' back to 'A'.
        let mut long = [0u8; 80];
        fill(&mut long, 0, 120);
        assert_eq!(&long[13..17], b"xyzA");
        assert_eq!(next_start(122), 65);
    }
}
