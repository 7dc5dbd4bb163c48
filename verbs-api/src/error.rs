//! Errors of the verbs: each names the verb (as libibverbs calls it) and what is wrong.

use std::fmt;
use std::io;
use uroce_stack::link::LinkError;
use uroce_transport::engine;

#[derive(Debug)]
/// Why a verb failed.
pub enum Error {
    /// The engine refused the call.
    Engine {
        /// The verb, as libibverbs names it.
        verb: &'static str,
        /// What the engine said.
        err: engine::Error,
    },
    /// The device could not be opened.
    Device(LinkError),
    /// A GID index past the end of the table.
    NoSuchGid {
        /// The index asked for.
        index: usize,
        /// The table's length.
        len: usize,
    },
    /// A GID the device holds but cannot send from (a udp link's GID 0).
    GidNotSendable {
        /// The index.
        index: usize,
        /// The GID there.
        gid: crate::Gid,
        /// The device.
        device: String,
        /// The indices it can send from.
        usable: String,
    },
    /// An argument out of range.
    InvalidValue {
        /// The verb.
        verb: &'static str,
        /// What was wrong.
        what: String,
    },
    /// A wait that ended without a result.
    Timeout {
        /// The verb.
        verb: &'static str,
    },
    /// The operating system refused.
    Os {
        /// The verb.
        verb: &'static str,
        /// The error.
        err: io::Error,
    },
    /// An rdma_cm call that does not apply now (e.g. `rdma_connect` before
    /// the route is resolved), with the errno librdmacm would set.
    Cm {
        /// The verb, as librdmacm names it.
        verb: &'static str,
        /// What is wrong and what to do.
        what: String,
        /// The errno librdmacm returns for it (EINVAL, EADDRINUSE, ...).
        errno: i32,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.verb() {
            Some(verb) => write!(f, "{verb}: {}", self.reason()),
            None => f.write_str(&self.reason()),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The errno rdma-core (and the kernel rxe under it) gives for the same
    /// refusal: what the drop-in libibverbs returns to C.
    pub fn errno(&self) -> i32 {
        use nix::errno::Errno;
        let e = match self {
            Error::Engine { err: engine::Error::QueueFull { .. }, .. } => Errno::ENOMEM,
            Error::Engine { err: engine::Error::GsiQpExists, .. } => Errno::EEXIST,
            Error::Engine { err: engine::Error::McastLimit(_), .. } => Errno::ENOMEM,
            Error::Engine { .. } => Errno::EINVAL,
            Error::Device(_) => Errno::ENODEV,
            Error::NoSuchGid { .. } | Error::GidNotSendable { .. } | Error::InvalidValue { .. } => Errno::EINVAL,
            Error::Timeout { .. } => Errno::ETIMEDOUT,
            Error::Os { err, .. } if err.kind() == std::io::ErrorKind::Unsupported => Errno::EOPNOTSUPP,
            Error::Os { err, .. } => return err.raw_os_error().unwrap_or(Errno::EIO as i32),
            Error::Cm { errno, .. } => return *errno,
        };
        e as i32
    }
}

impl Error {
    /// The usual fix for the refusals programs meet most (a full queue, a
    /// QP in the wrong state), for messages that say what to do.
    pub fn advice(&self) -> Option<&'static str> {
        Some(match self {
            Error::Engine { err: engine::Error::QueueFull { .. }, .. } => {
                "poll the CQ for the completions of earlier requests before posting more, or create the QP with a \
                 larger max_send_wr / max_recv_wr"
            }
            Error::Engine { err: engine::Error::InvalidState { .. }, .. } => {
                "move the QP on with ibv_modify_qp first: receives from INIT, sends from RTS (RESET -> INIT -> RTR -> RTS)"
            }
            _ => return None,
        })
    }

    /// The verb that failed, as the message names it first.
    fn verb(&self) -> Option<&'static str> {
        match self {
            Error::Engine { verb, .. }
            | Error::InvalidValue { verb, .. }
            | Error::Timeout { verb }
            | Error::Os { verb, .. }
            | Error::Cm { verb, .. } => Some(verb),
            Error::Device(_) => Some("ibv_open_device"),
            Error::NoSuchGid { .. } => Some("ibv_query_gid"),
            Error::GidNotSendable { .. } => None,
        }
    }

    /// What went wrong without the verb's name in front, for a caller that
    /// names the verb itself (the drop-in's `UROCE_EXPLAIN` lines).
    pub fn reason(&self) -> String {
        match self {
            Error::Engine { err, .. } => err.to_string(),
            Error::Device(e) => e.to_string(),
            Error::NoSuchGid { index, len } => {
                format!("no GID index {index}; the table has {len}, indices 0 to {}", len.saturating_sub(1))
            }
            Error::GidNotSendable { index, gid, device, usable } => format!(
                "GID index {index} ({}) of {device} cannot be sent from: a udp device sends from its own address only \
                 (GID index {usable}); for link-local GIDs over udp, open udp:[fe80::...%IFACE], or use a packet device",
                gid.to_ipv6()
            ),
            Error::InvalidValue { what, .. } => format!("invalid {what}"),
            Error::Timeout { .. } => "timed out".into(),
            Error::Os { err, .. } => err.to_string(),
            Error::Cm { what, .. } => what.clone(),
        }
    }

    pub(crate) fn engine(verb: &'static str) -> impl Fn(engine::Error) -> Error {
        move |err| Error::Engine { verb, err }
    }
}

/// A list post that stopped: `index` is the first work request not posted
/// (`bad_wr` of `ibv_post_send`); the ones before it were posted.
#[derive(Debug)]
pub struct PostError {
    /// The first work request not posted.
    pub index: usize,
    /// Why.
    pub error: Error,
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "work request {} of the list: {}", self.index, self.error)
    }
}

impl std::error::Error for PostError {}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_reason_leaves_the_verb_out() {
        let os = Error::Os { verb: "rdma_listen", err: std::io::Error::from_raw_os_error(98) };
        assert!(os.to_string().starts_with("rdma_listen: "));
        assert!(!os.reason().contains("rdma_listen"), "{}", os.reason());
        let cm = Error::Cm { verb: "rdma_bind_addr", what: "port 7 is taken".into(), errno: 98 };
        assert_eq!(cm.reason(), "port 7 is taken");
        assert_eq!(Error::Timeout { verb: "rdma_resolve_addr" }.reason(), "timed out");
    }
}
