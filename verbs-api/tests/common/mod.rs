//! What several test binaries of the verbs API share.

use uroce_verbs::{ConnectAttr, Qp};

/// Connects two QPs (of one context or two) to each other over GID 1 of
/// their contexts, with rc_pingpong's defaults.
pub fn connect_pair(a: &Qp, b: &Qp) {
    let gid = |q: &Qp| q.pd().context().query_gid(1).unwrap();
    a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), gid(b))).unwrap();
    b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), gid(a))).unwrap();
}
