//! A small pseudo-random generator (SplitMix64), written here rather than taken from a crate.
//!
//! `gen` promises the same files for the same seed, for good: a generator from a dependency may
//! change its stream in an upgrade, this one cannot. `pull` uses it for backoff jitter, where any
//! spread will do, and the simulation its output function for replayable draws. It is not for
//! secrets.

/// SplitMix64's increment: 2⁶⁴ divided by the golden ratio.
pub(crate) const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a well-mixed 64-bit value from any input. Also the whole of a
/// counter-based generator (`mix(seed + n * GOLDEN)`), as the simulation draws its sequence.
pub(crate) fn mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64 (Steele, Lea and Flood): one 64-bit state, a good spread, a few instructions.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// A number in `0..n` (0 when `n` is 0), by multiply-and-shift (the bias is below 2⁻³²
    /// for the small ranges used here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True `percent` times in a hundred.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One item of a non-empty slice.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// One item of `(item, weight)` pairs, by weight.
    pub(crate) fn weighted<'a, T>(&mut self, items: &'a [(T, u64)]) -> &'a T {
        let total: u64 = items.iter().map(|(_, w)| w).sum();
        let mut at = self.below(total);
        for (item, w) in items {
            if at < *w {
                return item;
            }
            at -= w;
        }
        &items[items.len() - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_for_a_seed_never_changes() {
        // The published SplitMix64 values for seed 1234567.
        let mut r = Rng::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn ranges_stay_inside() {
        let mut r = Rng::new(7);
        for _ in 0..10_000 {
            let x = r.range(3, 5);
            assert!((3..=5).contains(&x), "{x}");
        }
        assert_eq!(r.below(0), 0);
    }
}
