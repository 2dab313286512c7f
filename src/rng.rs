//! Deterministic pseudo-random numbers (splitmix64) for the emulator's data and faults and the
//! client's backoff jitter: the same seed gives the same data and faults on every platform.

/// A small, fast, seedable generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

/// Mixes one 64-bit value into a well-distributed one (the splitmix64 finaliser).
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator for `seed` and a `stream` (independent sequences from one seed).
    pub fn new(seed: u64, stream: u64) -> Self {
        Rng(mix(seed ^ mix(stream.wrapping_add(0x5EED))))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `[0, n)`; `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A uniform integer in `[lo, hi]`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A version-4 style UUID string.
    pub fn uuid(&mut self) -> String {
        uuid_from(self.next_u64(), self.next_u64())
    }
}

/// Formats two 64-bit halves as a lowercase version-4 UUID.
pub fn uuid_from(hi: u64, lo: u64) -> String {
    let mut out = String::with_capacity(36);
    push_uuid(&mut out, hi, lo);
    out
}

/// Appends the UUID of `uuid_from(hi, lo)` to `out` (the emulator renders one per event).
pub fn push_uuid(out: &mut String, hi: u64, lo: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hi = (hi & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
    let lo = (lo & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    let mut buf = [b'-'; 36];
    let mut put = |from: usize, to: usize, bits: u64| {
        for (k, slot) in buf[from..to].iter_mut().rev().enumerate() {
            *slot = HEX[((bits >> (4 * k)) & 0xF) as usize];
        }
    };
    put(0, 8, hi >> 32);
    put(9, 13, (hi >> 16) & 0xFFFF);
    put(14, 18, hi & 0xFFFF);
    put(19, 23, lo >> 48);
    put(24, 36, lo & 0xFFFF_FFFF_FFFF);
    // Hex digits and dashes only: always ASCII.
    out.extend(buf.iter().map(|&b| b as char));
}

/// A keyed bijection of `[0, n)`, used to serve "shuffled" pages that stay consistent across
/// the pages of one query. Invertible steps on the next power of two, cycle-walked into range.
pub fn permute(x: u64, n: u64, key: u64) -> u64 {
    if n <= 1 {
        return x;
    }
    let bits = 64 - (n - 1).leading_zeros();
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let half = (bits / 2).max(1);
    let k1 = mix(key) | 1;
    let k2 = mix(key ^ 0xA5A5);
    let mut y = x;
    loop {
        for _ in 0..3 {
            y = y.wrapping_mul(k1) & mask;
            y ^= y >> half;
            y = y.wrapping_add(k2) & mask;
        }
        if y < n {
            return y;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_is_a_bijection() {
        for n in [1u64, 2, 3, 7, 100, 257, 1000, 4096] {
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = permute(x, n, 42);
                assert!(y < n);
                assert!(!seen[y as usize], "collision for n={n}");
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7, 1);
        let mut b = Rng::new(7, 1);
        let mut c = Rng::new(8, 1);
        let xa: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..5).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn uuid_shape() {
        let u = Rng::new(1, 2).uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_eq!(u.matches('-').count(), 4);
    }

    #[test]
    fn uuid_digits_are_the_bits() {
        let mut rng = Rng::new(5, 6);
        for _ in 0..1000 {
            let (hi, lo) = (rng.next_u64(), rng.next_u64());
            let h = (hi & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
            let l = (lo & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
            let expected = format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                h >> 32,
                (h >> 16) & 0xFFFF,
                h & 0xFFFF,
                l >> 48,
                l & 0xFFFF_FFFF_FFFF
            );
            assert_eq!(uuid_from(hi, lo), expected);
        }
    }
}
