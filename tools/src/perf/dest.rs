//! `struct pingpong_dest`, what each QP tells its peer, in perftest's two
//! encodings: the 108-byte text message of the TCP exchange
//! (`ethernet_write_keys`) and the binary struct its rdma_cm exchange sends
//! (`rdma_write_keys`).

use super::cfmt::{c_str, sprintf, Arg};

/// `KEY_MSG_SIZE_GID`: the formatted message and its NUL.
pub const KEY_MSG_SIZE_GID: usize = 108;
/// `KEY_PRINT_FMT_GID`, verbatim.
const KEY_PRINT_FMT_GID: &str = "%04x:%04x:%06x:%06x:%08x:%016llx:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%08x:";
/// `sizeof(struct pingpong_dest)` on x86-64: five ints, padding, the vaddr,
/// the GID, two ints.
pub const DEST_LEN: usize = 56;

/// `struct pingpong_dest`: what each QP tells its peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dest {
    pub lid: u16,
    pub out_reads: u32,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    pub vaddr: u64,
    pub gid: [u8; 16],
    pub srqn: u32,
}

impl Dest {
    /// `ethernet_write_keys`: the text and its NUL, 108 bytes.
    pub fn encode_text(&self) -> [u8; KEY_MSG_SIZE_GID] {
        let mut args = vec![
            Arg::U(self.lid.into()),
            Arg::U(self.out_reads.into()),
            Arg::U(self.qpn.into()),
            Arg::U(self.psn.into()),
            Arg::U(self.rkey.into()),
            Arg::U(self.vaddr),
        ];
        args.extend(self.gid.iter().map(|&b| Arg::U(b.into())));
        args.push(Arg::U(self.srqn.into()));
        let text = sprintf(KEY_PRINT_FMT_GID, &args);
        let mut msg = [0u8; KEY_MSG_SIZE_GID];
        let n = text.len().min(KEY_MSG_SIZE_GID - 1);
        msg[..n].copy_from_slice(&text.as_bytes()[..n]);
        msg
    }

    /// `ethernet_read_keys`: hex fields separated by ':'.
    pub fn decode_text(msg: &[u8]) -> Result<Dest, String> {
        let text = c_str(msg);
        let fields: Vec<&str> = text.split(':').collect();
        let bad = || {
            format!("the peer's address message {text:?} does not parse: is it perftest or uroce perf, running the same test?")
        };
        if fields.len() < 23 {
            return Err(bad());
        }
        let hex = |i: usize| u64::from_str_radix(fields[i].trim(), 16).map_err(|_| bad());
        let mut gid = [0u8; 16];
        for (k, b) in gid.iter_mut().enumerate() {
            *b = hex(6 + k)? as u8;
        }
        Ok(Dest {
            lid: hex(0)? as u16,
            out_reads: hex(1)? as u32,
            qpn: hex(2)? as u32,
            psn: hex(3)? as u32,
            rkey: hex(4)? as u32,
            vaddr: hex(5)?,
            gid,
            srqn: hex(22)? as u32,
        })
    }

    /// `rdma_write_keys`: the dest in network order, as perftest built with HAVE_ENDIAN sends it.
    pub fn encode_binary(&self) -> [u8; DEST_LEN] {
        let mut b = [0u8; DEST_LEN];
        for (i, v) in [u32::from(self.lid), self.out_reads, self.qpn, self.psn, self.rkey].iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&v.to_be_bytes());
        }
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b[32..48].copy_from_slice(&self.gid);
        b[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        b
    }

    /// `rdma_read_keys` (which takes neither srqn nor gid_index).
    pub fn decode_binary(b: &[u8]) -> Result<Dest, String> {
        if b.len() < 48 {
            return Err(format!("the peer's address message has {} bytes, not {DEST_LEN}", b.len()));
        }
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[32..48]);
        Ok(Dest {
            lid: be32(0) as u16,
            out_reads: be32(4),
            qpn: be32(8),
            psn: be32(12),
            rkey: be32(16),
            vaddr: u64::from_be_bytes(b[24..32].try_into().expect("8 bytes")),
            gid,
            srqn: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest() -> Dest {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 192, 168, 122, 10]);
        Dest { lid: 0, out_reads: 1, qpn: 0x11, psn: 0x6a9d8c, rkey: 0x1e8, vaddr: 0x7f8b_5c5f_4000, gid, srqn: 0 }
    }

    #[test]
    fn dest_message_is_perftests() {
        let msg = dest().encode_text();
        let expected = "0000:0001:000011:6a9d8c:000001e8:00007f8b5c5f4000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:7a:0a:00000000:";
        assert_eq!(expected.len(), KEY_MSG_SIZE_GID - 1);
        assert_eq!(&msg[..KEY_MSG_SIZE_GID - 1], expected.as_bytes());
        assert_eq!(msg[KEY_MSG_SIZE_GID - 1], 0);
        assert_eq!(Dest::decode_text(&msg).unwrap(), dest());
        assert!(Dest::decode_text(b"garbage\0").is_err());
    }

    #[test]
    fn the_binary_dest_is_perftests() {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 11]);
        let d = Dest {
            lid: 0,
            out_reads: 1,
            qpn: 0x2d,
            psn: 0x929a5b,
            rkey: 0x1234,
            vaddr: 0x5555_0000_1000,
            gid,
            srqn: 0,
        };
        let b = d.encode_binary();
        assert_eq!(
            &b[..24],
            &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x2d, 0, 0x92, 0x9a, 0x5b, 0, 0, 0x12, 0x34, 0, 0, 0, 0]
        );
        assert_eq!(&b[24..32], &[0, 0, 0x55, 0x55, 0, 0, 0x10, 0]);
        assert_eq!(Dest::decode_binary(&b).unwrap(), d);
        assert!(Dest::decode_binary(&b[..40]).is_err());
    }
}
