//! Errors of the verbs: each names the verb (as libibverbs calls it) and what is wrong.

use std::fmt;
use std::io;
use uroce_stack::link::LinkError;
use uroce_transport::engine;

#[derive(Debug)]
pub enum Error {
    /// The engine refused the call.
    Engine {
        verb: &'static str,
        err: engine::Error,
    },
    /// The device could not be opened.
    Device(LinkError),
    NoSuchGid {
        index: usize,
        len: usize,
    },
    InvalidValue {
        verb: &'static str,
        what: String,
    },
    Timeout {
        verb: &'static str,
    },
    Os {
        verb: &'static str,
        err: io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Error::Engine { verb, err } => write!(f, "{verb}: {err}"),
            Error::Device(e) => write!(f, "ibv_open_device: {e}"),
            Error::NoSuchGid { index, len } => {
                write!(f, "ibv_query_gid: no GID index {index}; the table has {len} (0: IPv6 link-local, 1: IPv4)")
            }
            Error::InvalidValue { verb, what } => write!(f, "{verb}: invalid {what}"),
            Error::Timeout { verb } => write!(f, "{verb}: timed out"),
            Error::Os { verb, err } => write!(f, "{verb}: {err}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub(crate) fn engine(verb: &'static str) -> impl Fn(engine::Error) -> Error {
        move |err| Error::Engine { verb, err }
    }
}

/// A list post that stopped: `index` is the first work request not posted
/// (`bad_wr` of `ibv_post_send`); the ones before it were posted.
#[derive(Debug)]
pub struct PostError {
    pub index: usize,
    pub error: Error,
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "work request {} of the list: {}", self.index, self.error)
    }
}

impl std::error::Error for PostError {}
