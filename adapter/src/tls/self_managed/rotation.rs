//! When the self-managed certificate moves on, decided from the Secret's
//! certificates alone, so every replica decides alike and the Secret's
//! resourceVersion picks one writer:
//!
//! 1. The serving certificate nears its end (less than `renew_before`
//!    left): a new CA joins the bundle beside the serving one's CA; the
//!    serving certificate stays.
//! 2. Every APIService carried the new bundle when this round began, and
//!    the new CA is at least `settle` old: the serving certificate is
//!    replaced by one the new CA signs.
//! 3. The old CA leaves the bundle at the next step 1, a certificate
//!    lifetime after its certificate stopped being served.

use super::issue::Material;

/// Rotation's times, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// A serving certificate's lifetime.
    pub validity: i64,
    /// A serving certificate with less than this left is replaced.
    pub renew_before: i64,
    /// How long a new CA is in the bundle before it signs the served
    /// certificate (replicas and the API server read the bundle meanwhile).
    pub settle: i64,
}

impl Timing {
    /// A CA lives two serving lifetimes: it stays in the bundle one
    /// rotation after its certificate is replaced.
    pub fn ca_validity(&self) -> i64 {
        self.validity.saturating_mul(2)
    }
}

/// What to write to the Secret next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Keep,
    AddCa,
    Switch,
}

/// `carried`: every APIService this replica keeps already held the
/// Secret's bundle when the round began.
pub fn next(m: &Material, now: i64, t: Timing, carried: bool) -> Step {
    if m.settled() {
        if now >= m.serving.not_after.saturating_sub(t.renew_before) {
            return Step::AddCa;
        }
        return Step::Keep;
    }
    if carried && now >= m.newest_ca().not_before.saturating_add(t.settle) {
        return Step::Switch;
    }
    Step::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing {
        validity: 60,
        renew_before: 20,
        settle: 5,
    };

    #[test]
    fn a_new_ca_is_bundled_before_it_signs_and_the_old_one_stays_a_lifetime() {
        let names = ["svc.ns.svc".to_string()];
        let m = Material::generate(&names, 1_000, 60, T.ca_validity()).unwrap();
        assert_eq!(next(&m, 1_039, T, true), Step::Keep);
        assert_eq!(next(&m, 1_040, T, true), Step::AddCa);
        let added = m.with_new_ca(1_040, T.ca_validity()).unwrap();
        assert_eq!(next(&added, 1_041, T, true), Step::Keep, "too new");
        assert_eq!(next(&added, 1_050, T, false), Step::Keep, "not carried");
        assert_eq!(next(&added, 1_045, T, true), Step::Switch);
        let switched = added.with_new_serving(&names, 1_045, 60).unwrap();
        assert_eq!(switched.bundle.len(), 2, "the old CA stays");
        assert_eq!(next(&switched, 1_084, T, true), Step::Keep);
        assert_eq!(next(&switched, 1_085, T, false), Step::AddCa);
    }
}
