//! Classic pcap files (the libpcap format Wireshark and tcpdump read and write):
//! a reader that turns a truncated or corrupt file into an error naming the
//! record and byte offset, and a writer for captures of what uroce sends and
//! receives.

use crate::frame::{self, FrameError, ParsedFrame};
use std::fmt;
use std::io::{self, Read, Write};
use std::time::Duration;

const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;
const FILE_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;
/// Larger than any frame a link can carry; a record claiming more is corrupt.
pub const MAX_RECORD: u32 = 256 * 1024;

/// The link-layer type of a capture (LINKTYPE_* numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    Ethernet,
    /// Raw IPv4/IPv6 (LINKTYPE_RAW 101, LINKTYPE_IPV4 228, LINKTYPE_IPV6 229).
    RawIp,
    /// Linux cooked capture v1 (`tcpdump -i any`).
    LinuxSll,
    /// Linux cooked capture v2.
    LinuxSll2,
    Other(u32),
}

impl LinkType {
    pub fn from_u32(v: u32) -> LinkType {
        match v {
            1 => LinkType::Ethernet,
            101 | 228 | 229 => LinkType::RawIp,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            other => LinkType::Other(other),
        }
    }

    pub fn to_u32(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Other(v) => v,
        }
    }

    /// Splits one captured frame of this link type into its RoCEv2 parts.
    pub fn parse_frame(self, data: &[u8]) -> Result<ParsedFrame<'_>, FrameError> {
        match self {
            LinkType::Ethernet => frame::parse_ethernet(data),
            LinkType::RawIp => frame::parse_ip(data),
            LinkType::LinuxSll => cooked(data, 16, 14),
            LinkType::LinuxSll2 => cooked(data, 20, 0),
            LinkType::Other(_) => Err(FrameError::NotRoce),
        }
    }
}

/// A cooked capture: a fixed header with the EtherType at `proto_at`.
fn cooked(data: &[u8], header: usize, proto_at: usize) -> Result<ParsedFrame<'_>, FrameError> {
    let proto = data.get(proto_at..proto_at + 2).ok_or(FrameError::NotRoce)?;
    match u16::from_be_bytes([proto[0], proto[1]]) {
        0x0800 | 0x86dd => frame::parse_ip(data.get(header..).ok_or(FrameError::NotRoce)?),
        _ => Err(FrameError::NotRoce),
    }
}

/// Why a capture file cannot be read.
#[derive(Debug)]
pub enum PcapError {
    Io(io::Error),
    /// The file does not start with a pcap magic number.
    NotPcap {
        magic: u32,
    },
    /// The file is pcapng, which this reader does not handle.
    Pcapng,
    /// The file ends inside a header or record.
    Truncated {
        record: u64,
        offset: u64,
    },
    /// A record claims an impossible length.
    BadRecord {
        record: u64,
        offset: u64,
        len: u32,
    },
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            PcapError::Io(e) => write!(f, "{e}"),
            PcapError::NotPcap { magic } => write!(f, "not a pcap file (magic 0x{magic:08x})"),
            PcapError::Pcapng => {
                write!(
                    f,
                    "this is a pcapng file; convert it with `editcap -F pcap IN OUT` or capture with `tcpdump -w`"
                )
            }
            PcapError::Truncated { record, offset } => {
                write!(f, "file truncated in record {record} (byte offset {offset})")
            }
            PcapError::BadRecord { record, offset, len } => {
                write!(f, "record {record} at byte offset {offset} claims {len} bytes: the file is corrupt")
            }
        }
    }
}

impl std::error::Error for PcapError {}

impl From<io::Error> for PcapError {
    fn from(e: io::Error) -> Self {
        PcapError::Io(e)
    }
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Time since the Unix epoch.
    pub time: Duration,
    /// The frame's length on the wire (may exceed `data.len()` if snapped).
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Reads records from a pcap stream.
pub struct PcapReader<R> {
    input: R,
    swapped: bool,
    nanos: bool,
    link_type: LinkType,
    record: u64,
    offset: u64,
}

/// Fills `buf` or reports how much was read before the end.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> PcapReader<R> {
    pub fn new(mut input: R) -> Result<Self, PcapError> {
        let mut h = [0u8; FILE_HEADER];
        let got = read_full(&mut input, &mut h)?;
        if got < 4 {
            return Err(PcapError::Truncated { record: 0, offset: got as u64 });
        }
        let le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (swapped, nanos) = match (le, le.swap_bytes()) {
            (MAGIC_MICROS, _) => (false, false),
            (MAGIC_NANOS, _) => (false, true),
            (_, MAGIC_MICROS) => (true, false),
            (_, MAGIC_NANOS) => (true, true),
            (PCAPNG_MAGIC, _) => return Err(PcapError::Pcapng),
            _ => return Err(PcapError::NotPcap { magic: le }),
        };
        if got < FILE_HEADER {
            return Err(PcapError::Truncated { record: 0, offset: got as u64 });
        }
        let word = |i: usize| {
            let v = u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
            if swapped {
                v.swap_bytes()
            } else {
                v
            }
        };
        // The low 16 bits are the link type; the upper bits carry FCS flags.
        let link_type = LinkType::from_u32(word(20) & 0xffff);
        Ok(PcapReader { input, swapped, nanos, link_type, record: 0, offset: FILE_HEADER as u64 })
    }

