//! Time as integer nanoseconds. Policies receive `now` from their driver and never read a clock.

use std::ops::{Add, Sub};

use serde::{Deserialize, Serialize};

/// A point in time, in nanoseconds since the driver's epoch (server start, or simulation start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Time(pub u64);

/// A span of time in nanoseconds.
pub type Nanos = u64;

pub const NANOS_PER_MS: f64 = 1e6;

impl Time {
    pub const ZERO: Time = Time(0);

    pub fn from_millis_f64(ms: f64) -> Time {
        Time(ms_to_nanos(ms))
    }

    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_MS
    }

    /// Nanoseconds from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Nanos {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Nanos> for Time {
    type Output = Time;
    fn add(self, rhs: Nanos) -> Time {
        Time(self.0 + rhs)
    }
}

impl Sub for Time {
    type Output = Nanos;
    fn sub(self, rhs: Time) -> Nanos {
        self.since(rhs)
    }
}

/// Milliseconds (possibly fractional) to whole nanoseconds, rounded to nearest.
pub fn ms_to_nanos(ms: f64) -> Nanos {
    (ms * NANOS_PER_MS).round().max(0.0) as Nanos
}

pub fn nanos_to_ms(ns: Nanos) -> f64 {
    ns as f64 / NANOS_PER_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        assert_eq!(ms_to_nanos(1.5), 1_500_000);
        assert_eq!(Time::from_millis_f64(2.25).as_millis_f64(), 2.25);
        assert_eq!(Time(10) - Time(4), 6);
        assert_eq!(Time(4) - Time(10), 0);
        assert_eq!(Time(4) + 6, Time(10));
    }
}
