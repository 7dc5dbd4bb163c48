//! Work completion status, with libibverbs' numbers and `ibv_wc_status_str` text.

use core::fmt;

macro_rules! statuses {
    ($($variant:ident = $v:expr, $text:expr;)+) => {
        /// `enum ibv_wc_status`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum WcStatus {
            $($variant = $v,)+
        }
        impl WcStatus {
            pub const ALL: &'static [WcStatus] = &[$(WcStatus::$variant),+];
            /// The text of `ibv_wc_status_str` (rdma-core libibverbs/enum_strs.c).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(WcStatus::$variant => $text,)+
                }
            }
            pub fn from_u32(v: u32) -> Option<WcStatus> {
                Self::ALL.iter().copied().find(|s| *s as u32 == v)
            }
        }
    };
}

statuses! {
    Success = 0, "success";
    LocLenErr = 1, "local length error";
    LocQpOpErr = 2, "local QP operation error";
    LocEecOpErr = 3, "local EE context operation error";
    LocProtErr = 4, "local protection error";
    WrFlushErr = 5, "Work Request Flushed Error";
    MwBindErr = 6, "memory management operation error";
    BadRespErr = 7, "bad response error";
    LocAccessErr = 8, "local access error";
    RemInvReqErr = 9, "remote invalid request error";
    RemAccessErr = 10, "remote access error";
    RemOpErr = 11, "remote operational error";
    RetryExcErr = 12, "transport retry counter exceeded";
    RnrRetryExcErr = 13, "RNR retry counter exceeded";
    LocRddViolErr = 14, "local RDD violation error";
    RemInvRdReqErr = 15, "remote invalid RD request";
    RemAbortErr = 16, "aborted error";
    InvEecnErr = 17, "invalid EE context number";
    InvEecStateErr = 18, "invalid EE context state";
    FatalErr = 19, "fatal error";
    RespTimeoutErr = 20, "response timeout error";
    GeneralErr = 21, "general error";
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn numbers_and_text_match_libibverbs() {
        assert_eq!(WcStatus::ALL.len(), 22);
        for (i, s) in WcStatus::ALL.iter().enumerate() {
            assert_eq!(*s as u32, i as u32);
            assert_eq!(WcStatus::from_u32(i as u32), Some(*s));
        }
        assert_eq!(WcStatus::WrFlushErr.to_string(), "Work Request Flushed Error");
        assert_eq!(WcStatus::RnrRetryExcErr.to_string(), "RNR retry counter exceeded");
        assert_eq!(WcStatus::GeneralErr as u32, 21);
        assert_eq!(WcStatus::from_u32(22), None);
    }
}
