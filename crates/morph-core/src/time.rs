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

/// A span a configuration writes in milliseconds (its key ends in `_ms`), fractions allowed;
/// read as nanoseconds with [`Millis::nanos`] where a policy measures time.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub f64);

/// A span a configuration writes in seconds (its key ends in `_s`), fractions allowed.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seconds(pub f64);

impl Millis {
    pub fn nanos(self) -> Nanos {
        ms_to_nanos(self.0)
    }

    pub fn secs(self) -> f64 {
        self.0 / MS_PER_S
    }
}

impl Seconds {
    pub fn nanos(self) -> Nanos {
        ms_to_nanos(self.ms())
    }

    pub fn ms(self) -> f64 {
        self.0 * MS_PER_S
    }
}

const MS_PER_S: f64 = 1e3;

/// Seconds in `ns` nanoseconds.
pub fn nanos_to_secs(ns: Nanos) -> f64 {
    ns as f64 / (NANOS_PER_MS * MS_PER_S)
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
        assert_eq!((Millis(2.5).nanos(), Millis(250.0).secs()), (2_500_000, 0.25));
        assert_eq!((Seconds(1.5).nanos(), Seconds(0.25).ms()), (1_500_000_000, 250.0));
        assert_eq!(nanos_to_secs(3_000_000_000), 3.0);
    }

    #[test]
    fn spans_are_written_as_plain_numbers() {
        let ms: Millis = serde_json::from_str("12.5").unwrap();
        assert_eq!((ms, serde_json::to_string(&Seconds(3.0)).unwrap()), (Millis(12.5), "3.0".to_string()));
    }
}
