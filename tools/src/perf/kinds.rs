//! The names perftest gives to what a test is: the eight tests, the verb,
//! BW or latency, the connection type, the atomic operation, duration mode.

use clap::ValueEnum;

/// The eight tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestName {
    #[value(name = "write_bw")]
    WriteBw,
    #[value(name = "read_bw")]
    ReadBw,
    #[value(name = "send_bw")]
    SendBw,
    #[value(name = "atomic_bw")]
    AtomicBw,
    #[value(name = "write_lat")]
    WriteLat,
    #[value(name = "read_lat")]
    ReadLat,
    #[value(name = "send_lat")]
    SendLat,
    #[value(name = "atomic_lat")]
    AtomicLat,
}

impl TestName {
    pub fn name(self) -> &'static str {
        match self {
            TestName::WriteBw => "write_bw",
            TestName::ReadBw => "read_bw",
            TestName::SendBw => "send_bw",
            TestName::AtomicBw => "atomic_bw",
            TestName::WriteLat => "write_lat",
            TestName::ReadLat => "read_lat",
            TestName::SendLat => "send_lat",
            TestName::AtomicLat => "atomic_lat",
        }
    }
    pub fn verb(self) -> Verb {
        match self {
            TestName::WriteBw | TestName::WriteLat => Verb::Write,
            TestName::ReadBw | TestName::ReadLat => Verb::Read,
            TestName::SendBw | TestName::SendLat => Verb::Send,
            TestName::AtomicBw | TestName::AtomicLat => Verb::Atomic,
        }
    }
    pub fn tst(self) -> Tst {
        match self {
            TestName::WriteBw | TestName::ReadBw | TestName::SendBw | TestName::AtomicBw => Tst::Bw,
            _ => Tst::Lat,
        }
    }
}

/// perftest's `VerbType`, in its order (the order matters to the address lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Send = 0,
    Write = 1,
    Read = 2,
    Atomic = 3,
}

impl Verb {
    /// `testsStr`.
    pub fn title(self) -> &'static str {
        ["Send", "RDMA_Write", "RDMA_Read", "Atomic"][self as usize]
    }
    pub fn one_sided_rd(self) -> bool {
        matches!(self, Verb::Read | Verb::Atomic)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tst {
    Lat,
    Bw,
}

/// Connection types uroce carries out (`connStr`: RC, UC, UD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    Rc,
    Uc,
    Ud,
}

impl Conn {
    pub fn name(self) -> &'static str {
        ["RC", "UC", "UD"][self as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicType {
    CmpAndSwap,
    FetchAndAdd,
}

impl AtomicType {
    pub fn name(self) -> &'static str {
        ["CMP_AND_SWAP", "FETCH_AND_ADD"][self as usize]
    }
}

/// Duration mode (`-D`): the run lasts `secs`; samples are taken between
/// `margin` after the start and `margin` before the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationSpec {
    pub secs: u64,
    pub margin: u64,
}
