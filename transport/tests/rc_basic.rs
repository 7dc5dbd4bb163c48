//! Every RC operation over a clean link, a few sizes: the smoke test of the engine.

use uroce_transport::engine::{Mtu, QpType};
use uroce_transport::sim::{run_op, LinkConfig, Op};

#[test]
fn every_rc_operation_on_a_clean_link() {
    for op in Op::ALL {
        for size in [0usize, 1, 1023, 1024, 1025, 5000] {
            let r = run_op(1, LinkConfig::clean(), QpType::Rc, Mtu::Mtu1024, op, size, 3);
            assert!(r.is_ok(), "{op:?} size {size}: {}", r.unwrap_err());
        }
    }
}

#[test]
fn lossy_link_rc() {
    let mut link = LinkConfig::clean();
    link.loss = 0.1;
    for op in Op::ALL {
        let r = run_op(2, link, QpType::Rc, Mtu::Mtu1024, op, 20_000, 3);
        assert!(r.is_ok(), "{op:?}: {}", r.unwrap_err());
    }
}
