//! Where the random choices a peer must not guess come from: memory keys,
//! QP numbers, initial PSNs and CM communication IDs.
//!
//! ReDMArk (USENIX Security 2021) injected into connections and read remote
//! memory by predicting exactly these numbers. An engine draws them from a
//! ChaCha20 stream keyed with 256 bits: from the operating system's CSPRNG
//! by default ([`Seed::Secret`], filled by the caller, since this crate does
//! no I/O), so one number seen on the wire says nothing about the others; or
//! from a number ([`Seed::Fixed`]) for runs that must repeat exactly.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// The seed of an engine's (or a CM's) random choices.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Seed {
    /// 32 bytes from the operating system's CSPRNG (`getrandom`): keys,
    /// QPNs, PSNs and comm IDs that nobody can predict.
    Secret([u8; 32]),
    /// A number, so that a run repeats exactly (tests, `--seed`). Insecure:
    /// whoever knows or guesses the number knows every key.
    Fixed(u64),
}

impl Seed {
    /// The stream of random numbers this seed starts.
    pub(crate) fn rng(self) -> ChaCha20Rng {
        match self {
            Seed::Secret(key) => ChaCha20Rng::from_seed(key),
            Seed::Fixed(n) => ChaCha20Rng::seed_from_u64(n),
        }
    }

    /// A seed for another generator, drawn from `rng` (which this seed
    /// started): secret if this one is, reproducible if this one is.
    pub(crate) fn derive(self, rng: &mut ChaCha20Rng) -> Seed {
        match self {
            Seed::Secret(_) => Seed::Secret(rng.gen()),
            Seed::Fixed(_) => Seed::Fixed(rng.gen()),
        }
    }
}

/// Never prints a secret seed.
impl core::fmt::Debug for Seed {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        match self {
            Seed::Secret(_) => f.write_str("Seed::Secret(..)"),
            Seed::Fixed(n) => write!(f, "Seed::Fixed({n})"),
        }
    }
}
