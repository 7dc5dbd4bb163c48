//! The QP state machine: which transitions exist and which attributes each one
//! requires or accepts (the table of the kernel's `ib_modify_qp_is_ok`, from
//! IBTA Vol 1 11.2.4.2), and the checks on attribute values.

use super::attr::{ModifyError, QpAttr, QpAttrMask as M, QpState as S, QpType};

/// Required and optional attributes of one transition.
struct Rule {
    required: M,
    optional: M,
}

const fn m(bits: u32) -> M {
    M(bits)
}

/// The rule for `from -> to` on `t`, or `None` when the transition is invalid.
fn rule(t: QpType, from: S, to: S) -> Option<Rule> {
    use QpType::*;
    let none = m(0);
    let r = |required: M, optional: M| Some(Rule { required, optional });
    match (from, to) {
        (_, S::Reset) | (_, S::Err) => r(none, none),
        (S::Reset, S::Init) => match t {
            Rc | Uc => r(M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, none),
            Ud => r(M::PKEY_INDEX | M::PORT | M::QKEY, none),
        },
        (S::Init, S::Init) => match t {
            Rc | Uc => r(none, M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
            Ud => r(none, M::PKEY_INDEX | M::PORT | M::QKEY),
        },
        (S::Init, S::Rtr) => match t {
            Rc => r(
                M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
            ),
            Uc => r(M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN, M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX),
            Ud => r(none, M::PKEY_INDEX | M::QKEY),
        },
        (S::Rtr, S::Rts) => match t {
            Rc => r(
                M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::PATH_MIG_STATE,
            ),
            Uc => r(M::SQ_PSN, M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE),
            Ud => r(M::SQ_PSN, M::CUR_STATE | M::QKEY),
        },
        (S::Rts, S::Rts) | (S::Sqd, S::Rts) => match t {
            Rc => r(none, M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE | M::MIN_RNR_TIMER),
            Uc => r(none, M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE),
            Ud => r(none, M::CUR_STATE | M::QKEY),
        },
        (S::Rts, S::Sqd) => r(none, M::EN_SQD_ASYNC_NOTIFY),
        (S::Sqd, S::Sqd) => match t {
            Rc => r(
                none,
                M::AV
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
            ),
            Uc => r(none, M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE),
            Ud => r(none, M::PKEY_INDEX | M::QKEY),
        },
        (S::Sqe, S::Rts) => match t {
            Rc => None,
            Uc => r(none, M::CUR_STATE | M::ACCESS_FLAGS),
            Ud => r(none, M::CUR_STATE | M::QKEY),
        },
        _ => None,
    }
}

/// The mask a `from -> to` modify of a `t` QP must carry: `STATE` and the
/// transition's required attributes (`None` when the transition is invalid).
/// The verbs layer's `to_init`/`to_rtr`/`to_rts`, rdma_cm's
/// `rdma_init_qp_attr` and the simulation all build their masks from it.
pub fn required_mask(t: QpType, from: S, to: S) -> Option<M> {
    rule(t, from, to).map(|r| r.required | M::STATE)
}

/// Largest `max_rd_atomic` / `max_dest_rd_atomic` this device offers (rxe's 128).
pub const MAX_RD_ATOMIC: u8 = 128;

/// Checks a modify request against the table and the attribute ranges.
/// Returns the target state.
pub(crate) fn check_modify(t: QpType, cur: S, attr: &QpAttr, mask: M) -> Result<S, ModifyError> {
    if mask.contains(M::CUR_STATE) && attr.cur_qp_state != cur {
        return Err(ModifyError::WrongCurrentState { given: attr.cur_qp_state, actual: cur });
    }
    let to = if mask.contains(M::STATE) { attr.qp_state } else { cur };
    let rule = rule(t, cur, to).ok_or(ModifyError::InvalidTransition { qp_type: t, from: cur, to })?;
    let given = mask & !(M::STATE | M::CUR_STATE);
    let missing = rule.required & !given;
    if !missing.is_empty() {
        return Err(ModifyError::MissingAttributes { from: cur, to, missing });
    }
    let unexpected = given & !(rule.required | rule.optional | M::CUR_STATE);
    if !unexpected.is_empty() && to != S::Reset && to != S::Err {
        return Err(ModifyError::UnexpectedAttributes { from: cur, to, unexpected });
    }
    check_values(attr, mask)?;
    Ok(to)
}

fn check_values(a: &QpAttr, mask: M) -> Result<(), ModifyError> {
    let bad = |attribute: &'static str, value: u64| Err(ModifyError::InvalidValue { attribute, value });
    if mask.contains(M::ALT_PATH) {
        return bad("IBV_QP_ALT_PATH (alternate paths are not supported)", 1);
    }
    if mask.contains(M::PORT) && a.port_num != 1 {
        return bad("port_num", a.port_num.into());
    }
    if mask.contains(M::PKEY_INDEX) && a.pkey_index != 0 {
        return bad("pkey_index", a.pkey_index.into());
    }
    if mask.contains(M::RETRY_CNT) && a.retry_cnt > 7 {
        return bad("retry_cnt", a.retry_cnt.into());
    }
    if mask.contains(M::RNR_RETRY) && a.rnr_retry > 7 {
        return bad("rnr_retry", a.rnr_retry.into());
    }
    if mask.contains(M::MIN_RNR_TIMER) && a.min_rnr_timer > 31 {
        return bad("min_rnr_timer", a.min_rnr_timer.into());
    }
    if mask.contains(M::TIMEOUT) && a.timeout > 31 {
        return bad("timeout", a.timeout.into());
    }
    if mask.contains(M::MAX_QP_RD_ATOMIC) && a.max_rd_atomic > MAX_RD_ATOMIC {
        return bad("max_rd_atomic", a.max_rd_atomic.into());
    }
    if mask.contains(M::MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > MAX_RD_ATOMIC {
        return bad("max_dest_rd_atomic", a.max_dest_rd_atomic.into());
    }
    if mask.contains(M::DEST_QPN) && a.dest_qp_num > 0xff_ffff {
        return bad("dest_qp_num", a.dest_qp_num.into());
    }
    if mask.contains(M::RQ_PSN) && a.rq_psn > 0xff_ffff {
        return bad("rq_psn", a.rq_psn.into());
    }
    if mask.contains(M::SQ_PSN) && a.sq_psn > 0xff_ffff {
        return bad("sq_psn", a.sq_psn.into());
    }
    Ok(())
}

/// Copies the fields named by `mask` from `src` to `dst` (the state aside).
pub(crate) fn apply(dst: &mut QpAttr, src: &QpAttr, mask: M) {
    macro_rules! copy {
        ($($bit:ident => $($field:ident),+;)+) => {
            $( if mask.contains(M::$bit) { $( dst.$field = src.$field; )+ } )+
        };
    }
    copy! {
        EN_SQD_ASYNC_NOTIFY => en_sqd_async_notify;
        ACCESS_FLAGS => qp_access_flags;
        PKEY_INDEX => pkey_index;
        PORT => port_num;
        QKEY => qkey;
        AV => ah_attr;
        PATH_MTU => path_mtu;
        TIMEOUT => timeout;
        RETRY_CNT => retry_cnt;
        RNR_RETRY => rnr_retry;
        RQ_PSN => rq_psn;
        MAX_QP_RD_ATOMIC => max_rd_atomic;
        MIN_RNR_TIMER => min_rnr_timer;
        SQ_PSN => sq_psn;
        MAX_DEST_RD_ATOMIC => max_dest_rd_atomic;
        DEST_QPN => dest_qp_num;
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn to(s: S) -> QpAttr {
        QpAttr { qp_state: s, port_num: 1, ..QpAttr::default() }
    }

    #[test]
    fn legal_path_for_rc() {
        let init = M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
        assert_eq!(check_modify(QpType::Rc, S::Reset, &to(S::Init), init), Ok(S::Init));
        let rtr = M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER;
        assert_eq!(check_modify(QpType::Rc, S::Init, &to(S::Rtr), rtr), Ok(S::Rtr));
        let rts = M::STATE | M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC;
        assert_eq!(check_modify(QpType::Rc, S::Rtr, &to(S::Rts), rts), Ok(S::Rts));
        assert_eq!(check_modify(QpType::Rc, S::Rts, &to(S::Err), M::STATE), Ok(S::Err));
    }

    #[test]
    fn the_required_mask_takes_every_type_to_rts_and_nothing_less_does() {
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let path = [(S::Reset, S::Init), (S::Init, S::Rtr), (S::Rtr, S::Rts)];
            for (from, next) in path {
                let mask = required_mask(t, from, next).unwrap();
                assert_eq!(check_modify(t, from, &to(next), mask), Ok(next), "{t:?} {from:?} -> {next:?}");
                for bit in (0..32).map(|b| M(1 << b)).filter(|&b| b != M::STATE && mask.contains(b)) {
                    assert!(check_modify(t, from, &to(next), mask & !bit).is_err(), "{t:?} {from:?}: {bit:?} optional");
                }
            }
        }
        assert_eq!(required_mask(QpType::Ud, S::Init, S::Rtr), Some(M::STATE));
        assert_eq!(required_mask(QpType::Rc, S::Reset, S::Rts), None);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = check_modify(QpType::Rc, S::Reset, &to(S::Rts), M::STATE).unwrap_err();
        assert_eq!(e.to_string(), "modify QP: RESET -> RTS is not a valid transition for a Rc QP");
        let e = check_modify(QpType::Rc, S::Init, &to(S::Rtr), M::STATE | M::AV | M::PATH_MTU).unwrap_err();
        assert_eq!(
            e.to_string(),
            "modify QP INIT -> RTR: missing required attributes IBV_QP_RQ_PSN, IBV_QP_MIN_RNR_TIMER, \
             IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_DEST_QPN"
        );
        let e = check_modify(QpType::Ud, S::Reset, &to(S::Init), M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY | M::AV)
            .unwrap_err();
        assert!(matches!(e, ModifyError::UnexpectedAttributes { unexpected, .. } if unexpected == M::AV));
        let mut a = to(S::Rts);
        a.retry_cnt = 8;
        let rts = M::STATE | M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC;
        assert_eq!(
            check_modify(QpType::Rc, S::Rtr, &a, rts),
            Err(ModifyError::InvalidValue { attribute: "retry_cnt", value: 8 })
        );
        assert!(check_modify(QpType::Rc, S::Sqe, &to(S::Rts), M::STATE).is_err());
        assert_eq!(check_modify(QpType::Uc, S::Sqe, &to(S::Rts), M::STATE), Ok(S::Rts));
    }

    #[test]
    fn the_transition_table_is_the_kernels() {
        use QpType::*;
        use S::*;
        let states = [Reset, Init, Rtr, Rts, Sqd, Sqe, Err];
        for t in [Rc, Uc, Ud] {
            for from in states {
                for to in states {
                    let forward = matches!(
                        (from, to),
                        (Reset, Init)
                            | (Init, Init)
                            | (Init, Rtr)
                            | (Rtr, Rts)
                            | (Rts, Rts)
                            | (Rts, Sqd)
                            | (Sqd, Sqd)
                            | (Sqd, Rts)
                    );
                    // RC never is in SQE: its send errors take it to ERR.
                    let allowed = to == Reset || to == Err || forward || (from == Sqe && to == Rts && t != Rc);
                    assert_eq!(rule(t, from, to).is_some(), allowed, "{t:?} {from} -> {to}");
                    let attr = QpAttr { qp_state: to, port_num: 1, ..QpAttr::default() };
                    let mask = M::STATE | rule(t, from, to).map_or(M::EMPTY, |r| r.required);
                    assert_eq!(check_modify(t, from, &attr, mask).is_ok(), allowed, "{t:?} {from} -> {to}");
                }
            }
        }
    }

    #[test]
    fn every_attribute_out_of_range_is_named() {
        let rts = M::STATE | M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC;
        type Case = (fn(&mut QpAttr), M, S, S, &'static str);
        let cases: [Case; 9] = [
            (|a| a.retry_cnt = 8, rts, S::Rtr, S::Rts, "retry_cnt"),
            (|a| a.rnr_retry = 8, rts, S::Rtr, S::Rts, "rnr_retry"),
            (|a| a.timeout = 32, rts, S::Rtr, S::Rts, "timeout"),
            (|a| a.sq_psn = 1 << 24, rts, S::Rtr, S::Rts, "sq_psn"),
            (|a| a.max_rd_atomic = MAX_RD_ATOMIC + 1, rts, S::Rtr, S::Rts, "max_rd_atomic"),
            (
                |a| a.pkey_index = 1,
                M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                S::Reset,
                S::Init,
                "pkey_index",
            ),
            (|a| a.port_num = 2, M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, S::Reset, S::Init, "port_num"),
            (
                |a| a.min_rnr_timer = 32,
                M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
                S::Init,
                S::Rtr,
                "min_rnr_timer",
            ),
            (
                |a| a.dest_qp_num = 1 << 24,
                M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
                S::Init,
                S::Rtr,
                "dest_qp_num",
            ),
        ];
        for (set, mask, from, to, name) in cases {
            let mut a = QpAttr { qp_state: to, port_num: 1, ..QpAttr::default() };
            set(&mut a);
            match check_modify(QpType::Rc, from, &a, mask) {
                Err(ModifyError::InvalidValue { attribute, .. }) => assert_eq!(attribute, name),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