    pub fn link_type(&self) -> LinkType {
        self.link_type
    }

    /// The next record, `None` at a clean end of file.
    pub fn next_record(&mut self) -> Result<Option<Record>, PcapError> {
        let mut h = [0u8; RECORD_HEADER];
        let got = read_full(&mut self.input, &mut h)?;
        let (record, offset) = (self.record + 1, self.offset);
        if got == 0 {
            return Ok(None);
        }
        if got < RECORD_HEADER {
            return Err(PcapError::Truncated { record, offset: offset + got as u64 });
        }
        let word = |i: usize| {
            let v = u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
            if self.swapped {
                v.swap_bytes()
            } else {
                v
            }
        };
        let (secs, frac, incl, orig) = (word(0), word(4), word(8), word(12));
        if incl > MAX_RECORD {
            return Err(PcapError::BadRecord { record, offset, len: incl });
        }
        let mut data = vec![0u8; incl as usize];
        let got = read_full(&mut self.input, &mut data)?;
        if got < data.len() {
            return Err(PcapError::Truncated { record, offset: offset + (RECORD_HEADER + got) as u64 });
        }
        let nanos = if self.nanos { frac } else { frac.saturating_mul(1000) };
        let time = Duration::new(u64::from(secs), nanos.min(999_999_999));
        self.record = record;
        self.offset += (RECORD_HEADER + data.len()) as u64;
        Ok(Some(Record { time, orig_len: orig, data }))
    }
}

/// Writes a pcap stream (microsecond timestamps, the most widely read variant).
pub struct PcapWriter<W: Write> {
    out: W,
    /// One record, header and data, handed to `out` in one write: a buffered
    /// `out` then only ever writes whole records to its file, so a process
    /// that ends mid-capture leaves a file that ends at a record boundary.
    record: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, link_type: LinkType) -> io::Result<Self> {
        let mut h = Vec::with_capacity(FILE_HEADER);
        h.extend_from_slice(&MAGIC_MICROS.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&MAX_RECORD.to_le_bytes()); // snaplen
        h.extend_from_slice(&link_type.to_u32().to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, record: Vec::new() })
    }

    pub fn write(&mut self, time: Duration, data: &[u8]) -> io::Result<()> {
        let mut h = [0u8; RECORD_HEADER];
        h[0..4].copy_from_slice(&(time.as_secs() as u32).to_le_bytes());
        h[4..8].copy_from_slice(&time.subsec_micros().to_le_bytes());
        h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(data.len() as u32).to_le_bytes());
        self.record.clear();
        self.record.extend_from_slice(&h);
        self.record.extend_from_slice(data);
        self.out.write_all(&self.record)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn two_records() -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet).unwrap();
        w.write(Duration::new(5, 250_000_000), &[1, 2, 3]).unwrap();
        w.write(Duration::new(6, 0), &[4; 70]).unwrap();
        w.into_inner()
    }

    #[test]
    fn write_then_read() {
        let bytes = two_records();
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(r.link_type(), LinkType::Ethernet);
        let a = r.next_record().unwrap().unwrap();
        assert_eq!((a.time, a.data), (Duration::new(5, 250_000_000), vec![1, 2, 3]));
        assert_eq!(r.next_record().unwrap().unwrap().data.len(), 70);
        assert!(r.next_record().unwrap().is_none());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = two_records();
        let first_end = FILE_HEADER + RECORD_HEADER + 3;
        for n in 0..bytes.len() {
            let outcome = PcapReader::new(&bytes[..n]).and_then(|mut r| {
                while r.next_record()?.is_some() {}
                Ok(())
            });
            let clean_end = n == FILE_HEADER || n == first_end;
            assert_eq!(outcome.is_ok(), clean_end, "cut at {n}: {outcome:?}");
        }
    }

    #[test]
    fn corrupt_length_and_foreign_files() {
        let mut bytes = two_records();
        bytes[FILE_HEADER + 8..FILE_HEADER + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert!(matches!(r.next_record(), Err(PcapError::BadRecord { record: 1, .. })));
        assert!(matches!(PcapReader::new(&b"hello world, not a capture"[..]), Err(PcapError::NotPcap { .. })));
        let ng = [0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0];
        assert!(matches!(PcapReader::new(&ng[..]), Err(PcapError::Pcapng)));
    }
}
