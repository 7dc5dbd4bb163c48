//! Device counters with the kernel rxe's names (rxe_hw_counters.c), so that
//! `rdma statistic` users find what they know.

macro_rules! counters {
    ($($variant:ident = $name:expr, $doc:expr;)+) => {
        /// One counter.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Counter {
            $(#[doc = $doc] $variant,)+
        }
        impl Counter {
            pub const ALL: &'static [Counter] = &[$(Counter::$variant),+];
            /// The name rxe gives this counter.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Counter::$variant => $name,)+
                }
            }
        }
    };
}

counters! {
    SentPkts = "sent_pkts", "Packets handed to the link.";
    RcvdPkts = "rcvd_pkts", "Packets accepted for a QP.";
    DuplicateRequest = "duplicate_request", "Requests with a PSN already seen (responder).";
    OutOfSeqRequest = "out_of_seq_request", "RC requests beyond the expected PSN that drew a sequence NAK (responder).";
    RcvdRnrErr = "rcvd_rnr_err", "RNR NAKs received (requester).";
    SendRnrErr = "send_rnr_err", "RNR NAKs sent (responder).";
    RcvdSeqErr = "rcvd_seq_err", "PSN sequence error NAKs received that acknowledged new packets (requester).";
    AckDeferred = "ack_deferred", "ACKs coalesced: replaced by a later one before they were sent (rxe: completer deferred).";
    RetryExceededErr = "retry_exceeded_err", "WRs failed with RETRY_EXC_ERR.";
    RetryRnrExceededErr = "retry_rnr_exceeded_err", "WRs failed with RNR_RETRY_EXC_ERR.";
    CompleterRetryErr = "completer_retry_err", "Go-back-N retries started by the completer.";
    SendErr = "send_err", "Packets that could not be built or sent (never, in this engine).";
    LinkDowned = "link_downed", "Link down events (the link layer's business; always 0 here).";
    RdmaSends = "rdma_sends", "SEND work requests completed, whatever their status (requester).";
    RdmaRecvs = "rdma_recvs", "Receive work requests completed successfully (responder).";
    // What follows is not in rxe's list: the drops and refusals a peer (or
    // an attacker) causes, so that an attack is seen (ReDMArk's M3).
    RcvdMalformed = "rcvd_malformed", "Dropped: not a valid packet (headers, TVer, opcode), or an opcode of another transport than its QP's.";
    BadPkey = "bad_pkey_cntr", "Dropped: a P_Key that is not the port's (the name of ibv_port_attr's counter).";
    QkeyViolation = "qkey_viol_cntr", "Dropped: a UD datagram with another Q_Key than its QP's (the name of ibv_port_attr's counter).";
    RcvdUnknownQpn = "rcvd_unknown_qpn", "Dropped: no QP with the destination QP number.";
    RcvdBadSrc = "rcvd_bad_src", "Dropped: an RC or UC packet not from the QP's peer (source GID) or not to its GID (as rxe's check_addr).";
    RcvdNoRecv = "rcvd_no_recv", "Dropped: a UD datagram or a UC SEND for a QP with no receive posted, or a UC WRITE with immediate's completion (its data placed); neither transport has an RNR NAK.";
    RcvdQpNotReady = "rcvd_qp_not_ready", "Dropped: a request for a QP that takes none in its state (RESET, INIT, ERR).";
    RkeyViolation = "rkey_violation", "Requests refused for their R_Key, range or rights (RC: NAKed, the QP to ERR; UC: dropped).";
    UcRkeyLimit = "uc_rkey_limit", "UC QPs moved to ERR after too many R_Key violations (UC_RKEY_VIOLATION_LIMIT).";
    RdAtomicRefused = "rd_atomic_refused", "READ and atomic requests beyond max_dest_rd_atomic outstanding, NAKed as invalid requests.";
    RemoteInvRefused = "remote_inv_refused", "SEND_WITH_INV naming a key that may not be invalidated remotely, NAKed.";
    AuthBadMac = "auth_bad_mac", "Dropped: a packet for an authenticated QP whose tag does not match (forged, changed or from another key), or a packet marked authenticated (its ICRC left unchecked) for a QP that holds no key.";
    AuthReplay = "auth_replay", "Dropped: a UC packet for an authenticated QP with a PSN it took already (a replay).";
    MwLocalOps = "mw_local_ops", "BIND_MW and LOCAL_INV work requests done (memory windows bound, keys invalidated).";
    MwBindRefused = "mw_bind_refused", "BIND_MW work requests refused (completed with MW_BIND_ERR).";
    LocalInvRefused = "local_inv_refused", "LOCAL_INV work requests refused (completed with LOC_QP_OP_ERR).";
    McastRcvd = "mcast_rcvd_pkts", "Multicast datagrams taken in for a group with attached QPs (each QP's copy also counts in rcvd_pkts).";
    McastNoGroup = "mcast_no_group", "Dropped: a multicast datagram for a group no QP here is attached to.";
}

impl Counter {
    /// How many of [`Counter::ALL`] are rxe's hardware counters, in rxe's
    /// order; the rest are uroce's own.
    pub const RXE_COUNT: usize = 15;
}

/// The counter values of one engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters([u64; Counter::ALL.len()]);

// By hand: the standard library derives `Default` for arrays of at most 32.
impl Default for Counters {
    fn default() -> Counters {
        Counters([0; Counter::ALL.len()])
    }
}

impl Counters {
    pub fn get(&self, c: Counter) -> u64 {
        self.0[c as usize]
    }
    pub(crate) fn inc(&mut self, c: Counter) {
        self.0[c as usize] += 1;
    }
    /// Every counter with its rxe name, in rxe's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Counter::ALL.iter().map(|c| (c.name(), self.get(*c)))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn names() {
        let mut c = Counters::default();
        c.inc(Counter::RcvdRnrErr);
        let all: Vec<_> = c.iter().collect();
        assert_eq!(all[0], ("sent_pkts", 0));
        assert_eq!(all[4], ("rcvd_rnr_err", 1));
        assert_eq!(all[Counter::RXE_COUNT - 1].0, "rdma_recvs");
        assert_eq!(all.len(), Counter::RXE_COUNT + 18);
    }
}
