//! [`Histogram`]: latencies in log-linear buckets, 16 per power of two (a percentile read from
//! it is within 1/32 of the true value), recorded lock-free by many clients and drained by one
//! reader. Fixed size (about 4 KiB), so a long soak's latencies cost no memory growth.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of sub-bucket below each power of two.
const SUB_BITS: u32 = 4;
/// Sub-buckets per power of two.
const SUB: u64 = 1 << SUB_BITS;
/// Values are clamped below 2^MAX_EXP µs (about 19 hours).
const MAX_EXP: u32 = 36;
/// Number of buckets: values below `SUB` one each, then `SUB` per power of two.
const BUCKETS: usize = ((MAX_EXP - SUB_BITS + 1) as usize) * SUB as usize;

/// Concurrent latency counts, in microseconds.
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts one latency of `micros`.
    pub fn record(&self, micros: u64) {
        self.buckets[index(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts since the last drain; the histogram starts again from zero. A latency recorded
    /// while draining lands in this drain or the next, never in both.
    pub fn drain(&self) -> Counts {
        Counts(
            self.buckets
                .iter()
                .map(|b| b.swap(0, Ordering::Relaxed))
                .collect(),
        )
    }
}

/// The counts of one drain (or of several, added up).
#[derive(Debug, Clone)]
pub struct Counts(Vec<u64>);

impl Counts {
    /// No counts.
    pub fn empty() -> Self {
        Self(vec![0; BUCKETS])
    }

    /// How many latencies were counted.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Counts) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a += b;
        }
    }

    /// The latency in milliseconds below which a fraction `q` (0.5, 0.99) of the counts lie: the
    /// middle of the bucket holding that rank. `NaN` when nothing was counted.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let total = self.total();
        if total == 0 {
            return f64::NAN;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, n) in self.0.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return middle(i) / 1000.0;
            }
        }
        unreachable!("the rank is at most the total")
    }
}

/// The bucket of `micros`: itself below `SUB`, else `SUB` buckets per power of two.
fn index(micros: u64) -> usize {
    let v = micros.min((1 << MAX_EXP) - 1);
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let sub = (v >> (exp - SUB_BITS)) & (SUB - 1);
    ((exp - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The middle of bucket `i`, in microseconds.
fn middle(i: usize) -> f64 {
    let i = i as u64;
    if i < SUB {
        return i as f64;
    }
    let exp = (i / SUB) as u32 + SUB_BITS - 1;
    let width = 1u64 << (exp - SUB_BITS);
    let low = (SUB + i % SUB) << (exp - SUB_BITS);
    low as f64 + (width as f64 - 1.0) / 2.0
}
